# hutch: build, test (as root and as an unprivileged user), demo.
GO        ?= go
BIN       := $(CURDIR)/bin
# The unprivileged user the integration suite also runs as.
UNPRIV    ?= 65534
# libseccomp is linked statically where its archive is installed (Debian's
# libseccomp-dev has it): bin/hutch is then one file to copy, needing no
# libseccomp.so.2 where it runs. The archive comes before libseccomp-golang's
# -lseccomp, which --as-needed then drops. Expanded when each recipe runs,
# so after sysdeps has installed the library.
comma := ,
HOST_CGO_LDFLAGS := $(CGO_LDFLAGS)
SECCOMP_ARCHIVE = $(wildcard $(shell pkg-config --variable=libdir libseccomp 2>/dev/null)/libseccomp.a)
export CGO_LDFLAGS = $(strip $(HOST_CGO_LDFLAGS) $(if $(SECCOMP_ARCHIVE),-l:libseccomp.a -Wl$(comma)--as-needed))

.PHONY: all deps sysdeps build test test-unprivileged test-vm bench fuzz demo vet clean
SHELL := /bin/bash

all: build

# deps installs the system packages the build needs (libseccomp-golang is
# cgo) when they are missing (as root it installs them, otherwise it says
# what to install), and fetches the Go modules once: after it, build and
# test run offline (GOPROXY=off).
deps: sysdeps
	$(GO) mod download
	cd bench/plot && $(GO) mod download

sysdeps:
	@if ! pkg-config --exists libseccomp 2>/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev pkg-config; \
		else \
			echo "hutch needs libseccomp-dev and pkg-config: sudo apt-get install -y libseccomp-dev pkg-config" >&2; exit 1; \
		fi; \
	fi
	@# The Python client's test builds it offline with setuptools and wheel
	@# from Debian's wheels (TestPythonClient); only the tests need them.
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! ls /usr/share/python-wheels/wheel-*.whl >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-setuptools-whl python3-wheel-whl; \
	fi

build: deps
	$(GO) build -o $(BIN)/hutch ./cmd/hutch
	$(GO) build -o $(BIN)/hutch-image ./cmd/hutch-image
	$(GO) build -o $(BIN)/hutch-grants ./cmd/hutch-grants

vet: deps
	$(GO) vet ./...
	GOOS=darwin $(GO) build ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) build ./...
	GOOS=windows $(GO) vet ./runtime ./cmd/...
	@# The leak scanner's block pass is amd64 assembly; elsewhere (and with
	@# purego) its fallback builds.
	GOARCH=arm64 $(GO) vet ./leaks
	$(GO) vet -tags purego ./leaks

# test runs everything: vet, the unit tests and the integration suite (which
# drives the real CLI and the library) as the current user, and, when that is
# root, the integration suite again as an unprivileged uid. The timeouts
# guard against a hang, not a slow machine: the integration package takes
# about 12 minutes alone and over 20 on a machine busy with another heavy
# job (make test-vm beside it), which is when it must still pass.
test: deps vet
	$(GO) test -count=1 -timeout 45m ./...
	$(GO) test -run '^$$' -fuzz FuzzWire -fuzztime 100000x -timeout 5m ./nsinit
	$(GO) test -run '^$$' -fuzz FuzzFileRequest -fuzztime 50000x -timeout 5m ./nsinit
	$(GO) test -run '^$$' -fuzz FuzzDecodeExec -fuzztime 20000x -timeout 5m ./localapi
	$(GO) test -run '^$$' -fuzz FuzzRecord -fuzztime 3000x -timeout 5m ./processes
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 20000x -timeout 5m ./policyfile
	$(GO) test -run '^$$' -fuzz FuzzPassesAgree -fuzztime 50000x -timeout 5m ./leaks
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-unprivileged; fi

