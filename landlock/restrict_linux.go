package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

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
	// held is Path's file, kept with the listing the rule came from, or
	// nil.
	held *heldFile
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
// the ones the sandbox sees: on the host, whose / the view binds. from is
// what the carve-outs were listed from: while it stays Current, Rules
// would give the same rules again.
func (r Ruleset) Rules() (rules []Rule, from Listed, err error) {
	for _, p := range r.Paths {
		rules = append(rules, Rule{Path: p.Path, Dir: p.Access, File: p.Access & fileRights})
	}
	for _, p := range r.ExpandDeny {
		var err error
		if rules, err = appendExcept(rules, p.Path, p.Access, r.Deny, &from); err != nil {
			return nil, Listed{}, err
		}
	}
	return rules, from, nil
}

// Listed is what a set of rules was worked out from: the listing of each
// directory a carve-out visited. The zero Listed, no listing at all, is
// always current.
type Listed struct {
	dirs   []listedDir
	unkept bool // a directory visited had no listing kept
}

type listedDir struct {
	path string
	l    *listing
}

// Current reports whether the rules worked out from l would come out the
// same now, by the rule the listings are kept by: every directory visited
// is the same, with the same ctime. Rules worked out from a directory
// whose listing was not kept (one that changed within racyWithin, or that
// could not be listed) are never current. Rules from no listing at all
// always are.
func (l Listed) Current() bool {
	if l.unkept {
		return false
	}
	for _, d := range l.dirs {
		var st unix.Stat_t
		if err := unix.Stat(d.path, &st); err != nil || !d.l.same(&st) {
			return false
		}
	}
	return true
}

// appendExcept grants access beneath root except beneath the denied paths:
// each directory on the way from root to a denied path may only be
// listed, and everything else in it is granted on its own. It adds the
// directories it lists to from.
func appendExcept(rules []Rule, root string, access uint64, deny []string, from *Listed) ([]Rule, error) {
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
		ents, kept, err := listed.read(dir)
		if kept == nil {
			from.unkept = true
		} else {
			from.dirs = append(from.dirs, listedDir{dir, kept})
		}
		if err != nil {
			// Gone, or not listable by this user: grant nothing beneath
			// it (what cannot be listed cannot be carved up safely).
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
				return nil
			}
			return fmt.Errorf("landlock: list %s: %w", dir, err)
		}
		for i, e := range ents {
			p := filepath.Join(dir, e.Name())
			switch {
			case denied[p]:
			case onTheWay[p] && e.IsDir():
				if err := visit(p); err != nil {
					return err
				}
			default:
				// A rule per entry: a carve-out of /etc has hundreds.
				ru := Rule{Path: p, Dir: access, File: access & fileRights}
				if kept != nil {
					ru.held = listed.hold(dir, kept, i, p)
				}
				rules = append(rules, ru)
			}
		}
		return nil
	}
	return rules, visit(root)
}

// listed keeps the directories the carve-outs list, for the process: a
// carve-out is worked out again for every spawn (a name made since the
// last one must get its rule), and listing /etc each time was about 7% of
// a busy hutch serve's CPU. A kept listing also holds its entries'
// files, so that a ruleset begun on the host (Create) need not open
// hundreds of paths for every spawn: that was over 1 ms of each init's
// start.
var listed = listings{dirs: map[string]*listing{}}

// maxListings bounds listed: past it, it starts over.
const maxListings = 256

// maxHeld bounds the files listed holds open: entries past it are opened
// for each ruleset instead. A quarter of the fds this process may open at
// most, in the host of an agent that may have other uses for them.
var maxHeld = sync.OnceValue(func() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(lim.Cur/4, 1024))
})

// racyWithin is how recent a directory's change may be for its listing to
// be kept: within a timestamp's granularity, two changes can leave the
// same ctime, and the second would go unseen.
const racyWithin = time.Second

type listings struct {
	// mu guards dirs and the held files: a listing dropped closes its
	// files under it, and Create adds them to a ruleset under it.
	mu   sync.Mutex
	dirs map[string]*listing
	held int // open files of the listings in dirs
}

// A listing is a directory's entries and its identity and ctime when they
// were read. Every entry made, removed or renamed in a directory moves its
// ctime (as does any change to the directory itself, a utimes included),
// so an equal ctime means the same names, each leading to the same file.
type listing struct {
	dev, ino uint64
	ctime    unix.Timespec
	ents     []os.DirEntry
	// held are ents' files in order, each opened when a rule first
	// needs it (never a denied entry's), as the init opens a rule's path
	// (O_PATH, a symlink not followed); nil where not opened.
	held []*heldFile
}

