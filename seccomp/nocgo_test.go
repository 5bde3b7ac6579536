//go:build linux

package seccomp

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuildWithoutCgoSaysWhy: a CGO_ENABLED=0 build fails at this package
// with the remedy in its message, not with "undefined: seccomp.Compile"
// in a package that calls it.
func TestBuildWithoutCgoSaysWhy(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	c := exec.Command(goBin, "build", "-o", os.DevNull, ".")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := c.CombinedOutput()
	if err == nil {
		t.Fatal("CGO_ENABLED=0 go build succeeded: a build without a filter")
	}
	if !strings.Contains(string(out), "hutch_needs_cgo_and_libseccomp__build_with_CGO_ENABLED_1") {
		t.Errorf("CGO_ENABLED=0 go build does not say why:\n%s", out)
	}
}
