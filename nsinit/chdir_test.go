//go:build linux

package nsinit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestChdirStaysInRoots: the init enters a working directory only inside
// the command's trees, whatever symlink the path went through by then.
func TestChdirStaysInRoots(t *testing.T) {
	t.Chdir(t.TempDir()) // chdir changes the test's own directory
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory the host checked, replaced by a symlink since.
	if err := os.Symlink(outside, filepath.Join(root, "swapped")); err != nil {
		t.Fatal(err)
	}
	roots := []string{root}
	for _, dir := range []string{root, filepath.Join(root, "sub")} {
		if err := chdir(dir, roots); err != nil {
			t.Errorf("chdir(%s): %v", dir, err)
		}
	}
	for _, dir := range []string{outside, filepath.Join(root, "swapped"), "/etc"} {
		if err := chdir(dir, roots); err == nil {
			t.Errorf("chdir(%s) in roots %q: nil error", dir, roots)
		}
	}
	if err := chdir(outside, nil); err != nil {
		t.Errorf("chdir without roots: %v", err)
	}
}
