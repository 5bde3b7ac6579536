package runtime

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
)

// DefaultDenyNames returns the names masked wherever they occur in the
// workspace and the writable trees, unless NoDefaultDeny: the project's
// environment files, and SSH keys a user keeps or an agent copies next to
// the code. Each call returns a new slice, which the caller may change.
//
// *.pem is not among them: PEM is the container of public certificates
// far more often than of private keys, and a certificate bundle is read by
// every TLS client. A virtual environment in a workspace holds pip's (and
// often certifi's and botocore's) cacert.pem; masking it breaks pip and
// requests over HTTPS. Counted in real trees: Go 1.26's source 31 .pem
// files, 2 of them private keys (both test fixtures); requests 3 and
// urllib3 2, none a key; a fresh venv 1, the CA bundle. Telling a key from
// a certificate means reading the file, which a name cannot do; mask keys
// by name (DenyNames) or path (Deny) where a project keeps them.
func DefaultDenyNames() []string { return slices.Clone(defaultDenyNames) }

// defaultDenyNames is what DefaultDenyNames returns.
var defaultDenyNames = []string{
	".env", ".env.*",
	".ssh", "id_rsa", "id_ecdsa", "id_ed25519", "id_dsa",
}

// MaxNameMounts bounds the mounts deny names may cost one command: a mask
// per match and a pin per directory above one inside a writable tree. A
// mount costs about 40µs at every start (hutch run true: 107ms median
// with none, 148ms with 1024 top-level .env files, 151ms with 512 one
// directory deep), and the kernel
// allows a mount namespace fs.mount-max mounts (100,000 by default): a
// command that could plant any number of matches would make every later
// command in its workspace slow, then fail. Past the bound the command is
// refused, naming the count.
const MaxNameMounts = 1024

// checkDenyNames validates Policy.DenyNames: base names or path.Match
// patterns, never paths.
func checkDenyNames(names []string) error {
	for i, n := range names {
		field := fmt.Sprintf("DenyNames[%d]", i)
		reason := ""
		switch {
		case n == "":
			reason = "empty name"
		case n == "." || n == "..":
			reason = "not a file name"
		case strings.IndexByte(n, 0) >= 0:
			return &PolicyError{Field: field, Value: n, Reason: "contains a NUL byte"}
		case strings.ContainsRune(n, '/'):
			reason = "a name or pattern, not a path: it may not contain /"
		case len(n) > 255:
			reason = "longer than a file name can be (255 bytes)"
		}
		if reason == "" {
			for _, r := range n {
				if r < 0x20 || r == 0x7f {
					return &PolicyError{Field: field, Value: n, Reason: "contains a control character"}
				}
			}
			if _, err := path.Match(n, ""); err != nil {
				reason = "not a valid pattern (path.Match syntax)"
			}
		}
		if reason != "" {
			return &PolicyError{Field: field, Value: n, Reason: reason}
		}
	}
	return nil
}

