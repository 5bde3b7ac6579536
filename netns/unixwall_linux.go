package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The unix wall: a read-only view does not stop connect(2) on a unix socket
// file, a network namespace does not scope pathname sockets, and a list of
// the host's sockets taken at start misses every socket bound, renamed or
// re-bound later and every socket of another network namespace. So on a
// kernel whose Landlock cannot guard pathname sockets (before ABI 9), every
// connect(2) of the command is handed by seccomp (seccomp.UnixWall) to the
// host (the init hands it the filter's listener), where UnixWall answers it:
//
//   - the address is copied out of the command's memory once, and every
//     decision is made on that copy;
//   - the command's socket is taken with pidfd_getfd(2): the same open file,
//     so swapping the fd number afterwards changes nothing;
//   - a socket that is not AF_UNIX, or an abstract or unnamed address, is
//     connected as given: its family cannot reach a file. But an abstract
//     address in the host's own network namespace (a sandbox sharing it)
//     is refused (EPERM, as Landlock's abstract-socket scope answers): the
//     host's X11, D-Bus and container shims listen there, and the scope,
//     which judges the task that connects, does not judge the host
//     connecting for the command. (Letting the command's task connect
//     itself, SECCOMP_USER_NOTIF_FLAG_CONTINUE, would let it swap the
//     address or the fd for a pathname socket between the check and the
//     kernel's second reading: the wall would be gone.)
//   - a pathname is resolved beneath one of the allowed trees (the
//     workspace, the writable paths, the private /tmp and /dev/shm) with
//     openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS) to an O_PATH fd that
//     pins the inode; anything else is EACCES, as Landlock answers;
//   - the host connects the command's socket to that pinned inode through
//     /proc/self/fd/N, so nothing can be swapped between check and use.
//
// A host socket can only be inside an allowed tree if the host put it
// there: the command cannot move or link one in (other mounts: EXDEV).

// Seccomp user-notification structures (linux/seccomp.h).
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// maxSockaddr is sizeof(struct sockaddr_storage): the kernel refuses a
// longer address with EINVAL.
const maxSockaddr = 128

// UnixWall answers the connect(2) calls of a sandbox's command.
type UnixWall struct {
	listener int
	roots    []WallRoot
	// selfFd is "/proc/self/fd", or "" when the view has no /proc (then
	// pathname sockets cannot be reached at all: fail closed).
	selfFd string
	uid    uint32
	gids   []uint32
	// answers are the calls being answered; the listener is closed only
	// once they are all done.
	answers sync.WaitGroup
	// file holds the listener once serve waits on it in the poller.
	file *os.File
	// hostNet: the sandbox shares the host's network namespace, whose
	// abstract sockets are the host's.
	hostNet bool
	judge   func(Call) (Answer, bool)
	refused func(address string, errno unix.Errno)
}

// A Call is a system call a sandbox's filter handed to the host: the
// calling thread by host pid, and the call as the filter judged it
// (struct seccomp_data).
type Call struct {
	Pid                uint32
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// An Answer is how the host answers a Call: it fails with Errno, or
// returns 0; or, with Continue, the kernel runs it as the caller made it
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE), for a call the kernel judges by
// itself and the host only watches.
type Answer struct {
	Errno    unix.Errno
	Continue bool
}

// WallOptions are how a unix wall's listener is served besides its trees.
type WallOptions struct {
	// HostNet says the sandbox shares the host's network namespace, whose
	// abstract sockets are the host's.
	HostNet bool
	// Judge, if set, sees every call first: where the listener's filter
	// notifies more than connect (the profile's refusals, see
	// seccomp.Notifying), it answers those (answered true); the wall
	// answers what it leaves.
	Judge func(Call) (a Answer, answered bool)
	// Refused, if set, is told each connect the wall refuses: the socket's
	// address as the command gave it (a path, or "@name" for an abstract
	// one) and the errno the command gets; and each connect to an
	// internet address the sandbox's network has no route to (host:port,
	// ENETUNREACH).
	Refused func(address string, errno unix.Errno)
}

// WallRoot is one tree under which the wall lets pathname sockets be
// reached: its absolute path in the sandbox's view and an O_PATH fd of it,
// opened in that view.
type WallRoot struct {
	Path string
	Fd   int
}

