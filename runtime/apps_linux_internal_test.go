//go:build linux

package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAppTrees: for an app agent (Apps.ID) the trees a Sandbox hands on
// are the app's: its directory is where deny names and repositories are
// looked for, and its data directory is the workspace's one writable
// tree, for the mount plan, Landlock and the unix-sockets layer alike. The
// working directory may still be the workspace, an empty directory on the
// way to the app. An ordinary agent keeps the workspace.
func TestAppTrees(t *testing.T) {
	ws, extra := evalTempDir(t), evalTempDir(t)
	for _, d := range []string{"apps/a1/data", "apps/a2", "sub/apps/b/data"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name            string
		apps            *AppIsolation
		roots, writable []string
	}{
		{"no apps", nil, []string{ws, extra}, []string{ws, extra}},
		{"ordinary agent", &AppIsolation{}, []string{ws, extra}, []string{ws, extra}},
		{"app a1", &AppIsolation{ID: "a1"}, []string{ws + "/apps/a1", extra}, []string{ws + "/apps/a1/data", extra}},
		{"app in a named dir", &AppIsolation{Dir: "sub/apps", ID: "b"}, []string{ws + "/sub/apps/b", extra}, []string{ws + "/sub/apps/b/data", extra}},
		{"app without a directory", &AppIsolation{ID: "a3"}, []string{ws + "/apps/a3", extra}, []string{ws + "/apps/a3/data", extra}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy(ws)
			p.Writable, p.Apps, p.Prewarm = []string{extra}, tt.apps, 0
			sb, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if got := sb.roots(); !slices.Equal(got, tt.roots) {
				t.Errorf("roots() = %v; want %v", got, tt.roots)
			}
			if got := sb.spec.WritableTrees(); !slices.Equal(got, tt.writable) {
				t.Errorf("WritableTrees() = %v; want %v", got, tt.writable)
			}
			if got := sb.dirRoots(); !slices.Equal(got, []string{ws, extra}) {
				t.Errorf("dirRoots() = %v; want the workspace and %s", got, extra)
			}
			if dir, err := sb.WorkDir(""); err != nil || dir != ws {
				t.Errorf("WorkDir(\"\") = %q, %v; want the workspace", dir, err)
			}
			plan := sb.plan(fresh{})
			for _, w := range tt.writable {
				if !plan.Lookup(w + "/f").Writable {
					t.Errorf("the plan leaves %s read-only", w)
				}
			}
			if pl := plan.Lookup(ws + "/f"); pl.Writable != (tt.apps == nil || tt.apps.ID == "") {
				t.Errorf("the plan makes the workspace's top writable: %v", pl.Writable)
			}
			if sb.landlock != nil {
				var made []string // the trees where files may be made
				for _, r := range sb.landlock.Paths {
					if r.Access&unix.LANDLOCK_ACCESS_FS_MAKE_REG != 0 {
						made = append(made, r.Path)
					}
				}
				if want := append(slices.Clone(tt.writable), "/tmp", "/dev/shm"); !slices.Equal(made, want) {
					t.Errorf("Landlock's writable trees are %v; want %v", made, want)
				}
			}
			if sb.unixWall != nil {
				if got := sb.config(fresh{}).UnixWall.Allowed; !slices.Equal(got, append(slices.Clone(tt.writable), "/tmp", "/dev/shm")) {
					t.Errorf("the unix-sockets layer allows %v", got)
				}
			}
		})
	}
	// A writable tree elsewhere in an app's workspace would show it.
	for _, tt := range []struct {
		writable []string
		home     string
		field    string
	}{
		{[]string{ws + "/sub"}, "", "Writable[0]"},
		{[]string{extra, ws}, "", "Writable[1]"},
		{nil, ws + "/apps/a1", "Home"},
		{[]string{ws + "/apps/a1/data/cache"}, "", ""},
		{nil, ws + "/apps/a1/data", ""},
	} {
		for _, d := range append(slices.Clone(tt.writable), tt.home) {
			os.MkdirAll(d, 0o755)
		}
		p := DefaultPolicy(ws)
		p.Writable, p.Home, p.Prewarm, p.Apps = tt.writable, tt.home, 0, &AppIsolation{ID: "a1"}
		_, err := Check(p)
		var pe *PolicyError
		if errors.As(err, &pe) && pe.Field == tt.field || err == nil && tt.field == "" {
			continue
		}
		t.Errorf("Writable %v Home %q: %v; want a PolicyError on %q (none if empty)", tt.writable, tt.home, err, tt.field)
	}
}

// evalTempDir is a temporary directory by its resolved path.
func evalTempDir(t *testing.T) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
