//go:build linux

package cgroups

import (
	"os"
	"testing"
)

// TestV2CgroupsPath: a group's path from the hierarchy's root, and none
// when the hierarchy is mounted from a subtree.
func TestV2CgroupsPath(t *testing.T) {
	for _, tc := range []struct {
		name, mountRoot string
		ok              bool
	}{
		{"host mount", "/", true},
		{"subtree mount", "/docker/abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeV2(t, allV2)
			h := f.host(0, "/")
			h.mounts.v2.Root = tc.mountRoot
			g := newFakeGroup(t, h)
			path, ok := g.CgroupsPath()
			if ok != tc.ok || (ok && path != "/hutch/"+g.Name()) {
				t.Errorf("CgroupsPath() = %q, %v; want /hutch/%s, %v", path, ok, g.Name(), tc.ok)
			}
		})
	}
}

// TestV2DestroyNested: a runtime's cgroup made below the group, and its
// own children, are removed with it.
func TestV2DestroyNested(t *testing.T) {
	f := newFakeV2(t, allV2)
	g := newFakeGroup(t, f.host(0, "/"))
	path, _ := g.CgroupsPath()
	if err := os.MkdirAll(f.abs(path+"/ctr/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := g.DestroyNested(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.abs(path)); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", path, err)
	}
}

// TestLiveV1DestroyNested: on this host's v1 hierarchies, a runtime's
// cgroup at the group's path in a hierarchy the group does not use
// (devices) is removed with the group.
func TestLiveV1DestroyNested(t *testing.T) {
	m := v1Manager(t)
	g, err := m.Create(Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	path, ok := g.CgroupsPath()
	if !ok {
		t.Fatalf("no one path for %q", g.Dirs())
	}
	mp, ok := m.h.mounts.v1["devices"]
	if !ok {
		g.Destroy()
		t.Skip("no devices hierarchy")
	}
	var made []string
	for _, d := range append(g.Dirs(), mp.Path+path) {
		if err := os.MkdirAll(d+"/ctr", 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	if err := g.DestroyNested(); err != nil {
		t.Fatal(err)
	}
	for _, d := range made {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
}