// ServeUnixWall answers the notifications of listener (from a filter built
// from seccomp.UnixWall) until the sandbox's last process is gone, then
// closes listener and the roots' fds, which it owns from this call on.
// It runs in the host, which the notifications name the callers to by host
// pid; the roots come from the sandbox (see nsinit.HandoffWallRoot).
// hostNet says the sandbox shares the host's network namespace.
func ServeUnixWall(listener int, roots []WallRoot, opts WallOptions) (*UnixWall, error) {
	w, err := newUnixWall(listener, roots)
	if err != nil {
		return nil, err
	}
	w.hostNet, w.judge, w.refused = opts.HostNet, opts.Judge, opts.Refused
	go func() {
		w.serve()
		w.answers.Wait()
		w.close()
	}()
	return w, nil
}

func newUnixWall(listener int, roots []WallRoot) (*UnixWall, error) {
	w := &UnixWall{listener: listener, roots: roots, uid: uint32(os.Getuid()), gids: []uint32{uint32(os.Getgid())}}
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			w.gids = append(w.gids, uint32(g))
		}
	}
	for _, r := range roots {
		if !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path {
			w.close()
			return nil, fmt.Errorf("unix wall: allowed tree %q is not absolute and clean", r.Path)
		}
	}
	// The deepest tree first: its resolution is the strictest.
	slices.SortFunc(w.roots, func(a, b WallRoot) int { return len(b.Path) - len(a.Path) })
	if fi, err := os.Stat("/proc/self/fd"); err == nil && fi.IsDir() {
		w.selfFd = "/proc/self/fd"
	}
	return w, nil
}

func (w *UnixWall) close() {
	for _, r := range w.roots {
		unix.Close(r.Fd)
	}
	switch {
	case w.file != nil:
		w.file.Close() // the listener's own fd
	case w.listener >= 0:
		unix.Close(w.listener)
	}
}

// serve receives notifications until the filter has no task left. A
// blocking receive would never return once the sandbox is gone (nothing
// wakes it), so the listener waits in the runtime's poller, which reports
// the orphaned filter as a hang-up (5.8+), and no thread is held while the
// sandbox lives.
func (w *UnixWall) serve() {
	// The listener waits in the poller through w.file, which w.close
	// closes only after the last answer is sent: no ioctl of an answer
	// can reach a reused fd number (another sandbox's wall).
	if err := unix.SetNonblock(w.listener, true); err != nil {
		return
	}
	w.file = os.NewFile(uintptr(w.listener), "seccomp-notify")
	rc, err := w.file.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n seccompNotif
		var e unix.Errno
		hup := false
		err := rc.Read(func(fd uintptr) bool {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for tries := 0; ; tries++ {
				if _, err := unix.Poll(p, 0); err != nil {
					return false // nothing yet: wait in the poller
				}
				switch pollVerdict(p[0].Revents) {
				case pollNothing:
					return false // wait in the poller
				case pollAgain:
					if tries < maxPollAgain {
						continue
					}
					fallthrough // an error that stays: the listener is no use
				case pollHangUp:
					hup = true
					return true
				}
				_, _, e = unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
				return true
			}
		})
		switch {
		case err != nil || hup:
			return
		case e == 0:
			if w.judge != nil {
				if a, ok := w.judge(Call{Pid: n.Pid, Nr: n.Data.Nr, Arch: n.Data.Arch, InstructionPointer: n.Data.InstructionPointer, Args: n.Data.Args}); ok {
					w.reply(n.ID, a)
					continue
				}
			}
			if n.Data.Nr != unix.SYS_CONNECT {
				// Nothing else is the wall's: refused, never let through.
				w.send(n.ID, unix.EPERM)
				continue
			}
			// A connect may block (a full backlog, a slow peer): one
			// goroutine per call, so one stuck call holds up no other.
			w.answers.Add(1)
			go func() {
				defer w.answers.Done()
				w.answer(n)
			}()
		case e == unix.EINTR || e == unix.ENOENT:
			// ENOENT: the caller went away before its call was read.
		default:
			return
		}
	}
}

// What a poll of the listener says to do.
type pollAction int

const (
	pollNothing pollAction = iota // no notification yet: wait
	pollReceive                   // a notification waits: receive it
	pollHangUp                    // no task is left under the filter
	pollAgain                     // a spurious error: poll again
)