// denyNames are the names p masks: DefaultDenyNames (unless NoDefaultDeny)
// and p.DenyNames, without duplicates.
func denyNames(p *Policy) []string {
	var names []string
	if !p.NoDefaultDeny {
		names = DefaultDenyNames()
	}
	for _, n := range p.DenyNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// matchName reports whether the base name matches one of names. The
// patterns are validated, so Match cannot fail.
func matchName(names []string, name string) bool {
	for _, n := range names {
		if ok, _ := path.Match(n, name); ok {
			return true
		}
	}
	return false
}

// nameSet is a list of deny names made ready for matching many base
// names: the names without pattern characters looked up, the rest matched
// in turn, as matchName does.
type nameSet struct {
	literal  map[string]bool
	patterns []string
}

func compileNames(names []string) nameSet {
	s := nameSet{literal: make(map[string]bool, len(names))}
	for _, n := range names {
		if strings.ContainsAny(n, `*?[\`) {
			s.patterns = append(s.patterns, n)
		} else {
			s.literal[n] = true
		}
	}
	return s
}

func (s nameSet) match(name string) bool {
	if s.literal[name] {
		return true
	}
	for _, n := range s.patterns {
		if ok, _ := path.Match(n, name); ok {
			return true
		}
	}
	return false
}

// MaskLimitError refuses a command (or New) whose writable trees hold more
// paths matching the deny names than MaxNameMounts mounts can mask. Nothing
// is mounted or started.
type MaskLimitError struct {
	// Trees are the workspace and writable trees holding matches, with
	// how many each holds.
	Trees []TreeCount
	// Names are the deny names in effect.
	Names []string
	// Count is the number of matching paths; Mounts what masking them
	// would take (0 when Count alone is past Limit and they were not
	// counted).
	Count, Mounts int
	Limit         int
}

// TreeCount is a tree and how many paths in it match the deny names.
type TreeCount struct {
	Tree  string
	Count int
}

// Cause says what was found and why it cannot be masked, without a remedy.
func (e *MaskLimitError) Cause() string {
	var where []string
	for _, t := range e.Trees {
		where = append(where, fmt.Sprintf("%s holds %d", t.Tree, t.Count))
	}
	names := e.Names
	if len(names) > 4 {
		names = append(slices.Clone(names[:4]), "...")
	}
	s := fmt.Sprintf("%s files matching deny names (%s)", strings.Join(where, ", "), strings.Join(names, ", "))
	if e.Mounts > 0 {
		return s + fmt.Sprintf(": masking them takes %d mounts with the pins of their directories, more than %d", e.Mounts, e.Limit)
	}
	return s + fmt.Sprintf(": more than %d cannot be masked (each is a mount at every command's start)", e.Limit)
}

// Error implements error.
func (e *MaskLimitError) Error() string {
	return "hutch: " + e.Cause() + "; remove them, or set NoDefaultDeny and list in DenyNames only the names to mask"
}

// named are the paths matching deny names in the writable trees, and how
// many each tree (in the order of roots) holds. Past MaxNameMounts the
// paths are no longer kept, only counted: they are refused in any case.
type named struct {
	paths  []string
	counts []int
}

func (n *named) add(i int, paths ...string) {
	if len(paths) == 0 {
		return // a link to nothing, or to what may not be masked
	}
	n.counts[i]++
	if len(n.paths) <= MaxNameMounts {
		n.paths = append(n.paths, paths...)
	}
}

func (n named) total() int {
	t := 0
	for _, c := range n.counts {
		t += c
	}
	return t
}

// scanDeep walks each root once for what is found below its top level:
// the paths whose names match names (a matching directory is masked whole
// and not entered) and the git repositories.
func scanDeep(roots, names []string) (named, []gitRepo) {
	n := named{counts: make([]int, len(roots))}
	var repos []gitRepo
	walkTrees(roots, func(root, p string, d fs.DirEntry) bool {
		top := filepath.Dir(p) == root
		switch {
		case matchName(names, d.Name()):
			if !top {
				n.add(slices.Index(roots, root), maskTarget(p, d, roots)...)
			}
			return false
		case d.Name() == ".git":
			if r, ok := loadRepo(p, roots); ok && !top {
				repos = append(repos, r)
			}
			return false
		}
		return true
	})
	return n, repos
}

// topNamed lists the entries at each root's top level whose names match
// names now.
func topNamed(roots, names []string) named {
	n := named{counts: make([]int, len(roots))}
	if len(names) == 0 {
		return n
	}
	for i, root := range roots {
		ents, err := os.ReadDir(root)
		if err != nil {
			continue // a writable file, or a tree gone since New
		}
		for _, e := range ents {
			if matchName(names, e.Name()) {
				n.add(i, maskTarget(filepath.Join(root, e.Name()), e, roots)...)
			}
		}
	}
	return n
}

// maskTarget is what to mask for the matching entry at p: p itself, or,
// when p is a symlink (.env -> .env.development), the file it resolves to
// inside a writable tree; a mount cannot go on a symlink, and masking the
// target hides it by every name. A target outside the writable trees is
// not masked: the command reads it at its own path in the read-only view
// anyway (unless the deny-list covers it, which masks it as such), and a
// command could otherwise plant `.env -> /bin/sh` and take the shell from
// every later command. Nor is a target that holds a writable tree.
func maskTarget(p string, d fs.DirEntry, roots []string) []string {
	if d.Type()&fs.ModeSymlink == 0 {
		return []string{p}
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil
	}
	inside := false
	for _, root := range roots {
		if mounts.Within(root, r) {
			return nil
		}
		inside = inside || mounts.Within(r, root)
	}
	if !inside {
		return nil
	}
	return []string{r}
}
