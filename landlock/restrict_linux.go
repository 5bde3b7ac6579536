package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// This package decides what a sandbox's Landlock ruleset is; the sandbox
// init enforces it with its C step (nsinit's confine.c), on the one thread
// that forks the command. go-landlock is not used: importing it links
// libcap's psx into every agent binary that imports hutch (with cgo, psx
// wraps pthread_create for the whole process), to offer all-thread
// enforcement that hutch does not want.

var abiOnce = sync.OnceValue(func() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0 // ENOSYS: not built; EOPNOTSUPP: not enabled at boot
	}
	return int(v)
})

// ABI is the running kernel's Landlock ABI version, 0 when it has none.
// It is read once per process.
func ABI() int { return abiOnce() }

// ConnectTCP is the right a port rule grants (LANDLOCK_ACCESS_NET_CONNECT_TCP).
const ConnectTCP = accessConnectTCP

// Rule is one path rule of an enforced ruleset: Dir is granted beneath
// Path when it is a directory, File when it is anything else (a directory
// right on a file is invalid), nothing when it is a symlink or missing.
// The sandbox init opens each Path without following symlinks, so a rule
// belongs to the path as the policy names it.
type Rule struct {
	Path      string
	Dir, File uint64
}

// AttrSize is how much of struct landlock_ruleset_attr to give the
// kernel: only the fields in use, so that an old kernel never has to check
// a tail it does not know.
func (r Ruleset) AttrSize() uint64 {
	switch {
	case r.Scoped != 0:
		return 24
	case r.HandledNet != 0:
		return 16
	}
	return 8
}

// Rules lists r's path rules for enforcement: each of Paths, and for each
// ExpandDeny tree the rules that carve its Deny paths out. The carving
// lists directories (again for every spawn, from a listing kept while the
// directory is unchanged), so Rules must run where those directories are
// the ones the sandbox sees: on the host, whose / the view binds.
func (r Ruleset) Rules() ([]Rule, error) {
	var rules []Rule
	for _, p := range r.Paths {
		rules = append(rules, Rule{Path: p.Path, Dir: p.Access, File: p.Access & fileRights})
	}
	for _, p := range r.ExpandDeny {
		var err error
		if rules, err = appendExcept(rules, p.Path, p.Access, r.Deny); err != nil {
			return nil, err
		}
	}
	return rules, nil
}

// appendExcept grants access beneath root except beneath the denied paths:
// each directory on the way from root to a denied path may only be
// listed, and everything else in it is granted on its own.
func appendExcept(rules []Rule, root string, access uint64, deny []string) ([]Rule, error) {
	denied := map[string]bool{}
	onTheWay := map[string]bool{}
	for _, d := range under(deny, root) {
		if d == root {
			return rules, nil // the whole tree is denied
		}
		denied[d] = true
		for a := filepath.Dir(d); ; a = filepath.Dir(a) {
			onTheWay[a] = true
			if a == root || a == "/" {
				break
			}
		}
	}
	var visit func(dir string) error
	visit = func(dir string) error {
		// Listing only: the names beneath a denied directory stay
		// visible, its contents do not.
		rules = append(rules, Rule{Path: dir, Dir: access & accessReadDir})
		ents, err := listed.read(dir)
		if err != nil {
			// Gone, or not listable by this user: grant nothing beneath
			// it (what cannot be listed cannot be carved up safely).
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
				return nil
			}
			return fmt.Errorf("landlock: list %s: %w", dir, err)
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			switch {
			case denied[p]:
			case onTheWay[p] && e.IsDir():
				if err := visit(p); err != nil {
					return err
				}
			default:
				// A rule per entry: a carve-out of /etc has hundreds.
				rules = append(rules, Rule{Path: p, Dir: access, File: access & fileRights})
			}
		}
		return nil
	}
	return rules, visit(root)
}

// listed keeps the directories the carve-outs list, for the process: a
// carve-out is worked out again for every spawn (a name made since the
// last one must get its rule), and listing /etc each time was about 7% of
// a busy hutch serve's CPU.
var listed = listings{dirs: map[string]listing{}}

// maxListings bounds listed: past it, it starts over.
const maxListings = 256

// racyWithin is how recent a directory's change may be for its listing to
// be kept: within a timestamp's granularity, two changes can leave the
// same ctime, and the second would go unseen.
const racyWithin = time.Second

type listings struct {
	mu   sync.Mutex
	dirs map[string]listing
}

// A listing is a directory's entries and its identity and ctime when they
// were read. Every entry made, removed or renamed in a directory moves its
// ctime (as does any change to the directory itself, a utimes included),
// so an equal ctime means the same names.
type listing struct {
	dev, ino uint64
	ctime    unix.Timespec
	ents     []os.DirEntry
}

// read is os.ReadDir(dir), from the last listing while dir's ctime has
// not moved since it.
func (c *listings) read(dir string) ([]os.DirEntry, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return os.ReadDir(dir) // its error, as listing would give it
	}
	c.mu.Lock()
	l, ok := c.dirs[dir]
	c.mu.Unlock()
	if ok && l.dev == uint64(st.Dev) && l.ino == uint64(st.Ino) && l.ctime == st.Ctim {
		return l.ents, nil
	}
	// Read after the stat: a change in between moves the ctime from the
	// one kept, and the next read lists again.
	ents, err := os.ReadDir(dir)
	if err != nil || time.Since(time.Unix(st.Ctim.Unix())) < racyWithin {
		return ents, err
	}
	c.mu.Lock()
	if len(c.dirs) >= maxListings {
		clear(c.dirs)
	}
	c.dirs[dir] = listing{dev: uint64(st.Dev), ino: uint64(st.Ino), ctime: st.Ctim, ents: ents}
	c.mu.Unlock()
	return ents, nil
}
