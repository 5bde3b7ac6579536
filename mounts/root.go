package mounts

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Root is a root file system of the caller's, an unpacked image, that a
// listed view shows at / instead of the host's tree.
//
// The root is never bound whole: the view's own paths (the workspace, the
// writable trees, /tmp) must be made where the image may have nothing,
// and the executor makes a missing target only in a filesystem of the
// plan's own, never in a tree it binds (which would write into the
// image). So the view is an empty read-only root in which each entry of
// the image is bound read-only at its path, and an entry on the way to
// one of the view's own paths is made a directory of the empty root
// instead, with its own entries bound in it the same way. An image's
// /home is then a directory of the plan's holding the workspace, its
// /usr the image's whole tree.
type Root struct {
	// Dir is the host directory holding the root file system:
	// absolute, clean, symlinks resolved.
	Dir string
	// Listing holds, for each directory of the root on the way to one
	// of the view's own paths, "/" first, what it held when the view
	// was planned (ReadRoot reads it).
	Listing map[string][]RootEntry
}

// RootEntry is one entry of a directory of a Root.
type RootEntry struct {
	Name string
	Type EntryType
	// Link is a symlink's content.
	Link string
}

// EntryType is what a RootEntry is.
type EntryType int

const (
	// EntryOther is neither a directory, a file nor a symlink: a device,
	// a pipe, a socket, which a view of an image does not show.
	EntryOther EntryType = iota
	EntryDir             // a directory
	EntryFile            // a regular file
	EntryLink            // a symlink, its target in RootEntry.Link
)

// ownPaths are the paths of s's view mounted at their own paths, where an
// image's tree must not be bound: the view's own filesystems, the
// writable trees, a home outside /tmp, the targets of binds and the host
// trees Listed shows.
func (s Spec) ownPaths() []string {
	own := []string{"/dev", "/proc", "/tmp", s.Workspace}
	own = append(own, s.Writable...)
	if s.Home != "" && !Within(s.Home, "/tmp") {
		own = append(own, s.Home)
	}
	for _, b := range s.Binds {
		own = append(own, b.Target)
	}
	if s.Listed != nil {
		own = append(own, s.Listed.Trees...)
	}
	return sortedUnique(own)
}

// ReadRoot reads what Spec s (whose Listed.Root.Dir is set) needs of its
// root to be built: the listing of "/" and of each directory of the root
// on the way to one of the view's own paths. It fills s.Listed.Root's
// Listing in place.
func ReadRoot(s Spec) error {
	r := s.Listed.Root
	r.Listing = map[string][]RootEntry{}
	own := s.ownPaths()
	var read func(dir string) error
	read = func(dir string) error {
		ents, err := os.ReadDir(filepath.Join(r.Dir, dir))
		if err != nil {
			return fmt.Errorf("mounts: read the root's %s: %w", dir, err)
		}
		list := make([]RootEntry, 0, len(ents))
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			re := RootEntry{Name: e.Name()}
			switch t := e.Type(); {
			case t.IsDir():
				re.Type = EntryDir
			case t.IsRegular():
				re.Type = EntryFile
			case t&os.ModeSymlink != 0:
				re.Type = EntryLink
				if re.Link, err = os.Readlink(filepath.Join(r.Dir, p)); err != nil {
					return fmt.Errorf("mounts: read the root's %s: %w", p, err)
				}
			}
			list = append(list, re)
			if re.Type == EntryDir && onTheWay(p, own) {
				if err := read(p); err != nil {
					return err
				}
			}
		}
		r.Listing[dir] = list
		return nil
	}
	return read("/")
}

// onTheWay reports whether p is a strict ancestor of one of own.
func onTheWay(p string, own []string) bool {
	return slices.ContainsFunc(own, func(o string) bool { return o != p && Within(o, p) })
}

// rootSteps are the steps that show r's tree in an empty root, given the
// view's own paths: below dir, each entry bound read-only (a directory
// or a file), made again (a symlink) or, on the way to an own path, made
// a directory of the plan's and walked into; an own path itself is left
// to its own step.
func (r *Root) steps(dir string, own []string) []Mount {
	var out []Mount
	ents := slices.Clone(r.Listing[dir])
	slices.SortFunc(ents, func(a, b RootEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range ents {
		p := path.Join(dir, e.Name)
		switch {
		case slices.Contains(own, p):
		case onTheWay(p, own):
			out = append(out, Mount{Kind: Dir, Target: p, Mode: 0o755})
			if e.Type == EntryDir {
				out = append(out, r.steps(p, own)...)
			}
		case e.Type == EntryDir, e.Type == EntryFile:
			out = append(out, Mount{Kind: BindRO, Source: path.Join(r.Dir, p), Target: p, Optional: true})
		case e.Type == EntryLink:
			out = append(out, Mount{Kind: Symlink, Target: p, Link: e.Link})
		}
	}
	return out
}

// FromRoot are the paths of s's view bound from its Root: none without
// one.
func (s Spec) FromRoot() []string {
	if s.Listed == nil || s.Listed.Root == nil {
		return nil
	}
	var out []string
	for _, m := range s.Listed.Root.steps("/", s.ownPaths()) {
		if m.Kind == BindRO {
			out = append(out, m.Target)
		}
	}
	return out
}
