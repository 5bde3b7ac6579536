package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMain builds the hutch-grants helper and puts it on $PATH, where the
// CLI's grants commands, run in this process, find it: beside the test
// binary there is none.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hutch-helpers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "hutch-grants"), "github.com/hutchbox/hutch/cmd/hutch-grants").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build hutch-grants: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
