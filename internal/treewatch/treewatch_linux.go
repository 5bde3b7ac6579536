// Package treewatch keeps, for a set of directory trees, the set of paths
// whose names matter (files named like secrets, repositories) in step
// with the trees as they change: one walk when it starts, then inotify
// events, so that what a caller reads is as of now at a cost that follows
// the changes, not the size of the trees.
//
// Every directory entered is watched before it is listed, so an entry
// made while it is listed is seen either in the listing or as an event.
// The kernel queues an event before the system call that caused it
// returns: whatever was made before a Sync began, Sync sees. When the
// kernel cannot keep up (its queue overflowed) or cannot watch every
// directory (the watch limit), the trees are walked again, in full, on
// every Sync: correct, at the cost of a walk, and Degraded says why. So
// it is too when the Trees would take more watches than their Budget
// allows: the kernel counts watches per user, so watches the host's
// other programs (editors, file watchers) need are not all taken.
//
// Small trees (at most smallEntries entries) are walked at each look
// until they have been looked at walkedLooks times: a walk of them costs
// less than what closing a watch costs its process (see smallEntries).
package treewatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Action is what a Match says of an entry.
type Action int

const (
	// Enter a directory (nothing for a file).
	Enter Action = iota
	// Record the entry, and do not enter it.
	Record
	// Skip the entry: neither record nor enter it.
	Skip
)

// Match says what to do with the entry p (its name is base), found
// below root; dir says it is a directory (not a symlink to one).
type Match func(root, p, base string, dir bool) Action

// The events that change what is in a directory, and the watched
// directory's own end. The watch is added through /proc/self/fd of the
// directory opened (openExact): that link is followed, to it.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// A Budget bounds how many directories the Trees that share it watch
// together. It is safe for concurrent use.
type Budget struct {
	mu        sync.Mutex
	max, used int
}

// NewBudget returns a Budget of max watches.
func NewBudget(max int) *Budget { return &Budget{max: max} }

// take reserves one watch, reporting false when none is left.
func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.max {
		return false
	}
	b.used++
	return true
}

// give returns n watches.
func (b *Budget) give(n int) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used is how many watches are taken.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Trees watches a set of roots. It is safe for concurrent use.
type Trees struct {
	roots  []string
	match  Match
	budget *Budget

	mu       sync.Mutex
	walking  bool              // small, and read by walks (smallEntries)
	looks    int               // Found calls while walking
	entries  int               // entries listed by the walk under way
	fd       int               // the inotify instance, -1 while walking or once degraded
	dirs     map[int32]string  // watch descriptor -> directory
	nodes    map[string]*node  // directory -> what is watched and found in it
	found    map[string]string // recorded path -> its root
	degraded string            // why every Found walks, "" when events suffice
	closed   bool
	buf      []byte // for events
	dirents  []byte // for listings
}

// node is a watched directory: its watch, and what of its entries is
// watched (subdirectories) or recorded, by name, so that forgetting a
// subtree costs the subtree.
type node struct {
	wd   int32
	kids map[string]bool
	recs map[string]bool
}

// Small trees are walked, not watched, for their first looks. Closing an
// inotify instance that has watches waits for the kernel's fsnotify grace
// period (synchronize_srcu, in the close or in the exit of the process
// holding it last): 8 ms on an idle 250 Hz kernel, 15-20 ms on a busy
// one, and up to 280 ms seen. A hutch run, a Check or a file command, each
// a process that looks at its trees two or three times and ends, would
// pay that at its end, for trees that a walk reads in about a millisecond
// (0.7 ms for 1000 entries, 4 ms for 4000, on a busy two-core machine).
// So trees of at most smallEntries entries are walked at each look; once
// they are looked at walkedLooks times (a Sandbox running commands one
// after another), or grow past smallEntries, they are watched from then
// on, as larger trees are from the start.
var (
	smallEntries = 2048
	walkedLooks  = 8
)

