package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw system calls, with x/sys/unix's types. go-landlock's syscall
// package has the same wrappers, but importing it links libcap's psx into
// every agent binary that imports hutch (with cgo, psx wraps
// pthread_create for the whole process), to offer all-thread enforcement
// that hutch does not want: only the thread that forks the command is
// restricted.

func createRuleset(attr *unix.LandlockRulesetAttr, size uintptr, flags int) (int, error) {
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, uintptr(flags))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func addRule(rulesetFd, ruleType int, rule unsafe.Pointer) error {
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFd), uintptr(ruleType), uintptr(rule), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

const ruleNetPort = 2 // LANDLOCK_RULE_NET_PORT

var abiOnce = sync.OnceValue(func() int {
	v, err := createRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if err != nil {
		return 0 // ENOSYS: not built; EOPNOTSUPP: not enabled at boot
	}
	return v
})

// ABI is the running kernel's Landlock ABI version, 0 when it has none.
// It is read once per process.
func ABI() int { return abiOnce() }

// Restrict enforces r on the calling thread, which must be locked to its
// goroutine (runtime.LockOSThread) and never unlocked: the domain stays with
// the thread and passes to what it forks or execs. It sets no_new_privs on
// the thread first, which Landlock requires of an unprivileged caller.
// An ABI of 0 restricts nothing and returns nil; the Ruleset says so in
// Unenforced.
func Restrict(r Ruleset) error {
	if r.ABI <= 0 {
		return nil
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: r.HandledFS, Handled_access_net: r.HandledNet, Scoped: r.Scoped}
	// Pass only the fields in use, so that an old kernel never has to
	// check a tail it does not know.
	size := unsafe.Sizeof(attr.Handled_access_fs)
	switch {
	case r.Scoped != 0:
		size *= 3
	case r.HandledNet != 0:
		size *= 2
	}
	fd, err := createRuleset(&attr, size, 0)
	if err != nil {
		return fmt.Errorf("landlock: create ruleset (ABI %d): %w", r.ABI, err)
	}
	defer unix.Close(fd)
	for _, p := range r.Paths {
		if err := addPath(fd, p.Path, p.Access); err != nil {
			return err
		}
	}
	for _, p := range r.ExpandDeny {
		if err := addExcept(fd, p.Path, p.Access, r.Deny); err != nil {
			return err
		}
	}
	for _, port := range r.Ports {
		rule := netPortAttr{allowedAccess: accessConnectTCP, port: uint64(port)}
		if err := addRule(fd, ruleNetPort, unsafe.Pointer(&rule)); err != nil {
			return fmt.Errorf("landlock: allow TCP connect to port %d: %w", port, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlock: no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
		return fmt.Errorf("landlock: restrict self: %w", e)
	}
	return nil
}

// addPath grants access beneath path. A path that does not exist is
// skipped: there is nothing beneath it to grant. Symlinks are never
// followed: a rule belongs to the path as the policy names it.
func addPath(rulesetFd int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil
	default:
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if err := addRule(rulesetFd, unix.LANDLOCK_RULE_PATH_BENEATH, unsafe.Pointer(&rule)); err != nil {
		return fmt.Errorf("landlock: allow %#x beneath %s: %w", access, path, err)
	}
	return nil
}

// addExcept grants access beneath root except beneath the denied paths:
// each directory on the way from root to a denied path may only be
// listed, and everything else in it is granted on its own.
func addExcept(rulesetFd int, root string, access uint64, deny []string) error {
	denied := map[string]bool{}
	onTheWay := map[string]bool{}
	for _, d := range under(deny, root) {
		if d == root {
			return nil // the whole tree is denied
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
		if err := addPath(rulesetFd, dir, access&accessReadDir); err != nil {
			return err
		}
		f, err := os.Open(dir)
		if err == nil {
			defer f.Close()
		}
		var ents []os.DirEntry
		if err == nil {
			ents, err = f.ReadDir(-1)
		}
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
				// A rule per entry: the hot loop of a carve-out (/etc
				// has hundreds). The entry's type from the listing saves
				// a stat, and opening it beside the listing's fd saves a
				// walk from the root.
				if err := addEntry(rulesetFd, int(f.Fd()), p, e, access); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return visit(root)
}

// addEntry grants access beneath the entry e of the directory open as
// dirfd (p is its path, for errors). Symlinks get no rule, as in addPath.
func addEntry(rulesetFd, dirfd int, p string, e os.DirEntry, access uint64) error {
	switch t := e.Type(); {
	case t&os.ModeSymlink != 0:
		return nil
	case t.IsDir():
	case t&os.ModeType == os.ModeIrregular:
		return addPath(rulesetFd, p, access) // type unknown: stat it
	default:
		access &= fileRights
	}
	fd, err := unix.Openat(dirfd, e.Name(), unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", p, err)
	}
	defer unix.Close(fd)
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if err := addRule(rulesetFd, unix.LANDLOCK_RULE_PATH_BENEATH, unsafe.Pointer(&rule)); err != nil {
		if errors.Is(err, unix.EINVAL) {
			// Replaced by another type since it was listed.
			return addPath(rulesetFd, p, access)
		}
		return fmt.Errorf("landlock: allow %#x beneath %s: %w", access, p, err)
	}
	return nil
}
