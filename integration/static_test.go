//go:build linux

package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryNeedsNoLibseccomp (issue 47): the hutch the Makefile builds
// links libseccomp statically, so the one file runs on a host without
// libseccomp.so.2. Judged by the dynamic loader (ldd) on the binary under
// test: the Makefile's (HUTCH_BIN, or built by TestMain under the
// Makefile's CGO_LDFLAGS). A binary built by a bare `go build` links the
// library dynamically, as libseccomp-golang asks: that is not the
// Makefile's build, and this test says so instead of judging it.
func TestBinaryNeedsNoLibseccomp(t *testing.T) {
	if os.Getenv("HUTCH_BIN") == "" && !strings.Contains(os.Getenv("CGO_LDFLAGS"), "libseccomp.a") {
		t.Skip("the binary under test was built by go build outside the Makefile (CGO_LDFLAGS names no libseccomp.a): make test builds it statically")
	}
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		t.Skip("no ldd")
	}
	out, err := exec.Command(ldd, hutchBin).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not a dynamic executable") {
		t.Fatalf("ldd %s: %v\n%s", hutchBin, err, out)
	}
	if strings.Contains(string(out), "libseccomp") {
		t.Errorf("%s needs libseccomp at run time (was libseccomp.a installed when it was built? make deps installs libseccomp-dev):\n%s", hutchBin, out)
	}
	// And it runs: a command under the default profile (seccomp on).
	ws := dir(t, "static-")
	r := runCLI(t, ws, nil, "true")
	if r.code != 0 || r.result == nil || r.result.Level == "" {
		t.Fatalf("hutch run -- true: %s", r)
	}
}
