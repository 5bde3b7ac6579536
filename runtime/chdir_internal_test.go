//go:build linux

package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkingDirectorySwappedAfterCheck: the host checks a command's Dir
// before it sends the command; a directory swapped for a symlink after that
// check is refused by the init (command.c's enter_dir), which looks at where
// its chdir actually landed, and nothing runs. Without a swap the command
// runs in Dir.
func TestWorkingDirectorySwappedAfterCheck(t *testing.T) {
	defer func() { testHookStart = nil }()
	for _, tt := range []struct {
		name   string
		target string // what Dir becomes a symlink to; "" for no swap
		want   string // in the SetupError; "" for a command that runs
	}{
		{"no swap", "", ""},
		{"outside the trees", "/etc", "outside the workspace and the writable paths"},
		{"a kernel interface", "/proc/self", "lies in /proc, where no command starts"},
		{"a device tree", "/dev", "lies in /dev, where no command starts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			sb, err := New(DefaultPolicy(ws))
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			dir := filepath.Join(ws, "sub")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			testHookStart = func(stage string, c *Cmd) {
				if stage != "send" || tt.target == "" {
					return
				}
				if err := os.Remove(dir); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(tt.target, dir); err != nil {
					t.Error(err)
				}
			}
			marker := filepath.Join(ws, "ran")
			c := sb.Command(context.Background(), "sh", "-c", `touch here "$0"`, marker)
			c.Dir = dir
			err = c.Run()
			testHookStart = nil
			_, statErr := os.Stat(marker)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "here")); err != nil {
					t.Errorf("host: the command did not run in its Dir: %v", err)
				}
				return
			}
			var se *SetupError
			if !errors.As(err, &se) || se.Layer != LayerFilesystem || se.Op != "chdir" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v, want a filesystem chdir SetupError saying %q", err, tt.want)
			}
			if statErr == nil {
				t.Error("host: the command ran in a swapped working directory")
			}
		})
	}
}