// same says whether st, a stat of l's directory now, is the directory l
// listed, unchanged since.
func (l *listing) same(st *unix.Stat_t) bool {
	return l.dev == uint64(st.Dev) && l.ino == uint64(st.Ino) && l.ctime == st.Ctim
}

// heldFile is an open entry of a kept listing.
type heldFile struct {
	fd   int    // -1 once its listing is dropped
	mode uint32 // the file's type, S_IFMT bits
}

// read is os.ReadDir(dir), from the last listing while dir's ctime has
// not moved since it. The listing is returned too when it is kept, for
// hold.
func (c *listings) read(dir string) ([]os.DirEntry, *listing, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		ents, err := os.ReadDir(dir) // its error, as listing would give it
		return ents, nil, err
	}
	c.mu.Lock()
	l, ok := c.dirs[dir]
	if ok && !l.same(&st) {
		c.drop(dir) // changed: its files lead to what the names no longer do
		ok = false
	}
	c.mu.Unlock()
	if ok {
		return l.ents, l, nil
	}
	// Read after the stat: a change in between moves the ctime from the
	// one kept, and the next read lists again.
	ents, err := os.ReadDir(dir)
	if err != nil || time.Since(time.Unix(st.Ctim.Unix())) < racyWithin {
		return ents, nil, err
	}
	l = &listing{dev: uint64(st.Dev), ino: uint64(st.Ino), ctime: st.Ctim, ents: ents, held: make([]*heldFile, len(ents))}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.dirs) >= maxListings {
		for d := range c.dirs {
			c.drop(d)
		}
	}
	c.drop(dir)
	c.dirs[dir] = l
	return ents, l, nil
}

// hold returns the file of entry i (at path) of dir's kept listing l,
// opening it if no rule has yet: nil when l is no longer dir's listing,
// the entry cannot be opened, or maxHeld files are open.
func (c *listings) hold(dir string, l *listing, i int, path string) *heldFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs[dir] != l {
		return nil
	}
	if l.held[i] == nil && c.held < maxHeld() {
		// Opened after the listing, as the init would open it: a name
		// replaced in between is the new file, and moves the ctime.
		if h, err := openRulePath(path); err == nil {
			l.held[i] = h
			c.held++
		}
	}
	return l.held[i]
}

// drop forgets dir's listing and closes its files. c.mu is held.
func (c *listings) drop(dir string) {
	l, ok := c.dirs[dir]
	if !ok {
		return
	}
	for _, h := range l.held {
		if h != nil {
			unix.Close(h.fd)
			h.fd = -1
			c.held--
		}
	}
	delete(c.dirs, dir)
}

// openRulePath opens path as the init opens a rule's path: O_PATH, a
// symlink not followed, its type read from the open file.
func openRulePath(path string) (*heldFile, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("landlock: open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("landlock: stat %s: %w", path, err)
	}
	return &heldFile{fd: fd, mode: st.Mode & unix.S_IFMT}, nil
}

// Create begins r's ruleset on the host with rules, for an init to finish
// with the rules on paths only its view has (nsinit's STEP_LL_RULESET_FD)
// and restrict itself to. Every rule must be on a path the view shares
// with the host: the same path leading to the same file. Each is added as
// the init adds one (a symlink gets none, a missing path none), from the
// file its listing holds where it holds one, else by opening the path.
func (r Ruleset) Create(rules []Rule) (*os.File, error) {
	attr := unix.LandlockRulesetAttr{Handled_access_fs: r.HandledFS, Handled_access_net: r.HandledNet, Scoped: r.Scoped}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), uintptr(r.AttrSize()), 0)
	if e != 0 {
		return nil, fmt.Errorf("landlock: create ruleset (ABI %d): %w", r.ABI, e)
	}
	ruleset := os.NewFile(fd, "landlock-ruleset")
	listed.mu.Lock()
	defer listed.mu.Unlock()
	for _, ru := range rules {
		if err := ru.add(int(fd)); err != nil {
			ruleset.Close()
			return nil, err
		}
	}
	return ruleset, nil
}

// add adds ru to ruleset. listed.mu is held, so its held file stays open.
func (ru Rule) add(ruleset int) error {
	h := ru.held
	if h == nil || h.fd < 0 {
		// Not kept, or its listing replaced since the rule was made.
		var err error
		h, err = openRulePath(ru.Path)
		if errors.Is(err, unix.ENOENT) {
			return nil // nothing beneath it to grant
		}
		if err != nil {
			return err
		}
		defer unix.Close(h.fd)
	}
	access := ru.File
	if h.mode == unix.S_IFDIR {
		access = ru.Dir
	}
	if h.mode == unix.S_IFLNK || access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(h.fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock: allow %#x beneath %s: %w", access, ru.Path, e)
	}
	return nil
}
