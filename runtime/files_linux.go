//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/mounts"
)

// maxSymlinks is how many symlinks one resolution follows, as the kernel
// (ELOOP past 40).
const maxSymlinks = 40

// fileView is the view a file operation resolves against: the mount plan
// the next command would get.
type fileView struct {
	plan mounts.Plan
	dir  string // where relative paths start: the workspace
	home string // Policy.Home, or ""
}

// homePath is p as ~/... when it lies in v.home.
func (v *fileView) homePath(p string) string {
	switch {
	case v.home == "" || !mounts.Within(p, v.home):
		return ""
	case p == v.home:
		return "~"
	}
	return "~/" + p[len(v.home)+1:]
}

// fileView is the view the file operation op on name resolves against.
func (sb *Sandbox) fileView(op, name string) (*fileView, error) {
	if sb.level == LevelLandlock || sb.level == LevelUnsandboxed {
		return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the file operations need the namespaces' view, and this Sandbox runs at level %s", errors.ErrUnsupported, sb.level)}
	}
	return sb.files.view(sb)
}

// viewCache keeps the last fileView while what it was read from is
// unchanged: the writable trees' top levels (their deny-name matches and
// repositories; see fresh) are read again only when one of the roots, its
// .git, or the git directories of the repositories found there has changed
// since (a stat each). A directory changed within
// racyWindow of its reading may change again within the same timestamp
// tick, which a stamp could not show: such a reading is used once, as git
// treats its index.
type viewCache struct {
	mu     sync.Mutex
	v      *fileView
	stamps []stamp // of what v was read from, when it was
	readAt time.Time
}

// stamp is what says a path is as it was: the same inode, not modified.
type stamp struct {
	path     string
	dev, ino uint64
	mtime    unix.Timespec
	ok       bool // it existed
}

func stampOf(p string) stamp {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return stamp{path: p}
	}
	return stamp{path: p, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ok: true}
}

// racyWindow is longer than any filesystem's timestamp tick.
const racyWindow = 50 * time.Millisecond

func (c *viewCache) view(sb *Sandbox) (*fileView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v != nil && c.current() {
		return c.v, nil
	}
	readAt := time.Now()
	var stamps []stamp
	for _, r := range sb.roots() {
		stamps = append(stamps, stampOf(r), stampOf(r+"/.git"))
	}
	// What the next command's view holds now: the top levels' deny-name
	// matches and repositories are read again, as for a command.
	f, err := sb.scanFresh()
	if err != nil {
		c.v = nil
		return nil, err
	}
	// Those repositories' git directories (which may lie elsewhere, for a
	// linked worktree) decide their guards too. Stamped after the scan but
	// against readAt, a change during it makes the reading used once.
	for _, r := range f.repos {
		for _, d := range r.Dirs {
			stamps = append(stamps, stampOf(d))
		}
	}
	c.v = &fileView{plan: sb.plan(f), dir: sb.spec.Workspace, home: sb.policy.Home}
	c.stamps, c.readAt = stamps, readAt
	return c.v, nil
}

// current reports whether nothing the cached view was read from has
// changed since.
func (c *viewCache) current() bool {
	for _, s := range c.stamps {
		if s != stampOf(s.path) || s.ok && c.readAt.Sub(time.Unix(s.mtime.Unix())) < racyWindow {
			return false
		}
	}
	return true
}

// walked is where a resolution ended: dir, an open O_PATH handle on the
// directory (with its path in the view), and the last component's name
// in it, which may not exist.
type walked struct {
	dir     int
	dirPath string
	name    string
}

func (r *walked) path() string { return path.Join(r.dirPath, r.name) }

func (r *walked) close() { unix.Close(r.dir) }

// crossable says whether the walk may cross p although place refused it
// (err): a private or hidden directory holding the way to a host tree
// bound below it (a workspace under the private /tmp, an app's own
// directory among hidden ones), which the walk crosses by directories only:
// in the view it holds nothing else.
func (v *fileView) crossable(p string, err error) bool {
	return (errors.Is(err, ErrPrivate) || errors.Is(err, ErrDenied)) && v.plan.HostBelow(p)
}

