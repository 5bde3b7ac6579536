package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoUnpacker: hutch links no image unpacker and no SQLite. umoci
// and what it links (zstd, snappy, protobuf, go-digest, logrus, go-mtree)
// cost every hutch command about a millisecond of package initialisation
// and a third more page faults before it starts; the hutch-image helper
// unpacks instead (cmd/hutch-image). SQLite's packages cost a hutch start
// a third of its time (14.4 against 19.8 ms for hutch --version on a slow
// day); the hutch-grants helper keeps the grants (cmd/hutch-grants).
func TestLinksNoUnpacker(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range []string{
			"github.com/opencontainers/umoci",
			"github.com/klauspost/compress",
			"github.com/opencontainers/go-digest",
			"google.golang.org/protobuf",
			"github.com/vbatts/go-mtree",
			"modernc.org/sqlite",
			"modernc.org/libc",
		} {
			if pkg == heavy || strings.HasPrefix(pkg, heavy+"/") {
				t.Errorf("hutch links %s", pkg)
			}
		}
	}
}