// maxPollAgain bounds pollAgain's polls in a row: an error that stays is
// taken as the filter's end.
const maxPollAgain = 1000

// pollVerdict reads a poll of the listener. POLLERR alone is not an
// end: the kernel reports it when a signal interrupts the poll while it
// waits for the filter's notify_lock (seccomp_notify_poll's
// mutex_lock_interruptible), and the Go runtime signals its threads
// (SIGURG) to preempt them. Taken as the end, it stopped a sandbox's
// listener while the command ran: its later refused calls got ENOSYS and
// went uncounted (seen once, under QEMU, 9,527 of 20,000).
func pollVerdict(revents int16) pollAction {
	switch {
	case revents&unix.POLLIN != 0:
		return pollReceive
	case revents&unix.POLLHUP != 0:
		return pollHangUp
	case revents&(unix.POLLERR|unix.POLLNVAL) != 0:
		return pollAgain
	}
	return pollNothing
}

func (w *UnixWall) answer(n seccompNotif) {
	w.send(n.ID, w.connect(n))
}

// send answers notification id: the call fails with errno, or returns 0.
func (w *UnixWall) send(id uint64, errno unix.Errno) {
	w.reply(id, Answer{Errno: errno})
}

// reply answers notification id with a.
func (w *UnixWall) reply(id uint64, a Answer) {
	resp := seccompNotifResp{ID: id}
	switch {
	case a.Continue:
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	case a.Errno != 0:
		resp.Error = -int32(a.Errno)
	}
	// ENOENT: the caller was interrupted or died; nothing to answer.
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(w.listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// refuse tells Refused of a connect the wall refuses, and returns errno.
func (w *UnixWall) refuse(address string, errno unix.Errno) unix.Errno {
	if w.refused != nil {
		w.refused(address, errno)
	}
	return errno
}

// valid reports whether notification id still waits for its answer: the
// pid it names is still the caller, not a reused number.
func (w *UnixWall) valid(id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(w.listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// connect performs the caller's connect(fd, addr, len) and returns its
// errno.
func (w *UnixWall) connect(n seccompNotif) unix.Errno {
	tid := int(n.Pid)
	fd := int(int32(n.Data.Args[0]))
	addrLen := int(int32(n.Data.Args[2]))
	if addrLen < 0 || addrLen > maxSockaddr {
		return unix.EINVAL
	}
	pidfd, err := openPidfd(tid)
	if err != nil || !w.valid(n.ID) {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		return unix.EACCES
	}
	defer unix.Close(pidfd)
	// One copy of the address; the caller's memory is never read again.
	addr := make([]byte, addrLen)
	if addrLen > 0 {
		local := []unix.Iovec{{Base: &addr[0], Len: uint64(addrLen)}}
		remote := []unix.RemoteIovec{{Base: uintptr(n.Data.Args[1]), Len: addrLen}}
		if got, err := unix.ProcessVMReadv(tid, local, remote, 0); err != nil || got != addrLen {
			return unix.EFAULT
		}
	}
	if !w.valid(n.ID) {
		return unix.EACCES
	}
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return unix.EBADF
		}
		return unix.EACCES
	}
	defer unix.Close(sock)
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return errnoOf(err)
	}
	if domain != unix.AF_UNIX {
		errno := rawConnect(sock, addr)
		if errno == unix.ENETUNREACH {
			// No route: the sandbox's network has only loopback.
			if a := inetAddress(addr); a != "" {
				w.refuse(a, errno)
			}
		}
		return errno
	}
	if len(addr) <= 2 || uint16(addr[0])|uint16(addr[1])<<8 != unix.AF_UNIX {
		return unix.EINVAL
	}
	path := addr[2:]
	if path[0] == 0 {
		if w.hostNet {
			// The host's abstract sockets.
			return w.refuse("@"+string(bytes.TrimRight(path[1:], "\x00")), unix.EPERM)
		}
		// Abstract: scoped by the sandbox's own network namespace.
		return rawConnect(sock, addr)
	}
	if i := slices.Index(path, 0); i >= 0 {
		path = path[:i]
	}
	target, errno := w.resolve(tid, string(path))
	if errno == unix.EACCES && socketThere(tid, string(path)) {
		return w.refuse(string(path), errno)
	}
	if errno != 0 {
		return errno
	}
	defer unix.Close(target)
	return rawConnect(sock, sockaddrUnix(w.selfFd+"/"+strconv.Itoa(target)))
}

// socketThere reports whether a socket file is at path, as the caller at
// tid names it, in its own view: a refusal worth reporting. A connect to
// nothing there (the C library's try of nscd's socket, in the hidden
// /run, before it reads files itself) is not. The host's own files are
// never looked at: the report can reach the command (an explained
// summary on its stderr), which must not learn through it what its view
// hides. It only decides what is reported.
func socketThere(tid int, path string) bool {
	if !filepath.IsAbs(path) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(tid) + "/cwd")
		if err != nil {
			return false
		}
		path = filepath.Join(cwd, path)
	}
	// Resolved in the caller's root: its own absolute symlinks (/var/run
	// to /run) lead within its view, never to the host's.
	root, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
}