// openRoot opens the view's root, the host's.
func openRoot() (int, error) {
	return unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// place says what p is in the view, refusing what is not the host's.
func (v *fileView) place(p string) (mounts.Place, error) {
	pl := v.plan.Lookup(p)
	switch {
	case pl.Reach == mounts.Masked:
		return pl, ErrDenied
	case pl.Reach == mounts.Private:
		return pl, ErrPrivate
	case pl.HostPath != p:
		// The plans bind host trees at their own paths; a plan that did
		// not would need another walk.
		return pl, fmt.Errorf("hutch: %s is the host's %s, which the file operations do not follow", p, pl.HostPath)
	}
	return pl, nil
}

// walk resolves name (absolute, or relative to the workspace) as the kernel
// would in the view, from the view's root, opening each directory from
// the one before it with O_NOFOLLOW and following symlinks itself. Every
// directory it enters and the path it ends on are checked against the
// plan on the way: a masked or private component stops it. With follow,
// a symlink as the last component is followed too. With mkdir, missing
// directories on the way are created (each in a writable place).
func (v *fileView) walk(name string, follow, mkdir bool) (*walked, error) {
	if !path.IsAbs(name) {
		name = v.dir + "/" + name // not path.Join: .. is resolved on the way, after symlinks
	}
	// A trailing / (or /.) asks for a directory, as in the kernel.
	mustDir := strings.HasSuffix(name, "/") || strings.HasSuffix(name, "/.")
	cur, curPath, comps := v.openPrefix(name)
	if cur < 0 {
		var err error
		if cur, err = openRoot(); err != nil {
			return nil, err
		}
		curPath, comps = "/", strings.Split(name, "/")
	}
	fail := func(err error) (*walked, error) {
		unix.Close(cur)
		return nil, err
	}
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		last := !moreNames(comps)
		switch c {
		case "", ".":
			continue
		case "..":
			if curPath != "/" {
				parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return fail(err)
				}
				unix.Close(cur)
				cur, curPath = parent, path.Dir(curPath)
			}
			continue
		}
		child := path.Join(curPath, c)
		pl, placeErr := v.place(child)
		crossing := placeErr != nil && !last && v.crossable(child, placeErr)
		if placeErr != nil && !crossing {
			if v.leaves(cur, curPath, c, pl, comps) {
				comps = comps[slices.Index(comps, "..")+1:] // X/.. is where the walk is
				continue
			}
			return fail(placeErr)
		}
		if last && !follow && !mustDir {
			return &walked{dir: cur, dirPath: curPath, name: c}, nil
		}
		// A directory opens with O_DIRECTORY; anything else fails with
		// ENOTDIR, and readlink tells a symlink from a file: no stat.
		fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && last && !mustDir {
			return &walked{dir: cur, dirPath: curPath, name: c}, nil
		}
		if err == unix.ENOENT && mkdir && !crossing {
			if !pl.Writable {
				return fail(ErrDenied)
			}
			if err := unix.Mkdirat(cur, c, 0o755); err != nil && err != unix.EEXIST {
				return fail(err)
			}
			fd, err = unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		switch {
		case err == nil: // a directory
			if last {
				unix.Close(fd)
				return &walked{dir: cur, dirPath: curPath, name: c}, nil
			}
			unix.Close(cur)
			cur, curPath = fd, child
		case err == unix.ENOTDIR && crossing:
			return fail(placeErr) // not a directory: nothing the view shows
		case err == unix.ENOTDIR:
			target, err := readlinkAt(cur, c)
			if err == unix.EINVAL { // not a symlink: a file
				if !last || mustDir {
					return fail(unix.ENOTDIR)
				}
				return &walked{dir: cur, dirPath: curPath, name: c}, nil
			}
			if err != nil {
				return fail(err)
			}
			if links++; links > maxSymlinks {
				return fail(unix.ELOOP)
			}
			if path.IsAbs(target) {
				root, err := openRoot()
				if err != nil {
					return fail(err)
				}
				unix.Close(cur)
				cur, curPath = root, "/"
			}
			comps = append(strings.Split(target, "/"), comps...)
		default:
			return fail(err)
		}
	}
	return v.walkDone(cur, curPath)
}

