package landlock

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Spec is what a sandbox's filesystem and network look like to Landlock.
// All paths are absolute, as the command will see them (inside the new root
// when there is one).
type Spec struct {
	// ReadOnly trees may be read, listed and executed from.
	ReadOnly []string
	// Writable trees get every filesystem right.
	Writable []string
	// Devices trees may be read, written and ioctl'd (ttys), but not
	// created in: usually /dev, and the sandbox's own /proc where its
	// existing files must be written (a nested user namespace's id maps).
	Devices []string
	// Deny are paths with no right at all. Inside a ReadOnly tree this is
	// enforced by granting their siblings instead of the tree; inside a
	// Writable tree it cannot be (see the package comment) and is reported.
	Deny []string

	// RestrictTCP handles TCP bind and connect (ABI 4+): only
	// ConnectTCP ports may be connected to, and nothing may be bound.
	RestrictTCP bool
	ConnectTCP  []uint16

	// Scope closes abstract unix sockets and signals to processes outside
	// the sandbox's Landlock domain (ABI 6+).
	Scope bool
}

// Validate checks the paths: absolute, clean, no NUL.
func (s *Spec) Validate() error {
	for _, set := range []struct {
		name  string
		paths []string
	}{{"ReadOnly", s.ReadOnly}, {"Writable", s.Writable}, {"Devices", s.Devices}, {"Deny", s.Deny}} {
		for i, p := range set.paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
				return fmt.Errorf("landlock: %s[%d] %q: not a clean absolute path", set.name, i, p)
			}
		}
	}
	return nil
}

// Access rights and scopes, as in the kernel's UAPI (linux/landlock.h);
// spelled out here so that rulesets can be built and tested on any GOOS
// (landlock_linux_test.go checks them against x/sys/unix).
const (
	accessExecute    = 1 << 0
	accessWriteFile  = 1 << 1
	accessReadFile   = 1 << 2
	accessReadDir    = 1 << 3
	accessTruncate   = 1 << 14
	accessIoctlDev   = 1 << 15
	accessBindTCP    = 1 << 0
	accessConnectTCP = 1 << 1
	scopeAbstract    = 1 << 0
	scopeSignal      = 1 << 1
)

// ReferABI is the first ABI whose rulesets allow renames and links
// across directories (LANDLOCK_ACCESS_FS_REFER): below it, a ruleset
// refuses every such rename, which breaks ordinary tools.
const ReferABI = 2

// ResolveUnixABI is the first ABI whose rulesets guard pathname unix
// sockets (LANDLOCK_ACCESS_FS_RESOLVE_UNIX): connect(2) and sendmsg(2) reach
// a socket file only beneath a tree granted that right (a writable tree
// here), or one created in the same domain.
const ResolveUnixABI = 9

// File rights, as the kernel groups them.
const (
	// readRights are what a read-only tree grants.
	readRights = accessExecute | accessReadFile | accessReadDir
	// fileRights are the rights that apply to a file (not only to a
	// directory); a rule on a file may hold only these.
	fileRights = accessExecute | accessWriteFile | accessReadFile | accessTruncate | accessIoctlDev
	// deviceRights are what /dev grants: use existing nodes, create none.
	deviceRights = accessReadFile | accessWriteFile | accessReadDir | accessTruncate | accessIoctlDev
)

// fsRights are the filesystem rights each ABI version handles.
func fsRights(abi int) uint64 {
	switch {
	case abi <= 0:
		return 0
	case abi == 1:
		return 1<<13 - 1
	case abi == 2:
		return 1<<14 - 1 // + REFER
	case abi <= 4:
		return 1<<15 - 1 // + TRUNCATE
	case abi <= 8:
		return 1<<16 - 1 // + IOCTL_DEV
	default: // ResolveUnixABI and later
		return 1<<17 - 1 // + RESOLVE_UNIX
	}
}

// Ruleset is a Spec cut down to one ABI: what is handled and what each
// path is granted. It is data; Restrict applies it.
type Ruleset struct {
	ABI        int
	HandledFS  uint64
	HandledNet uint64
	Scoped     uint64
	// Paths maps each rule's path to the rights granted beneath it.
	Paths []PathRule
	// ExpandDeny are the ReadOnly trees holding Deny paths: at Restrict
	// time their contents are granted one by one, skipping the denied
	// paths, instead of the tree.
	ExpandDeny []PathRule
	Deny       []string
	Ports      []uint16
	// Unenforced says, one line each, what the Spec asks that this ABI
	// cannot express.
	Unenforced []string
}

// PathRule grants Access beneath Path.
type PathRule struct {
	Path   string
	Access uint64
}

// Build cuts s down to the given ABI version.
func Build(s Spec, abi int) (Ruleset, error) {
	if err := s.Validate(); err != nil {
		return Ruleset{}, err
	}
	r := Ruleset{ABI: abi, HandledFS: fsRights(abi)}
	if abi <= 0 {
		r.Unenforced = append(r.Unenforced, "the kernel has no Landlock")
		return r, nil
	}
	if abi < 2 {
		// Without REFER every rename or link across directories fails
		// with EXDEV, whatever the rules say.
		r.Unenforced = append(r.Unenforced, "ABI 1: renames and links across directories always fail (no REFER right before ABI 2)")
	}
	all := r.HandledFS
	for _, p := range s.ReadOnly {
		if denied := under(s.Deny, p); len(denied) > 0 {
			r.ExpandDeny = append(r.ExpandDeny, PathRule{p, readRights & all})
			continue
		}
		r.Paths = append(r.Paths, PathRule{p, readRights & all})
	}
	for _, p := range s.Writable {
		r.Paths = append(r.Paths, PathRule{p, all})
		for _, d := range under(s.Deny, p) {
			r.Unenforced = append(r.Unenforced, fmt.Sprintf("deny %s: inside writable %s, which Landlock cannot carve out", d, p))
		}
	}
	for _, p := range s.Devices {
		r.Paths = append(r.Paths, PathRule{p, deviceRights & all})
	}
	r.Deny = slices.Clone(s.Deny)
	if s.RestrictTCP {
		if abi >= 4 {
			r.HandledNet = accessBindTCP | accessConnectTCP
			r.Ports = slices.Clone(s.ConnectTCP)
		} else {
			r.Unenforced = append(r.Unenforced, fmt.Sprintf("ABI %d: TCP bind and connect are not restricted (ABI 4+)", abi))
		}
	}
	if s.Scope {
		if abi >= 6 {
			r.Scoped = scopeAbstract | scopeSignal
		} else {
			r.Unenforced = append(r.Unenforced, fmt.Sprintf("ABI %d: abstract unix sockets and signals are not scoped (ABI 6+)", abi))
		}
	}
	return r, nil
}

// under lists the paths of set that are p or beneath it.
func under(set []string, p string) []string {
	var out []string
	for _, d := range set {
		if d == p || strings.HasPrefix(d, strings.TrimSuffix(p, "/")+"/") {
			out = append(out, d)
		}
	}
	return out
}