# The binaries are copied to a directory any uid can reach: the checkout may
# live under a home the unprivileged uid cannot enter. The TypeScript client
# is built here, as root (the unprivileged uid has no home for npm's cache),
# in a copy of its sources; its package.json and dist/ are what that uid runs
# (TestTypeScriptClient skips where node is missing). So are the Rust
# client's test executables (cargo test --no-run; TestRustClient runs them).
test-unprivileged:
	@dir=$$(mktemp -d /tmp/hutch-unpriv-XXXXXX) && chmod 0755 $$dir && \
	$(GO) build -o $$dir/hutch ./cmd/hutch && \
	$(GO) build -o $$dir/hutch-image ./cmd/hutch-image && \
	$(GO) build -o $$dir/hutch-grants ./cmd/hutch-grants && \
	$(GO) test -c -o $$dir/integration.test ./integration && \
	cp -r clients/python $$dir/python && \
	if command -v node >/dev/null && command -v npm >/dev/null; then \
		ts=clients/typescript && mkdir $$dir/ts-build $$dir/typescript && \
		cp -r $$ts/package.json $$ts/package-lock.json $$ts/tsconfig.json $$ts/src $$ts/test $$dir/ts-build/ && \
		(cd $$dir/ts-build && npm ci --loglevel=error --no-audit --no-fund && npm run --silent build) && \
		cp -r $$dir/ts-build/package.json $$dir/ts-build/dist $$dir/typescript/ && rm -rf $$dir/ts-build; \
	fi && \
	if cargo=$$(command -v cargo || { [ -x "$$HOME/.cargo/bin/cargo" ] && echo "$$HOME/.cargo/bin/cargo"; }); then \
		rs=clients/rust && mkdir $$dir/rust-build $$dir/rust && \
		cp -r $$rs/Cargo.toml $$rs/README.md $$rs/src $$rs/tests $$dir/rust-build/ && \
		(set -o pipefail; cd $$dir/rust-build && CARGO_TARGET_DIR=$$dir/rust-build/target $$cargo test --offline --no-run --message-format=json | \
			sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | xargs -r cp -t $$dir/rust/) && rm -rf $$dir/rust-build; \
	fi && \
	chmod -R a+rX $$dir && chmod 0755 $$dir/hutch $$dir/hutch-image $$dir/hutch-grants $$dir/integration.test && \
	echo "== integration suite as uid $(UNPRIV)" && \
	cd /tmp && setpriv --reuid=$(UNPRIV) --regid=$(UNPRIV) --clear-groups \
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent \
		HUTCH_BIN=$$dir/hutch HUTCH_PYTHON_CLIENT=$$dir/python HUTCH_TS_CLIENT=$$dir/typescript HUTCH_RUST_CLIENT_TESTS=$$dir/rust $$dir/integration.test -test.count=1 -test.timeout 45m -test.v 2>&1 | \
		grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|^        [^ ]' ; \
	rc=$${PIPESTATUS[0]}; rm -rf $$dir; exit $$rc

# test-vm runs the kernel-dependent part of the integration suite in QEMU
# guests, one per kernel of the matrix (5.10, 6.1, 6.12, the newest 7.x from
# Debian's mirror), each with a pure cgroup v2 hierarchy, as root and as an
# unprivileged uid (see integration/vm). VMFLAGS passes options, e.g.
#   make test-vm VMFLAGS='-kernels 6.1 -run TestMemoryLimit'
test-vm: deps
	@missing=""; \
	for t in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static; do \
		command -v $${t%%:*} >/dev/null || missing="$$missing $${t#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		else \
			echo "test-vm needs:$$missing (sudo apt-get install -y$$missing)" >&2; exit 1; \
		fi; \
	fi
	$(GO) run ./integration/vm $(VMFLAGS)

# bench measures spawn latency and CPU against bare fork/exec and bwrap
# (when installed), alternated with them round by round, a command through
# hutch serve's local API from a Python and a Node client against those
# clients spawning true and bwrap themselves (BenchmarkAPIExec; a client
# missing, or bwrap, is skipped), and the leak scanner's throughput on one
# core, then prints the issues' targets and regenerates bench/README.md's
# tables and the chart.
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 200x -timeout 90m ./bench/ | tee bench/results.txt
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench 'Scanner|Passes' -benchtime 5x -timeout 20m ./leaks/ | tee -a bench/results.txt
	cd bench/plot && $(GO) run . -in ../results.txt -readme ../README.md -svg ../latency.svg

# fuzz runs the fuzzer of the pre-runtime stage's decoder (nsinit/wire.c,
# held to the Go decoder) and of the checks the init and the filesystem
# executor run on a message before anything of it (plan.c's init_check,
# mounts.c's mnt_check), and the file server's check of a request
# (files.c's files_check), for FUZZTIME, built with AddressSanitizer so that
# a read past a message is caught, not only a crash; then the durable
# processes' record loader and the policy-file parser, which a damaged or
# half-written file reaches. make test runs each for a bounded count (the
# stage's decoder 100,000 inputs, about 10 s) without. Budgets are counts, not durations:
# go1.26's fuzzing coordinator can fail a run that reaches its -fuzztime
# deadline on a loaded machine ("context deadline exceeded", go.dev/issue/75804).
FUZZTIME ?= 1000000x
fuzz: deps
	$(GO) test -asan -run '^$$' -fuzz FuzzWire -fuzztime $(FUZZTIME) -timeout 3h ./nsinit
	$(GO) test -asan -run '^$$' -fuzz FuzzFileRequest -fuzztime $(FUZZTIME) -timeout 3h ./nsinit
	$(GO) test -run '^$$' -fuzz FuzzRecord -fuzztime $(FUZZTIME) -timeout 3h ./processes
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) -timeout 3h ./policyfile

demo: build
	$(BIN)/hutch demo

clean:
	rm -rf $(BIN)