// leaves says whether the walk, in the host directory cur (curPath), may
// pass through c, which place refused (pl), because the next name after
// it is "..": c is then the root of a hidden or private directory of the
// view (an empty directory, or the sandbox's own filesystem), and the
// kernel leaves a mount's root by .. for the directory the mount is on,
// where the walk already is. So /run/../etc/hostname reads /etc/hostname
// in the view as in a command, with /run hidden. A Mask's mode-0000
// directory cannot be entered at all, a hidden file is not a directory to
// leave, and below a private root the view holds what the host cannot
// tell: only a root in a directory of the host's qualifies.
func (v *fileView) leaves(cur int, curPath, c string, pl mounts.Place, comps []string) bool {
	if pl.Closed {
		return false
	}
	next := ""
	for _, n := range comps {
		if n != "" && n != "." {
			next = n
			break
		}
	}
	if next != ".." {
		return false
	}
	if _, err := v.place(curPath); err != nil && curPath != "/" {
		return false
	}
	fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// openPrefix is the walk's shortcut for the usual path: clean, with no
// symlink on the way to its directory. It checks each directory of the
// way against the plan, as the walk does, then opens the directory in one
// openat2 that fails on any symlink (RESOLVE_NO_SYMLINKS), and returns it
// with the components left (the last). -1: take the long way (a symlink
// or .. on the way, a missing directory, no openat2).
func (v *fileView) openPrefix(name string) (int, string, []string) {
	dir, base := path.Dir(name), path.Base(name)
	if path.Clean(name) != name || dir == "/" {
		return -1, "", nil
	}
	for p := dir; p != "/"; p = path.Dir(p) {
		if _, err := v.place(p); err != nil && !v.crossable(p, err) {
			return -1, "", nil // the long way says why
		}
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return -1, "", nil
	}
	return fd, dir, []string{base}
}

// walkDone ends a walk on the directory cur itself (a path ending in /,
// . or ..): it is named as its parent's entry.
func (v *fileView) walkDone(cur int, curPath string) (*walked, error) {
	if curPath == "/" {
		return &walked{dir: cur, dirPath: "/", name: "."}, nil
	}
	parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(cur)
	if err != nil {
		return nil, err
	}
	return &walked{dir: parent, dirPath: path.Dir(curPath), name: path.Base(curPath)}, nil
}

// moreNames reports whether comps has a component left that names something
// ("" and "." do not).
func moreNames(comps []string) bool {
	for _, c := range comps {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// readlinkAt reads the symlink name in dir; EINVAL: it is not one.
func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= maxPath {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

// fileInfo describes fi, the file at p in the view.
func (v *fileView) fileInfo(p string, fi fs.FileInfo) FileInfo {
	pl := v.plan.Lookup(p)
	return FileInfo{Path: p, HomePath: v.homePath(p), HostPath: pl.HostPath, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), Writable: pl.Writable}
}

// statAt describes the entry name of dir, not following a symlink, through
// a handle of its own (what os.File.Stat reports), never by path.
func statAt(dir int, name string) (fs.FileInfo, error) {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return f.Stat()
}

// pathErr wraps err for the operation op on name as the caller wrote it.
func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	var fe *FilePathError
	if errors.As(err, &pe) || errors.As(err, &fe) {
		return err
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// openIn opens r's entry with flags, never following a symlink: one that
// appeared there since the walk (a swap) fails the open, and the caller
// resolves again.
//
// O_NONBLOCK keeps the open from waiting on a FIFO; on the regular file
// it then must be, it changes nothing.
func openIn(r *walked, flags int, perm uint32) (*os.File, fs.FileInfo, error) {
	fd, err := unix.Openat(r.dir, r.name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), r.path())
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = unix.EISDIR
	case !fi.Mode().IsRegular():
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// maxRaces bounds how often an operation resolves again after its entry
// turned into a symlink between the walk and the open.
const maxRaces = 8

// open resolves name and opens the regular file it names with flags
// (O_CREAT: creating missing parent directories, and only where the view
// is writable, as for any write), returning it with its path in the view.
// An entry that became a symlink after the walk is resolved again, unless
// follow is off: a symlink is then refused.
func (v *fileView) open(op, name string, follow bool, flags int, perm uint32) (*os.File, *FileInfo, error) {
	write := flags&(unix.O_WRONLY|unix.O_RDWR) != 0
	for race := 0; ; race++ {
		r, err := v.walk(name, follow, write)
		if err != nil {
			return nil, nil, pathErr(op, name, err)
		}
		p := r.path()
		if write {
			if pl, err := v.place(p); err != nil || !pl.Writable {
				r.close()
				if err == nil {
					err = ErrDenied
				}
				return nil, nil, pathErr(op, name, err)
			}
		}
		f, st, err := openIn(r, flags, perm)
		r.close()
		switch {
		case err == unix.ELOOP && follow && race < maxRaces:
			continue
		case err == unix.ELOOP && !follow:
			err = errors.New("is a symlink, and NoFollow is set")
		}
		if err != nil {
			return nil, nil, pathErr(op, name, err)
		}
		fi := v.fileInfo(p, st)
		return f, &fi, nil
	}
}

// ReadFile reads name as a command of the Sandbox could: name is absolute
// or relative to the workspace, resolved in the sandbox's view, and read
// only if that view lets commands read it. It returns ErrDenied (masked),
// ErrPrivate (the sandbox's own /tmp, /dev, /proc) or the system's error
// (fs.ErrNotExist, ...), as an *fs.PathError naming name. Policy.Leaks
// applies to what it read: the secrets found are in Leaks, redacted from a
// text under LeaksRedact; a *LeakError refuses a binary file holding one
// under LeaksRedact, and any file holding one under LeaksKill.
func (sb *Sandbox) ReadFile(name string, opt ReadOptions) (*FileContent, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, err
	}
	if opt.Offset < 0 || opt.Limit < 0 {
		return nil, &FilePathError{Field: "ReadOptions", Path: name, Reason: fmt.Sprintf("negative offset %d or limit %d", opt.Offset, opt.Limit)}
	}
	switch opt.Mode {
	case ReadAuto, ReadText, ReadBinary:
	default:
		return nil, &FilePathError{Field: "ReadOptions.Mode", Path: string(opt.Mode), Reason: `not "", "text" or "binary"`}
	}
	v, err := sb.fileView("read", name)
	if err != nil {
		return nil, err
	}
	f, fi, err := v.open("read", name, !opt.NoFollow, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := readWindow(*fi, f, opt)
	if err != nil {
		return nil, err
	}
	if err := scanRead(sb.leaks, sb.policy.Leaks, name, c); err != nil {
		return nil, err
	}
	return c, nil
}

// readWindow reads the window opt asks for of f, described by fi.
func readWindow(fi FileInfo, f *os.File, opt ReadOptions) (*FileContent, error) {
	p := fi.Path
	limit := opt.Limit
	if limit == 0 {
		limit = DefaultReadLimit
	}
	c := &FileContent{FileInfo: fi, Offset: opt.Offset}
	if opt.Mode == ReadAuto && opt.Offset == 0 {
		if img, ok := detectImage(f, fi.Size); ok && fi.Size <= limit {
			c.Kind, c.MIME, c.Width, c.Height = ContentImage, img.MIME, img.Width, img.Height
			data, err := io.ReadAll(io.NewSectionReader(f, 0, fi.Size))
			if err != nil {
				return nil, pathErr("read", p, err)
			}
			c.Data, c.EOF = data, true
			return c, nil
		}
	}
	// One byte past the window says whether it reached the end; a small
	// file gets a small buffer, whatever the limit.
	want := limit
	if left := fi.Size - opt.Offset; left >= 0 && left < want {
		want = left
	}
	buf := make([]byte, want+1)
	n, err := f.ReadAt(buf, opt.Offset)
	if err != nil && err != io.EOF {
		return nil, pathErr("read", p, err)
	}
	c.EOF = int64(n) <= limit
	data := buf[:min(int64(n), limit)]
	switch {
	case opt.Mode == ReadBinary:
		c.Kind = ContentBinary
	case opt.Mode == ReadText || isText(data, c.EOF):
		c.Kind = ContentText
		var head, tail int
		data, head, tail = utf8Window(data, opt.Offset == 0, c.EOF)
		c.Offset += int64(head)
		if tail > 0 {
			c.EOF = false
		}
	default:
		c.Kind = ContentBinary
	}
	c.Data = data
	return c, nil
}

// WriteFile writes data to name as a command of the Sandbox could: name
// must be absolute; it is resolved in the sandbox's view, and written only
// if that view lets commands write it (a writable tree, not masked, not
// made read-only). Missing parent directories are created. The write goes
// through the handle the check was made on.
func (sb *Sandbox) WriteFile(name string, data []byte, opt WriteOptions) (*FileInfo, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, err
	}
	if !path.IsAbs(name) {
		return nil, &FilePathError{Field: "name", Path: name, Reason: "not absolute: WriteFile takes absolute paths only"}
	}
	if opt.Perm&^fs.ModePerm != 0 {
		return nil, &FilePathError{Field: "WriteOptions.Perm", Path: opt.Perm.String(), Reason: "not permission bits"}
	}
	perm := uint32(opt.Perm)
	if perm == 0 {
		perm = 0o644
	}
	flags := unix.O_WRONLY | unix.O_CREAT
	if opt.Append {
		flags |= unix.O_APPEND
	} else {
		flags |= unix.O_TRUNC
	}
	v, err := sb.fileView("write", name)
	if err != nil {
		return nil, err
	}
	f, opened, err := v.open("write", name, !opt.NoFollow, flags, perm)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	var fi FileInfo
	if err == nil {
		var st fs.FileInfo
		if st, err = f.Stat(); err == nil { // of the handle written, not of the path
			fi = v.fileInfo(opened.Path, st)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, pathErr("write", name, err)
	}
	return &fi, nil
}

// OpenForSend opens name for a tool that sends a file off the machine (a
// chat attachment, an upload): on top of ReadFile's rules the file must
// lie in the workspace, every symlink resolved, be a regular file, and
// hold at most maxBytes (0: DefaultSendLimit). The caller sends from the
// returned handle, the one that was checked, and closes it.
func (sb *Sandbox) OpenForSend(name string, maxBytes int64) (*os.File, *FileInfo, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, nil, err
	}
	if maxBytes < 0 {
		return nil, nil, &FilePathError{Field: "maxBytes", Path: name, Reason: fmt.Sprintf("negative: %d", maxBytes)}
	}
	if maxBytes == 0 {
		maxBytes = DefaultSendLimit
	}
	v, err := sb.fileView("send", name)
	if err != nil {
		return nil, nil, err
	}
	f, fi, err := v.open("send", name, true, unix.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case !mounts.Within(fi.Path, sb.spec.Workspace):
		err = fmt.Errorf("%w: only files in the workspace %s leave the machine, and this is %s", ErrDenied, sb.spec.Workspace, fi.Path)
	case fi.Size > maxBytes:
		err = fmt.Errorf("%s, over the limit of %s", FormatSize(fi.Size), FormatSize(maxBytes))
	}
	if err != nil {
		f.Close()
		return nil, nil, pathErr("send", name, err)
	}
	return f, fi, nil
}

// Stat describes name as a command of the Sandbox would see it, every
// symlink followed.
func (sb *Sandbox) Stat(name string) (*FileInfo, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, err
	}
	v, err := sb.fileView("stat", name)
	if err != nil {
		return nil, err
	}
	r, err := v.walk(name, true, false)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	defer r.close()
	st, err := statAt(r.dir, r.name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	fi := v.fileInfo(r.path(), st)
	return &fi, nil
}

// ReadDir lists the directory name as a command of the Sandbox would see
// it, sorted by name: masked and private entries are listed (a command
// sees something there too), marked Denied or Private, with nothing of
// theirs read.
func (sb *Sandbox) ReadDir(name string) ([]FileInfo, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, err
	}
	v, err := sb.fileView("readdir", name)
	if err != nil {
		return nil, err
	}
	r, err := v.walk(name, true, false)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	dir := r.path()
	fd, err := unix.Openat(r.dir, r.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	r.close()
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	slices.Sort(names)
	out := make([]FileInfo, 0, len(names))
	for _, n := range names {
		p := path.Join(dir, n)
		pl := v.plan.Lookup(p)
		if pl.Reach != mounts.OnHost {
			out = append(out, FileInfo{Path: p, Denied: pl.Reach == mounts.Masked, Private: pl.Reach == mounts.Private})
			continue
		}
		st, err := statAt(fd, n)
		if err != nil {
			continue // gone since the listing
		}
		out = append(out, v.fileInfo(p, st))
	}
	return out, nil
}
