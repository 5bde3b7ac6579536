package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// initCaps are the capabilities the init keeps across its own exec when it
// runs as a non-root uid inside its user namespace (an unprivileged host):
// exactly what building the sandbox needs, dropped again before the command.
var initCaps = []uintptr{
	unix.CAP_SYS_ADMIN,    // mounts, pivot_root, sethostname
	unix.CAP_NET_ADMIN,    // bring up loopback
	unix.CAP_SETPCAP,      // empty the bounding set, securebits
	unix.CAP_DAC_OVERRIDE, // build the new root in tmpfs owned by us
}

// Serve runs the spawn server on the socket inherited as fd 3 until the
// host closes it. initArg0 is the argv[0] of the inits it starts. It returns
// the process exit code.
func Serve(initArg0 string) int {
	// The server stays dumpable: as an unprivileged user it must write its
	// children's /proc/<pid>/uid_map, which a non-dumpable parent's
	// children (inheriting the flag until exec) would make root-owned. It
	// lives outside every sandbox's pid namespace, so no command sees it.
	if err := MarkCloseOnExec(serverFd + 1); err != nil {
		return 2
	}
	unix.CloseOnExec(serverFd)
	s := &server{fd: serverFd, initArg0: initArg0, inits: map[uint64]*os.Process{}}
	s.loop()
	s.killAll()
	return 0
}

type server struct {
	fd       int
	initArg0 string
	wmu      sync.Mutex
	mu       sync.Mutex
	inits    map[uint64]*os.Process
}

func (s *server) send(r reply) {
	b, _ := json.Marshal(r)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = unix.Sendmsg(s.fd, b, nil, nil, 0)
}

func (s *server) loop() {
	buf := make([]byte, maxMsg)
	oob := make([]byte, unix.CmsgSpace((numFds+1)*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(s.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if n == 0 {
			return // the host closed its end: it is gone or done
		}
		fds, _ := parseRights(oob[:oobn])
		var req request
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			closeAll(fds)
			continue
		}
		switch req.Kind {
		case reqSpawn:
			s.spawn(req, fds)
		case reqKill:
			closeAll(fds)
			s.mu.Lock()
			p := s.inits[req.ID]
			s.mu.Unlock()
			if p != nil {
				_ = p.Signal(syscall.Signal(req.Signal))
			}
		default:
			closeAll(fds)
		}
	}
}

func (s *server) spawn(req request, fds []int) {
	want := numFds
	if req.IntoCgroup {
		want++
	}
	if len(fds) != want {
		closeAll(fds)
		s.send(reply{Kind: replyFailed, ID: req.ID, Err: fmt.Sprintf("spawn request with %d fds, want %d", len(fds), want)})
		return
	}
	files := make([]*os.File, want)
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "")
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	sys := &syscall.SysProcAttr{
		Cloneflags: req.Cloneflags,
		Setsid:     true,
		// If this server dies, so does every sandbox it started.
		Pdeathsig: syscall.SIGKILL,
	}
	if req.IntoCgroup {
		sys.UseCgroupFD, sys.CgroupFD = true, fds[numFds]
	}
	if req.Cloneflags&unix.CLONE_NEWUSER != 0 {
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: req.UID, HostID: req.UID, Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: req.GID, HostID: req.GID, Size: 1}}
		if req.UID != 0 {
			// An unprivileged process may map only its own ids and must
			// not allow setgroups.
			sys.GidMappingsEnableSetgroups = false
			sys.AmbientCaps = initCaps
		}
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{s.initArg0},
		Env:         []string{}, // nothing of the host's environment, not even in /proc/1/environ
		Stdin:       files[0],
		Stdout:      files[1],
		Stderr:      files[2],
		ExtraFiles:  files[3:numFds],
		SysProcAttr: sys,
	}
	if err := cmd.Start(); err != nil {
		r := reply{Kind: replyFailed, ID: req.ID, Err: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		}
		s.send(r)
		return
	}
	s.mu.Lock()
	s.inits[req.ID] = cmd.Process
	s.mu.Unlock()
	s.send(reply{Kind: replyStarted, ID: req.ID, Pid: cmd.Process.Pid})
	go func() {
		_ = cmd.Wait()
		s.mu.Lock()
		delete(s.inits, req.ID)
		s.mu.Unlock()
		var ws uint32
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			ws = uint32(st)
		}
		// When the init (pid 1 of its namespace) has been reaped, the
		// kernel has already killed and reaped everything else in it.
		s.send(reply{Kind: replyExited, ID: req.ID, WaitStatus: ws})
	}()
}

func (s *server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.inits {
		_ = p.Kill()
	}
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, r...)
		}
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
