//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inotifyOf lists the inotify instances process pid holds, as the
// kernel lists its open files.
func inotifyOf(pid int) (n int, err error) {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fds)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n, nil
}

// TestRunSmallWorkspaceUnwatched: a hutch run in a small workspace reads
// its trees by walks and holds no inotify instance, whose closing would
// make hutch's exit wait for the kernel's fsnotify grace period (8 ms or
// more on every run). A large workspace is watched. Judged from the host
// on the hutch process while its command runs; the guard a walk serves
// still holds: a repository the command makes is in the result.
func TestRunSmallWorkspaceUnwatched(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files int
		want  bool // watched
	}{
		{"small", 10, false},
		{"large", 2500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dir(t, "trees-"+tc.name+"-")
			for i := range tc.files {
				d := filepath.Join(ws, fmt.Sprintf("d%d", i/50))
				must(os.MkdirAll(d, 0o755))
				must(os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), nil, 0o644))
			}
			result := filepath.Join(dir(t, "trees-result-"), "r.json")
			c := exec.Command(hutchBin, "run", "--workspace", ws, "--result-json", result, "--",
				"sh", "-c", "mkdir -p made/.git && touch started && while [ ! -e go-on ]; do sleep 0.05; done")
			must(c.Start())
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			if !waitFor(time.Minute, func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil }) {
				c.Process.Kill()
				t.Fatal("the command did not start")
			}
			n, err := inotifyOf(c.Process.Pid)
			must(os.WriteFile(filepath.Join(ws, "go-on"), nil, 0o644))
			if werr := <-done; werr != nil {
				t.Fatalf("hutch run: %v", werr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if (n > 0) != tc.want {
				t.Errorf("%d files: hutch holds %d inotify instances while its command runs; want watched %v", tc.files, n, tc.want)
			}
			b, err := os.ReadFile(result)
			must(err)
			if !strings.Contains(string(b), filepath.Join(ws, "made")) {
				t.Errorf("the repository the command made is not in the result: %s", b)
			}
		})
	}
}
