package mounts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// makeRoot makes a small root file system in a temporary directory:
// directories and files at the paths given (a path ending in "/" is a
// directory).
func makeRoot(t *testing.T, entries ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, e := range entries {
		p := filepath.Join(dir, e)
		var err error
		switch {
		case e[len(e)-1] == '/':
			err = os.MkdirAll(p, 0o755)
		default:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte(e), 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuildRoot: a view on a root of the caller's binds each of its
// entries read-only at its path but those on the way to the view's own
// paths, which are directories of the empty root holding the image's
// other entries, and never binds over an own path (/tmp, the workspace);
// the image's links are made again; the host's deny-list masks only what
// the view shows of the host.
func TestBuildRoot(t *testing.T) {
	dir := makeRoot(t, "usr/bin/sh", "etc/passwd", "etc/shadow", "home/", "root/.secret", "var/lib/dpkg/status", "var/cache/apt/x", "tmp/", "opt/other/f", "image-marker")
	if err := os.Symlink("usr/bin", filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	s := Spec{
		Workspace: "/home/u/w", Writable: []string{"/var/cache/w"}, Home: "/tmp/home",
		Deny:     []string{"/etc/shadow", "/root/.ssh", "/home/u/w/.env", "/opt/ref/.env"},
		HideDirs: []string{"/run"},
		Listed:   &Listed{Trees: []string{"/opt/ref"}, Root: &Root{Dir: dir}},
	}
	if err := ReadRoot(s); err != nil {
		t.Fatal(err)
	}
	p := Build(s)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Mounts[0].Kind != EmptyRoot {
		t.Fatalf("first step %v, want %s", p.Mounts[0], EmptyRoot)
	}
	imageBinds := []string{"/etc", "/image-marker", "/opt/other", "/root", "/usr", "/var/cache/apt", "/var/lib"}
	if got, want := targetsOf(p, BindRO), append(slices.Clone(imageBinds), "/opt/ref"); !slices.Equal(sortedUnique(got), sortedUnique(want)) {
		t.Errorf("read-only binds %v, want %v", got, want)
	}
	for _, m := range p.Mounts {
		if m.Kind == BindRO && slices.Contains(imageBinds, m.Target) && m.Source != filepath.Join(dir, m.Target) {
			t.Errorf("%v: source is not the image's", m)
		}
	}
	if got, want := targetsOf(p, Dir), []string{"/home", "/opt", "/var", "/var/cache", "/tmp/home"}; !slices.Equal(got, want) {
		t.Errorf("directories %v, want %v", got, want)
	}
	if got, want := targetsOf(p, Symlink), []string{"/bin"}; !slices.Equal(got, want) {
		t.Errorf("links %v, want %v", got, want)
	}
	if got, want := targetsOf(p, Mask), []string{"/home/u/w/.env", "/opt/ref/.env"}; !slices.Equal(got, want) {
		t.Errorf("masks %v, want %v: the image's /etc/shadow is not the host's", got, want)
	}
	if got := targetsOf(p, EmptyRO); len(got) != 0 {
		t.Errorf("hidden directories %v, want none: the host's /run is not in the view", got)
	}
	for path, want := range map[string]Reach{
		"/": Built, "/home": Built, "/var": Built, "/var/cache": Built,
		"/usr/bin/sh": OnHost, "/root/.secret": OnHost, "/var/lib/dpkg/status": OnHost,
		"/home/u/w/x": OnHost, "/var/cache/w/y": OnHost, "/tmp/x": Private, "/opt/ref/z": OnHost,
	} {
		if got := p.Lookup(path).Reach; got != want {
			t.Errorf("Lookup(%s).Reach = %v, want %v", path, got, want)
		}
	}
	if pl := p.Lookup("/usr/bin/sh"); pl.Writable || pl.HostPath != filepath.Join(dir, "usr/bin/sh") {
		t.Errorf("/usr/bin/sh: %+v, want the image's file, read-only", pl)
	}
	// The image's /tmp and its own paths are never bound from it.
	for _, m := range p.Mounts {
		if m.Source != "" && (Within(m.Target, "/tmp") || Within(m.Target, "/home/u/w")) && Within(m.Source, dir) {
			t.Errorf("%v binds the image over an own path", m)
		}
	}
}
