package mounts

import (
	"os"
	"path"
	"strings"
)

// maxLinks is how many symlinks ResolveView follows in one path, as the
// kernel's limit (ELOOP past 40).
const maxLinks = 40

// ResolveView resolves name (absolute) as a command of the view p builds
// would: component by component, each symlink read where the view has it
// (a host file at the path Lookup gives, or a plan's own Symlink step) and
// followed in the view's terms, ".." taken after the links before it. A
// component in a filesystem of the sandbox's own (Private: its /tmp, /dev,
// /proc), masked or missing ends the resolution: the rest is kept as
// written, cleaned, since the host cannot know what a running sandbox
// holds there. Resolve answers for the host's tree; this answers for the
// view, whose paths need not be the host's (a bind's target, an image's
// root, a listed view's own directories). It reports false when the path
// loops (more than the kernel's 40 links).
func (p Plan) ResolveView(name string) (string, bool) {
	todo := strings.Split(name, "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		link, ok := p.linkAt(next)
		if !ok {
			if !p.exists(next) {
				// Missing, private or masked: nothing further to read.
				return path.Join(append([]string{next}, todo...)...), true
			}
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", false
		}
		if path.IsAbs(link) {
			cur = "/"
		}
		todo = append(strings.Split(link, "/"), todo...)
	}
	return cur, true
}

// linkAt is the content of the symlink at view path v, if it is one.
func (p Plan) linkAt(v string) (string, bool) {
	switch pl := p.Lookup(v); pl.Reach {
	case OnHost:
		fi, err := os.Lstat(pl.HostPath)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return "", false
		}
		l, err := os.Readlink(pl.HostPath)
		return l, err == nil
	case Built:
		for i := len(p.Mounts) - 1; i >= 0; i-- {
			if m := p.Mounts[i]; m.Target == v {
				return m.Link, m.Kind == Symlink
			}
		}
	}
	return "", false
}

// exists says whether view path v is something the host can read further
// down: a host file, or a directory of the plan's own on the way to what
// the view shows.
func (p Plan) exists(v string) bool {
	switch pl := p.Lookup(v); pl.Reach {
	case OnHost:
		_, err := os.Lstat(pl.HostPath)
		return err == nil
	case Built:
		return p.Holds(v)
	}
	return false
}

// Holds reports whether a step of the plan other than its root mounts or
// makes something at target or below it: in a listed view, a path on the
// way to what the view shows, or shown itself; any other path of its
// empty root is not there at all.
func (p Plan) Holds(target string) bool {
	for _, m := range p.Mounts {
		if !m.isRoot() && Within(m.Target, target) {
			return true
		}
	}
	return false
}

// Decider is the step that makes target what Lookup says it is: the last
// step holding it that replaces what was there (a root, a bind, a private
// filesystem, a mask, a plan's own link), and the last ReadOnly step after
// it that takes writing away, if any (ReadOnly's Kind is "" otherwise).
// Pins and Dirs change neither.
func (p Plan) Decider(target string) (step, readOnly Mount) {
	for _, m := range p.Mounts {
		if !Within(target, m.Target) {
			continue
		}
		switch m.Kind {
		case ReadOnly:
			readOnly = m
		case Pin, Dir:
		default:
			step, readOnly = m, Mount{}
		}
	}
	return step, readOnly
}