// Watch walks roots once, watching every directory it enters (but for
// small trees, see smallEntries), and returns the Trees. Its watches are
// taken from budget (nil: no bound but the kernel's). It fails only when
// the roots cannot be read at all; a host without inotify, or without
// enough watches, gives Trees that walk on every Sync (Degraded).
func Watch(roots []string, match Match, budget *Budget) (*Trees, error) {
	t := &Trees{roots: slices.Clone(roots), match: match, budget: budget, fd: -1}
	if smallEntries > 0 && walkedLooks > 0 {
		t.walking = true
		t.rescan() // watches instead, past smallEntries entries
		return t, nil
	}
	t.watch()
	return t, nil
}

// watch starts watching the trees: an inotify instance, and the trees
// walked again under it, each directory watched before it is listed.
func (t *Trees) watch() {
	t.walking = false
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.degraded = fmt.Sprintf("inotify: %v", err)
	} else {
		t.fd = fd
	}
	t.rescan()
}

// tooBig says whether the walk under way has listed more than
// smallEntries entries of trees read by walks: they are to be watched.
func (t *Trees) tooBig() bool { return t.walking && t.entries > smallEntries }

// walked says whether the trees are small and read by a walk at each
// Found, not yet watched (smallEntries).
func (t *Trees) walked() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.walking
}

// Degraded says why Sync walks the trees every time, or "".
func (t *Trees) Degraded() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.degraded
}

// Watched is how many directories are watched.
func (t *Trees) Watched() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nodes)
}

// Close releases the inotify instance.
func (t *Trees) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	return t.degrade("closed")
}

// Found returns the recorded paths as of now, sorted: events queued so far
// are applied first (or, degraded, the trees walked again).
func (t *Trees) Found() ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("treewatch: closed")
	}
	switch {
	case t.walking:
		if t.looks++; t.looks >= walkedLooks {
			t.watch() // looked at often: events are cheaper than walks
		} else {
			t.rescan()
		}
	case t.fd < 0:
		t.rescan()
	default:
		t.drain()
	}
	out := make([]string, 0, len(t.found))
	for p := range t.found {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// degrade gives up on events: every Found walks from now on.
func (t *Trees) degrade(why string) error {
	if t.degraded == "" {
		t.degraded = why
	}
	var err error
	if t.fd >= 0 {
		err = unix.Close(t.fd)
		t.fd = -1
	}
	t.budget.give(len(t.nodes))
	t.dirs, t.nodes = nil, nil
	return err
}

// rescan forgets everything and walks every root again.
func (t *Trees) rescan() {
	if t.fd >= 0 && len(t.dirs) > 0 {
		// A fresh instance rather than removing every watch: the old
		// one's queue is stale too.
		unix.Close(t.fd)
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			t.fd = -1
			t.degrade(fmt.Sprintf("inotify: %v", err))
		} else {
			t.fd = fd
		}
	}
	t.budget.give(len(t.nodes))
	t.dirs, t.nodes, t.found = map[int32]string{}, map[string]*node{}, map[string]string{}
	t.entries = 0
	for _, root := range t.roots {
		t.scan(root, root)
		if t.tooBig() {
			t.watch() // no longer small: watched, walked once more
			return
		}
	}
}

// scan watches dir, below root, and everything to enter below it, each
// directory watched before it is listed.
//
// The trees are written by sandboxed commands, which can swap a directory
// on the way for a symlink, or move it, while it is walked: a walk never
// leaves its tree. dir is opened by path, and taken under the name the
// kernel gives what was opened, and only if that lies in the root; below
// it each directory is opened relative to its parent's handle, by its
// name alone and without following a symlink, so it is an entry of a
// directory already inside. (A directory moved while it is walked is
// walked under the name it had; the event its move queued in its watched
// parent has the next drain look at both names.) Past maxFdDepth levels
// the rest is left to be opened by path, as dir is, so that a deep tree
// costs no more than maxFdDepth descriptors at once.
func (t *Trees) scan(root, dir string) {
	if t.dirents == nil {
		t.dirents = make([]byte, 32<<10)
	}
	stack := []string{dir}
	for len(stack) > 0 && !t.tooBig() {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dirFd, real, ok := openWithin(d, root)
		if !ok {
			continue // replaced since it was listed: its event says so
		}
		t.scanAt(root, dirFd, real, 0, &stack)
	}
}

// maxFdDepth is how many levels scanAt descends by handle before it
// leaves the rest to scan's stack.
const maxFdDepth = 24

