//go:build linux

package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/nsinit"
)

// fileView names what the file door reached: the mount plan of the
// init that reached it, for the labels of results (the host path beside
// the sandbox's, writable, masked, private). It decides nothing: every
// path is resolved and judged by the kernel, in the file server.
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

// fileDoor is a Sandbox's file server: an init built from the plan a
// command started now would get, which, instead of running a command,
// opens, makes and lists paths for the host in its own view, with its
// own credentials, Landlock and seccomp (nsinit.FileClient). The host
// only reads, writes and fstats the regular files it hands over: no path
// is resolved on the host, so what the file door reaches is what a command
// reaches, by construction.
//
// The server is made on the first file operation and made again whenever
// what is read fresh for a command (deny-name matches, repositories)
// differs from what it was built with; one operation at a time uses it.
type fileDoor struct {
	mu     sync.Mutex
	in     *sandboxInit
	client *nsinit.FileClient
	fresh  fresh
	view   *fileView
	closed bool
	// idle stops the server once no operation has used it for
	// fileServerIdle; used is when the last one ended.
	idle *time.Timer
	used time.Time
	// stopping are the servers being ended in the background; close
	// waits for them, so that nothing of the door outlives its Sandbox's
	// Close.
	stopping sync.WaitGroup
}

// fileServerIdle is how long an unused file server is kept: operations
// in a burst (an agent's tool calls) share one, and a Sandbox that reads
// no more files holds no init for it.
const fileServerIdle = 5 * time.Second

// fileServerTimeout bounds one request to the file server: a file system
// that does not answer (a hung network mount) costs the caller this, not
// the Sandbox's file door for good.
const fileServerTimeout = 30 * time.Second

// fileSession is one file operation's hold on the file server.
type fileSession struct {
	sb   *Sandbox
	door *fileDoor
	*fileView
	op, name string
	retried  bool
}

// fileSession starts the file operation op on name: the server current
// now, held until done.
func (sb *Sandbox) fileSession(op, name string) (*fileSession, error) {
	if sb.level == LevelLandlock || sb.level == LevelUnsandboxed {
		return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the file operations need the namespaces' view, and this Sandbox runs at level %s", errors.ErrUnsupported, sb.level)}
	}
	d := &sb.files
	d.mu.Lock()
	s := &fileSession{sb: sb, door: d, op: op, name: name}
	if err := s.current(); err != nil {
		d.mu.Unlock()
		return nil, pathErr(op, name, err)
	}
	return s, nil
}

func (s *fileSession) done() {
	d := s.door
	d.used = time.Now()
	if d.in != nil {
		if d.idle == nil {
			d.idle = time.AfterFunc(fileServerIdle, d.expire)
		} else {
			d.idle.Reset(fileServerIdle)
		}
	}
	d.mu.Unlock()
}

// expire stops a server left unused for fileServerIdle.
func (d *fileDoor) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if wait := fileServerIdle - time.Since(d.used); wait > 0 {
		d.idle.Reset(wait) // used since the timer was set
		return
	}
	d.stop()
}

// current makes sure the door's server was built with what a command
// started now would get: it reads the fresh inputs, and replaces a server
// built with others, or one that died.
func (s *fileSession) current() error {
	d, sb := s.door, s.sb
	if d.closed { // set by Close, which waits for d.mu: no isClosed here
		return ErrClosed
	}
	f, err := sb.readFresh()
	if err != nil {
		return err
	}
	if d.in != nil && d.fresh.equal(f) && !d.in.exited() {
		s.fileView = d.view
		return nil
	}
	d.stop()
	in, err := sb.startInit(f, sb.fileSpawn)
	if err != nil {
		return err
	}
	if err := in.serveFiles(); err != nil {
		in.release()
		return err
	}
	d.in, d.client, d.fresh = in, nsinit.NewFileClient(in.control), f
	d.view = &fileView{plan: sb.plan(f), dir: sb.spec.Workspace, home: sb.policy.Home}
	s.fileView = d.view
	return nil
}