// resolve opens the socket file at path, as the caller at tid names it, if
// it lies beneath an allowed tree.
func (w *UnixWall) resolve(tid int, path string) (int, unix.Errno) {
	if w.selfFd == "" {
		return -1, unix.EACCES
	}
	abs := path
	if !filepath.IsAbs(path) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(tid) + "/cwd")
		if err != nil || !filepath.IsAbs(cwd) {
			return -1, unix.EACCES
		}
		abs = filepath.Join(cwd, path)
	}
	abs = filepath.Clean(abs)
	for _, r := range w.roots {
		rel, ok := strings.CutPrefix(abs, r.Path+"/")
		if !ok {
			continue
		}
		fd, err := unix.Openat2(r.Fd, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			if errors.Is(err, unix.EXDEV) {
				return -1, unix.EACCES // a symlink out of the tree
			}
			return -1, errnoOf(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			unix.Close(fd)
			return -1, unix.ECONNREFUSED // what connect says of a non-socket
		}
		if !w.mayWrite(&st) {
			unix.Close(fd)
			return -1, unix.EACCES
		}
		return fd, 0
	}
	return -1, unix.EACCES
}

// mayWrite is the kernel's write check on a socket file for the command's
// credentials (the host's ids, which the command runs as, without any
// capability): the host connects
// on the command's behalf and must not lend it CAP_DAC_OVERRIDE.
func (w *UnixWall) mayWrite(st *unix.Stat_t) bool {
	switch {
	case st.Uid == w.uid:
		return st.Mode&0o200 != 0
	case slices.Contains(w.gids, st.Gid):
		return st.Mode&0o020 != 0
	}
	return st.Mode&0o002 != 0
}

// openPidfd returns a pidfd for the process of thread tid: a thread pidfd
// where the kernel has them (6.9), else one for its thread group, found in
// /proc.
func openPidfd(tid int) (int, error) {
	if fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD); err == nil {
		return fd, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1, err
			}
			return unix.PidfdOpen(tgid, 0)
		}
	}
	return -1, fmt.Errorf("no Tgid for thread %d", tid)
}

// inetAddress is a struct sockaddr_in or sockaddr_in6 as host:port, or ""
// for anything else.
func inetAddress(addr []byte) string {
	if len(addr) < 4 {
		return ""
	}
	port := int(addr[2])<<8 | int(addr[3])
	switch family := uint16(addr[0]) | uint16(addr[1])<<8; {
	case family == unix.AF_INET && len(addr) >= 8:
		return net.JoinHostPort(net.IP(addr[4:8]).String(), strconv.Itoa(port))
	case family == unix.AF_INET6 && len(addr) >= 24:
		return net.JoinHostPort(net.IP(addr[8:24]).String(), strconv.Itoa(port))
	}
	return ""
}

// sockaddrUnix is a struct sockaddr_un for path.
func sockaddrUnix(path string) []byte {
	b := make([]byte, 2, 2+len(path)+1)
	b[0], b[1] = byte(unix.AF_UNIX), byte(unix.AF_UNIX>>8)
	return append(append(b, path...), 0)
}

// rawConnect connects sock to the raw address bytes, as the caller gave
// them (or as rebuilt by resolve).
func rawConnect(sock int, addr []byte) unix.Errno {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(p), uintptr(len(addr)))
	return e
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EACCES
}