// scanAt watches and lists the directory open at dirFd, named d, then
// does the same for each subdirectory to enter, and closes dirFd.
func (t *Trees) scanAt(root string, dirFd int, d string, depth int, deeper *[]string) {
	defer unix.Close(dirFd)
	var n *node
	if t.fd >= 0 {
		t.forget(d) // what was known at this path goes, before its watch is made
		granted := t.budget.take()
		var wd int
		var err error
		if granted {
			if wd, err = unix.InotifyAddWatch(t.fd, fdPath(dirFd), watchMask); err != nil {
				t.budget.give(1)
			}
		}
		switch {
		case !granted:
			t.degrade(fmt.Sprintf("the trees have more directories than the %d watches hutch may take (a share of fs.inotify.max_user_watches); the last was %s", t.budget.max, d))
		case err == nil:
			n = &node{wd: int32(wd), kids: map[string]bool{}, recs: map[string]bool{}}
			t.dirs[int32(wd)], t.nodes[d] = d, n
			if parent := t.nodes[filepath.Dir(d)]; parent != nil && d != root {
				parent.kids[filepath.Base(d)] = true
			}
		case errors.Is(err, unix.ENOSPC):
			t.degrade(fmt.Sprintf("the inotify watch limit (fs.inotify.max_user_watches) is reached at %s", d))
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			return // gone, or replaced, since it was listed: its event says so
		}
	}
	var enter []string
	listDir(dirFd, t.dirents, func(name string, isDir bool) {
		t.entries++
		p := d + "/" + name
		if d == "/" {
			p = "/" + name
		}
		switch t.match(root, p, name, isDir) {
		case Record:
			t.found[p] = root
			if n != nil {
				n.recs[name] = true
			}
		case Enter:
			if isDir {
				enter = append(enter, name)
			}
		}
	})
	for _, name := range enter {
		if t.tooBig() {
			return // walked no further: rescan watches instead
		}
		p := d + "/" + name
		if d == "/" {
			p = "/" + name
		}
		if depth+1 >= maxFdDepth {
			*deeper = append(*deeper, p)
			continue
		}
		fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced or gone since it was listed: its event says so
		}
		t.scanAt(root, fd, p, depth+1, deeper)
	}
}

// listDir calls fn for each entry of the directory open at fd but . and
// .., with whether it is a directory (not a symlink to one), read from
// getdents alone where the file system gives entry types. buf is scratch.
func listDir(fd int, buf []byte, fn func(name string, isDir bool)) {
	for {
		nb, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || nb <= 0 {
			return
		}
		// A record is read field by field, not as a unix.Dirent: the
		// last one's name is shorter than Dirent's, which would reach
		// past the buffer.
		var de unix.Dirent
		const (
			reclenAt = unsafe.Offsetof(de.Reclen)
			typeAt   = unsafe.Offsetof(de.Type)
			nameAt   = unsafe.Offsetof(de.Name)
		)
		for off := 0; off < nb; {
			if off+int(nameAt) > nb {
				return
			}
			reclen := int(binary.NativeEndian.Uint16(buf[off+int(reclenAt):]))
			if reclen < int(nameAt) || off+reclen > nb {
				return
			}
			typ := buf[off+int(typeAt)]
			nameOff := off + int(nameAt)
			raw := buf[nameOff : off+reclen]
			if i := bytes.IndexByte(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			off += reclen
			if len(raw) == 0 || string(raw) == "." || string(raw) == ".." {
				continue
			}
			name := string(raw)
			isDir := typ == unix.DT_DIR
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue // gone since
				}
				isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
			}
			fn(name, isDir)
		}
	}
}

