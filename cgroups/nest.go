//go:build linux

package cgroups

import (
	"slices"
	"strings"
)

// A Group can be the parent of a cgroup another program makes, such as
// an OCI runtime given CgroupsPath()+"/NAME" as its configuration's
// linux.cgroupsPath: the group's Usage then holds what that cgroup's
// processes consumed (the counters are hierarchical and survive the
// child's removal), and DestroyNested removes whatever the program left.

// CgroupsPath is the group's path below the root of every hierarchy it
// has a directory in: the form an OCI configuration's linux.cgroupsPath
// takes, one path for all hierarchies. ok is false when there is no one
// such path (a hierarchy mounted from a subtree, or the group at
// different depths in different hierarchies).
func (g *Group) CgroupsPath() (path string, ok bool) {
	for _, d := range g.dirs {
		rel, found := "", false
		for _, mp := range g.m.h.mounts.all() {
			if r, cut := strings.CutPrefix(d, mp.Path+"/"); cut && mp.Root == "/" {
				rel, found = "/"+r, true
				break
			}
		}
		if !found || (path != "" && rel != path) {
			return "", false
		}
		path = rel
	}
	return path, path != ""
}

// DestroyNested removes the cgroups below the group, and the group's
// path in every mounted hierarchy, not only the group's own (a runtime
// makes its cgroup in each hierarchy it knows of, devices and cpuset
// included, and may leave the parents it made there), then destroys
// the group. Only empty directories are removed: a cgroup with a
// process in it stays, and Destroy's error says so.
func (g *Group) DestroyNested() error {
	if path, ok := g.CgroupsPath(); ok {
		for _, mp := range g.m.h.mounts.all() {
			if mp.Root != "/" {
				continue
			}
			dir := mp.Path + path
			if slices.Contains(g.dirs, dir) {
				continue
			}
			removeChildren(g.m.h.rmdir, dir)
			_ = g.m.h.rmdir(dir)
		}
	}
	g.mu.Lock()
	g.removeSubgroups()
	g.mu.Unlock()
	return g.Destroy()
}

// all lists every cgroup mount: each v1 hierarchy once, and the cgroup2
// mount.
func (t mountTable) all() []mountPoint {
	var out []mountPoint
	seen := map[string]bool{}
	for _, mp := range t.v1 {
		if !seen[mp.Path] {
			seen[mp.Path] = true
			out = append(out, mp)
		}
	}
	if t.v2 != nil && !seen[t.v2.Path] {
		out = append(out, *t.v2)
	}
	return out
}
