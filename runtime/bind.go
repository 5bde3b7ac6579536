package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
)

// Bind shows the host's tree Host at Path in the sandbox (Policy.Binds).
type Bind struct {
	// Host is the host's directory or file: absolute.
	Host string
	// Path is where commands and the file operations see it: absolute.
	Path string
	// ReadOnly binds it read-only; otherwise commands may write it.
	ReadOnly bool `json:",omitempty"`
}

// String is the bind as ParseBind reads it: HOST:PATH, with ":ro" when
// read-only.
func (b Bind) String() string {
	s := b.Host + ":" + b.Path
	if b.ReadOnly {
		s += ":ro"
	}
	return s
}

// ParseBind reads HOST:PATH[:ro|rw], as --bind and a policy file's binds
// give it: the host's tree, where the sandbox shows it, and whether it is
// read-only (ro) or writable (rw, the default). Neither path may hold a
// colon. Its error says what is wrong, not the value, which is the
// caller's to name.
func ParseBind(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	var b Bind
	switch {
	case len(parts) == 3 && parts[2] == "ro":
		b.ReadOnly = true
	case len(parts) == 3 && parts[2] == "rw":
	case len(parts) == 3:
		return Bind{}, fmt.Errorf("the mode is ro or rw, not %q", parts[2])
	case len(parts) != 2:
		return Bind{}, errors.New("not HOST:PATH[:ro|rw]")
	}
	b.Host, b.Path = parts[0], parts[1]
	if b.Host == "" || b.Path == "" {
		return Bind{}, errors.New("not HOST:PATH[:ro|rw]: a path is empty")
	}
	return b, nil
}

// resolveBinds checks Policy.Binds and resolves each Host in place: a
// writable one is a writable tree (resolveTree), a read-only one a read
// (resolveReadTree); its Path is absolute and clean, reached through no
// symlink of the host's, in no kernel tree or hidden directory, and
// neither holds nor lies in the workspace, a writable tree, Home, another
// bind, a denied or a read-only path (it would hide them, or be hidden).
// Where the view shows a host tree at its own path, read-only (with the
// host's reads, the whole root; with listed reads, the listed trees), the
// Path must exist there as the same kind of file (or lie in the private
// /tmp): no mount point can be made in it.
func resolveBinds(r *resolved, host hostRules) error {
	p := &r.policy
	// The sandbox's HOME is the host's Home, or one of its own in the
	// private /tmp: a bind over either would replace it.
	taken := append(r.roots(), p.ReadOnly...)
	if p.Home != "" {
		taken = append(taken, p.Home)
	} else if host.sandboxHome != "" {
		taken = append(taken, host.sandboxHome)
	}
	// Where the view shows a host tree at its own path (read-only), no
	// mount point can be made: a bind there must find its path.
	fromHost := []string{"/"}
	if l := listedView(p); l != nil {
		fromHost = l.Trees
	}
	for i := range p.Binds {
		b := &p.Binds[i]
		field := fmt.Sprintf("Binds[%d]", i)
		var res string
		var err error
		if b.ReadOnly {
			res, err = resolveReadTree(r, host, field+".Host", b.Host)
		} else {
			if err := checkPath(field+".Host", b.Host); err != nil {
				return err
			}
			if !filepath.IsAbs(b.Host) {
				return &PolicyError{Field: field + ".Host", Value: b.Host, Reason: "must be an absolute path"}
			}
			res, err = resolveTree(r, host, field+".Host", b.Host, r.roots())
		}
		if err != nil {
			return err
		}
		if err := checkPath(field+".Path", b.Path); err != nil {
			return err
		}
		at := b.Path
		why := ""
		switch clean := filepath.Clean(at); {
		case !filepath.IsAbs(at):
			why = "must be an absolute path"
		case clean == "/":
			why = "the sandbox's root: a bind goes beside what the view shows"
		case clean != at:
			why = "not clean: give " + clean
		}
		for _, t := range host.noWrite {
			if why == "" && (mounts.Within(at, t.dir) || mounts.Within(resolve(at, "/"), t.dir)) {
				why = "lies in " + t.dir + ", which every view has of its own or hides"
			}
		}
		if res := resolve(at, "/"); why == "" && res != at {
			why = "goes through a symlink of the host's to " + res + ": give that path"
		}
		overlaps := func(q string) bool { return mounts.Within(at, q) || mounts.Within(q, at) }
		for _, q := range append(slices.Clone(taken), r.deny...) {
			if why == "" && overlaps(q) {
				why = "overlaps " + q + ", which the view shows or hides at its own path: a bind goes beside it"
			}
		}
		for _, o := range p.Binds[:i] {
			if why == "" && overlaps(o.Path) {
				why = "overlaps the bind at " + o.Path
			}
		}
		shown := slices.ContainsFunc(fromHost, func(t string) bool { return mounts.Within(at, t) })
		if why == "" && shown && !mounts.Within(at, "/tmp") {
			src, _ := os.Stat(res)
			fi, err := os.Lstat(at)
			switch {
			case err != nil && p.Reads == ReadsListed:
				why = "does not exist on the host, and lies in a tree the view shows from the host, read-only: give a path that exists there, or one outside the listed trees"
			case err != nil:
				why = "does not exist on the host, whose tree is the sandbox's read-only root with the host's reads: give a path that exists there, or list the reads (Reads listed), whose root is the sandbox's own"
			case src != nil && fi.IsDir() != src.IsDir():
				why = "is not the same kind of file on the host as " + res
			}
		}
		if why != "" {
			return &PolicyError{Field: field + ".Path", Value: b.Path, Reason: why}
		}
		b.Host = res
	}
	return nil
}
