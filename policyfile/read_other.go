//go:build !unix

package policyfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// openNonblocking opens path for reading.
func openNonblocking(path string) (*os.File, error) { return os.Open(path) }

// readUntrusted reads the policy file name in dir, refusing a symlink on
// the way (see the unix version).
func readUntrusted(dir string, name ...string) (*File, error) {
	p := dir
	for _, n := range name {
		p = filepath.Join(p, n)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: a symlink: a policy file in the workspace is read only where it lies, no link followed", p)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return readOpened(p, f)
}