// stop ends the server, if there is one, in the background.
func (d *fileDoor) stop() {
	if in := d.in; in != nil {
		in.kill()
		d.stopping.Add(1)
		go func() {
			defer d.stopping.Done()
			in.reap()
		}()
		d.in, d.client, d.view = nil, nil, nil
	}
}

// close ends the server for good: the Sandbox is closed or replaced.
func (d *fileDoor) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.idle != nil {
		d.idle.Stop()
	}
	d.stop()
	d.stopping.Wait()
}

// serveFiles waits for the init to be built, then makes it a file server.
func (in *sandboxInit) serveFiles() error {
	ev, ok := <-in.events
	switch {
	case ok && ev.Kind == nsinit.EventError && ev.Error != nil:
		return setupError(ev.Error)
	case !ok || ev.Kind != nsinit.EventReady:
		return errors.New("hutch: the file server's sandbox died while it was built")
	}
	if err := <-in.cfgSent; err != nil {
		return err
	}
	tv := unix.NsecToTimeval(fileServerTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(in.control, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	return nsinit.WriteFrame(in.control, nsinit.EncodeFiles())
}

// exited reports whether the init has ended.
func (in *sandboxInit) exited() bool {
	select {
	case <-in.proc.Done():
		return true
	default:
		return false
	}
}

// call runs one request; a server that fails (died, out of step, too
// slow) is replaced and the request made once more, on a server that
// again is current.
func (s *fileSession) call(do func(c *nsinit.FileClient) error) error {
	for {
		err := do(s.door.client)
		if err == nil || !errors.Is(err, nsinit.ErrFileServer) {
			return err
		}
		s.door.stop()
		if s.retried {
			return err
		}
		s.retried = true
		if err := s.current(); err != nil {
			return err
		}
	}
}

// abs is name as the server takes it: absolute, a relative name joined to
// the workspace (not cleaned: the kernel resolves .. after symlinks).
func (s *fileSession) abs(name string) (string, error) {
	if !path.IsAbs(name) {
		name = s.dir + "/" + name
	}
	if len(name) >= maxPath {
		return "", unix.ENAMETOOLONG
	}
	return name, nil
}

// private refuses a path the sandbox resolves into a filesystem of its
// own: the server's own /tmp, /dev or /proc are not the host's, nor any
// command's.
func (s *fileSession) private(p string) error {
	if s.plan.Lookup(p).Reach == mounts.Private {
		return ErrPrivate
	}
	return nil
}

// open opens name in the server's view; p is name made absolute.
func (s *fileSession) open(p string, flags int, perm uint32, want int) (nsinit.FileStat, *os.File, error) {
	var st nsinit.FileStat
	var f *os.File
	err := s.call(func(c *nsinit.FileClient) (err error) {
		st, f, err = c.Open(p, flags, perm, want)
		return err
	})
	return st, f, err
}

// refusal is the error for the kernel's refusal errno of an operation on
// p (absolute). It explains, never decides: a refusal of EACCES or EROFS
// is ErrDenied when the path is masked in the view, or a write outside
// its writable trees, judged by where the server resolves it, or
// where it leads as written when the server cannot resolve it either.
func (s *fileSession) refusal(p string, write bool, errno syscall.Errno) error {
	switch errno {
	case unix.EROFS:
		return fmt.Errorf("read-only in the sandbox (not in a writable tree, or kept read-only there): %w", ErrDenied)
	case unix.EACCES, unix.EPERM:
	default:
		return errno
	}
	where := path.Clean(p)
	if st, _, err := s.open(p, unix.O_PATH, 0, 0); err == nil && st.Err == 0 && st.Path != "" {
		where = st.Path
	}
	pl := s.plan.Lookup(where)
	switch {
	case pl.Reach == mounts.Masked:
		return fmt.Errorf("%s is masked: %w", where, ErrDenied)
	case write && !pl.Writable:
		return fmt.Errorf("%s is outside the writable trees: %w", where, ErrDenied)
	}
	return errno
}

// info describes what the server opened (st, named in the view).
func (s *fileSession) info(st nsinit.FileStat) (FileInfo, error) {
	if st.Path == "" || !path.IsAbs(st.Path) {
		return FileInfo{}, errors.New("the sandbox cannot name the file it opened")
	}
	if err := s.private(st.Path); err != nil {
		return FileInfo{}, err
	}
	pl := s.plan.Lookup(st.Path)
	return FileInfo{Path: st.Path, HomePath: s.homePath(st.Path), HostPath: pl.HostPath, Size: st.Size, Mode: st.FileMode(), ModTime: st.ModTime, Writable: pl.Writable}, nil
}

// openFile opens the regular file name with flags and hands it over, or
// says why not.
func (s *fileSession) openFile(name string, flags int, perm uint32, noFollow bool) (*os.File, FileInfo, error) {
	p, err := s.abs(name)
	if err == nil {
		err = s.private(path.Clean(p))
	}
	if err != nil {
		return nil, FileInfo{}, pathErr(s.op, name, err)
	}
	if noFollow {
		flags |= unix.O_NOFOLLOW
	}
	write := flags&(unix.O_WRONLY|unix.O_RDWR) != 0
	st, f, err := s.open(p, flags, perm, nsinit.FileSend|nsinit.FileRegular)
	if err == nil && st.Err == unix.ENOENT && flags&unix.O_CREAT != 0 {
		// Missing parents are made as mkdir -p makes them, a prefix of
		// the name at a time, each judged by the kernel; then once more.
		if err = s.mkdirAll(parentOf(p)); err == nil {
			st, f, err = s.open(p, flags, perm, nsinit.FileSend|nsinit.FileRegular)
		}
	}
	if err != nil {
		return nil, FileInfo{}, pathErr(s.op, name, err)
	}
	switch {
	case st.Err == unix.ELOOP && noFollow:
		return nil, FileInfo{}, pathErr(s.op, name, errors.New("is a symlink, and NoFollow is set"))
	case st.Err == unix.EINVAL:
		return nil, FileInfo{}, pathErr(s.op, name, errors.New("not a regular file"))
	case st.Err != 0:
		return nil, FileInfo{}, pathErr(s.op, name, s.refusal(p, write, st.Err))
	}
	fi, err := s.info(st)
	if err != nil {
		f.Close()
		return nil, FileInfo{}, pathErr(s.op, name, err)
	}
	return f, fi, nil
}

// mkdirAll makes dir and its missing parents in the server's view, as
// mkdir -p does: each prefix of dir as written, in turn. What fails is
// left to the open that follows to report.
func (s *fileSession) mkdirAll(dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' || dir[i-1] == '/' {
			continue
		}
		err := s.call(func(c *nsinit.FileClient) error {
			_, err := c.Mkdir(dir[:i], 0o755)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// parentOf is p's directory as dirname(1) gives it: the name less its
// last component, not cleaned.
func parentOf(p string) string {
	p = strings.TrimRight(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return strings.TrimRight(p[:i], "/")
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
	door, err := sb.fileSession("read", name)
	if err != nil {
		return nil, err
	}
	f, fi, err := door.openFile(name, unix.O_RDONLY, 0, opt.NoFollow)
	door.done()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := readWindow(fi, f, opt)
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
	// An image is given whole or not as one: when the window holds the
	// whole file, it is judged from what was read, with no read more.
	if opt.Mode == ReadAuto && opt.Offset == 0 && c.EOF && fi.Size <= limit {
		if img, ok := detectImage(bytes.NewReader(data), int64(len(data))); ok {
			c.Kind, c.MIME, c.Width, c.Height = ContentImage, img.MIME, img.Width, img.Height
			c.Data = data
			return c, nil
		}
	}
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
	door, err := sb.fileSession("write", name)
	if err != nil {
		return nil, err
	}
	f, opened, err := door.openFile(name, flags, perm, opt.NoFollow)
	door.done()
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	var fi FileInfo
	if err == nil {
		var st fs.FileInfo
		if st, err = f.Stat(); err == nil { // of the handle written, not of the path
			fi = opened
			fi.Size, fi.Mode, fi.ModTime = st.Size(), st.Mode(), st.ModTime()
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
	door, err := sb.fileSession("send", name)
	if err != nil {
		return nil, nil, err
	}
	f, fi, err := door.openFile(name, unix.O_RDONLY, 0, false)
	door.done()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case !mounts.Within(fi.Path, sb.spec.Workspace):
		err = fmt.Errorf("%w: only files in the workspace %s leave the machine, and this is %s", ErrDenied, sb.spec.Workspace, fi.Path)
	case fi.Size > maxBytes:
		err = fmt.Errorf("%s, over the limit of %s", units.FormatSize(fi.Size), units.FormatSize(maxBytes))
	}
	if err != nil {
		f.Close()
		return nil, nil, pathErr("send", name, err)
	}
	return f, &fi, nil
}

// Stat describes name as a command of the Sandbox would see it, every
// symlink followed.
func (sb *Sandbox) Stat(name string) (*FileInfo, error) {
	sb = sb.inEffect() // Reload's policy, if there was one
	if err := checkFilePath("name", name); err != nil {
		return nil, err
	}
	door, err := sb.fileSession("stat", name)
	if err != nil {
		return nil, err
	}
	defer door.done()
	p, err := door.abs(name)
	if err == nil {
		err = door.private(path.Clean(p))
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	st, _, err := door.open(p, unix.O_PATH, 0, 0)
	if err == nil && st.Err != 0 {
		err = door.refusal(p, false, st.Err)
	}
	var fi FileInfo
	if err == nil {
		fi, err = door.info(st)
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
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
	door, err := sb.fileSession("readdir", name)
	if err != nil {
		return nil, err
	}
	defer door.done()
	p, err := door.abs(name)
	if err == nil {
		err = door.private(path.Clean(p))
	}
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	var st nsinit.FileStat
	var ents []nsinit.FileEntry
	err = door.call(func(c *nsinit.FileClient) (err error) {
		st, ents, err = c.List(p)
		return err
	})
	if err == nil && st.Err != 0 {
		err = door.refusal(p, false, st.Err)
	}
	var dir FileInfo
	if err == nil {
		dir, err = door.info(st)
	}
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	slices.SortFunc(ents, func(a, b nsinit.FileEntry) int { return strings.Compare(a.Name, b.Name) })
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		p := path.Join(dir.Path, e.Name)
		pl := door.plan.Lookup(p)
		switch {
		case pl.Reach == mounts.Built && e.Err == 0:
			// A listed view's own directory or link: what the
			// sandbox sees, nothing of the host's.
			out = append(out, FileInfo{Path: p, Size: e.Size, Mode: nsinit.FileMode(e.Mode), ModTime: e.ModTime})
		case pl.Reach != mounts.OnHost:
			// Its type only, as the command sees it there (the
			// private /tmp is a directory, a mask the kind of what it
			// masks): nothing of its own is read.
			fi := FileInfo{Path: p, Denied: pl.Reach == mounts.Masked, Private: pl.Reach == mounts.Private}
			if e.Err == 0 {
				fi.Mode = nsinit.FileMode(e.Mode) & fs.ModeType
			}
			out = append(out, fi)
		case e.Err == unix.ENOENT:
			// gone since the listing
		case e.Err != 0:
			// Listed, but not to be looked at (a directory the
			// sandbox may read but not search): its name only.
			out = append(out, FileInfo{Path: p, HomePath: door.homePath(p), HostPath: pl.HostPath})
		default:
			out = append(out, FileInfo{Path: p, HomePath: door.homePath(p), HostPath: pl.HostPath, Size: e.Size, Mode: nsinit.FileMode(e.Mode), ModTime: e.ModTime, Writable: pl.Writable})
		}
	}
	return out, nil
}