// drain applies the events queued when it starts: those queued while it
// runs are left for the next, so that a tree changing without pause (a
// command renaming in a loop) cannot keep it busy. An event only says
// that an entry may have changed; once the events are read, each entry
// they named is looked at as it is now (and a directory walked), once
// however many events named it, and not at all below another such entry:
// the cost of a drain follows the entries that changed, not the events,
// and the order in which the kernel queued them (an exchange of two
// directories reports each name gone and come) does not matter.
func (t *Trees) drain() {
	if t.buf == nil {
		t.buf = make([]byte, 64<<10)
	}
	queued, err := unix.IoctlGetInt(t.fd, unix.TIOCINQ) // FIONREAD
	if err != nil {
		t.rescan()
		return
	}
	touched := map[string]string{} // entry -> its root
	seen := map[int32]map[string]bool{}
	for queued > 0 && t.fd >= 0 {
		n, err := unix.Read(t.fd, t.buf[:min(len(t.buf), max(queued, unix.SizeofInotifyEvent+unix.NAME_MAX+1))])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break // EAGAIN: nothing more queued
		}
		queued -= n
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(t.buf[off:]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := t.buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off = end
			// An entry named again costs no more than a lookup.
			if ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) == 0 && seen[ev.Wd][string(name)] {
				continue
			}
			if !t.apply(ev.Wd, ev.Mask, string(name), touched) {
				return // walked again: the rest of the queue is stale
			}
			if seen[ev.Wd] == nil {
				seen[ev.Wd] = map[string]bool{}
			}
			seen[ev.Wd][string(name)] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(touched)) {
		if t.fd < 0 {
			return // degraded on the way: the next Found walks
		}
		if !below(p, touched) {
			t.look(touched[p], p)
		}
	}
}

// below reports whether p lies under another entry of touched, whose
// look covers it.
func below(p string, touched map[string]string) bool {
	for d := filepath.Dir(p); len(d) > 1; d = filepath.Dir(d) {
		if _, ok := touched[d]; ok {
			return true
		}
	}
	return false
}

// look forgets what was known at p, below root, and records or walks what
// is there now.
func (t *Trees) look(root, p string) {
	t.forget(p)
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	switch t.match(root, p, filepath.Base(p), fi.IsDir()) {
	case Record:
		t.found[p] = root
		if n := t.nodes[filepath.Dir(p)]; n != nil {
			n.recs[filepath.Base(p)] = true
		}
	case Enter:
		if fi.IsDir() {
			t.scan(root, p)
		}
	}
}

// apply reads one event: the entry it names goes into touched. It reports
// false when it had to walk everything again.
func (t *Trees) apply(wd int32, mask uint32, name string, touched map[string]string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		t.rescan()
		return false
	}
	dir, ok := t.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		// The directory is gone (its watch with it): so is what was
		// known below it.
		if n := t.nodes[dir]; ok && n != nil && n.wd == wd {
			t.forget(dir)
		}
		delete(t.dirs, wd)
		return true
	}
	if !ok {
		return true // a directory no longer watched: its replacement is looked at
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		if slices.Contains(t.roots, dir) {
			// A root itself went away or moved: what is at its path
			// now is another tree.
			t.rescan()
			return false
		}
		return true // its parent's event names it
	}
	if name != "" {
		touched[filepath.Join(dir, name)] = t.rootOf(dir)
	}
	return true
}

// forget drops what is recorded or watched at or below p, at the cost
// of what was there.
func (t *Trees) forget(p string) {
	delete(t.found, p)
	if parent := t.nodes[filepath.Dir(p)]; parent != nil {
		delete(parent.recs, filepath.Base(p))
		delete(parent.kids, filepath.Base(p))
	}
	t.drop(p)
}

// drop unwatches the directory p and everything watched below it.
func (t *Trees) drop(p string) {
	n := t.nodes[p]
	if n == nil {
		return
	}
	for name := range n.recs {
		delete(t.found, p+"/"+name)
	}
	for name := range n.kids {
		t.drop(p + "/" + name)
	}
	if t.fd >= 0 {
		_, _ = unix.InotifyRmWatch(t.fd, uint32(n.wd))
	}
	t.budget.give(1)
	delete(t.nodes, p)
	delete(t.dirs, n.wd)
}

// rootOf is the root dir lies in.
func (t *Trees) rootOf(dir string) string {
	best := ""
	for _, r := range t.roots {
		if (dir == r || strings.HasPrefix(dir, r+"/") || r == "/") && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// openWithin opens the directory at path p and returns it with the path
// the kernel gives it, when that is root or lies in it.
func openWithin(p, root string) (int, string, bool) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", false
	}
	real, err := os.Readlink(fdPath(fd))
	if err != nil || real != root && !strings.HasPrefix(real, root+"/") && root != "/" {
		unix.Close(fd)
		return -1, "", false
	}
	return fd, real, true
}

// fdPath names fd's file through /proc.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
