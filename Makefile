# hutch: build, test (as root and as an unprivileged user), demo.
GO        ?= go
BIN       := $(CURDIR)/bin
# The unprivileged user the integration suite also runs as.
UNPRIV    ?= 65534

.PHONY: all build test test-unit test-integration demo vet clean

all: build

build:
	$(GO) build -o $(BIN)/hutch ./cmd/hutch

vet:
	$(GO) vet ./...

# test runs everything: vet, the unit tests, and the integration suite
# (which drives the real CLI and the library) as the current user and, when
# that is root, again as an unprivileged uid.
test: vet build
	$(GO) test -count=1 ./...
	$(MAKE) test-integration

test-integration: build
	$(GO) test -c -o $(BIN)/integration.test ./integration
	chmod 0755 $(BIN) $(BIN)/integration.test $(BIN)/hutch
	cd /tmp && HUTCH_BIN=$(BIN)/hutch $(BIN)/integration.test -test.count=1
	@if [ "$$(id -u)" = 0 ]; then \
		echo "== integration suite as uid $(UNPRIV)"; \
		cd /tmp && setpriv --reuid=$(UNPRIV) --regid=$(UNPRIV) --clear-groups \
			env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent \
			HUTCH_BIN=$(BIN)/hutch HUTCH_EXPECT_UID=$(UNPRIV) $(BIN)/integration.test -test.count=1; \
	fi

demo: build
	$(BIN)/hutch demo

clean:
	rm -rf $(BIN)
