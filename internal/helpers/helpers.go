// Package helpers finds the helper programs the hutch CLI runs for what
// it does not link (hutch-image, hutch-grants): beside the running
// program, where a build or a package installs them together, else on
// $PATH.
package helpers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Find returns the path of the helper called name: the file beside the
// running program, else the one $PATH names. what says what it is, for
// the error without either.
func Find(name, what string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s %s is neither beside this program nor on $PATH (make build puts it in bin/; go install github.com/hutchbox/hutch/cmd/%s)", what, name, name)
}
