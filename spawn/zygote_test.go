//go:build linux

package spawn

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/nsinit"
)

// zygote starts the stage by hand on a socket the test holds.
func zygote(t *testing.T) (*exec.Cmd, *os.File) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := os.NewFile(uintptr(pair[1]), "zygote")
	defer end.Close()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{nsinit.ZygoteArg0}, Env: []string{}, ExtraFiles: []*os.File{end}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	host := os.NewFile(uintptr(pair[0]), "host")
	t.Cleanup(func() {
		host.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, host
}

func request(t *testing.T, fd int, r nsinit.Record, fds ...int) {
	t.Helper()
	b, err := nsinit.EncodeWire(r)
	if err != nil {
		t.Fatal(err)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, b, oob, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// nextReply reads one reply, failing the test after 10 s without one.
func nextReply(t *testing.T, fd int) nsinit.Record {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 10000); err != nil || n == 0 {
		t.Fatalf("no reply from the zygote (%v)", err)
	}
	buf := make([]byte, nsinit.ZygMaxMessage)
	n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
	if err != nil || n == 0 {
		t.Fatalf("zygote socket: %d bytes, %v", n, err)
	}
	recs, err := nsinit.DecodeWire(buf[:n])
	if err != nil || len(recs) != 1 {
		t.Fatalf("reply %q: %v", buf[:n], err)
	}
	return recs[0]
}

// TestZygote drives the C stage through its protocol and checks, from the
// host's side, what it is and what it did: one thread and a few MiB (no Go
// runtime started in it), malformed requests refused with the step named
// and without taking it down, an init cloned as its child and reaped, and
// its end when the host closes the socket.
func TestZygote(t *testing.T) {
	cmd, host := zygote(t)
	fd := int(host.Fd())
	zpid := cmd.Process.Pid

	// Garbage first: no reply, and the zygote keeps serving.
	if err := unix.Sendmsg(fd, []byte("not a wire message"), nil, nil, 0); err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	n := int(null.Fd())
	for _, tt := range []struct {
		name string
		rec  nsinit.Record
		fds  []int
	}{
		{"two fds", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{1, 0, 0, 0, 0}}, []int{n, n}},
		{"CLONE_VM", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{2, unix.CLONE_VM, 0, 0, 0}}, []int{n, n, n, n, n}},
		{"unknown option", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{3, 0, 0, 0, 4}}, []int{n, n, n, n, n}},
		{"uid over 32 bits", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{4, 0, 1 << 32, 0, 0}}, []int{n, n, n, n, n}},
		{"four ints", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{5, 0, 0, 0}}, []int{n, n, n, n, n}},
		{"six ints", nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{6, 0, 0, 0, 0, 0}}, []int{n, n, n, n, n}},
	} {
		request(t, fd, tt.rec, tt.fds...)
		rep := nextReply(t, fd)
		if rep.Kind != nsinit.ZygFailed || rep.Int(0) != tt.rec.Int(0) || syscall.Errno(rep.Int(1)) != unix.EINVAL || string(rep.Blob(0)) != "check the request" {
			t.Errorf("%s: reply %+v, want ZygFailed EINVAL \"check the request\" for id %d", tt.name, rep, tt.rec.Int(0))
		}
	}

	// Refused prepares keep no spare: they have no reply, so a refused
	// spawn after them says they were read.
	uid, gid := uint64(os.Getuid()), uint64(os.Getgid())
	for _, ints := range [][]uint64{
		{unix.CLONE_NEWUSER | unix.CLONE_NEWTIME, uid, gid},
		{unix.CLONE_NEWUSER, 1 << 32, gid},
		{unix.CLONE_NEWUSER, uid},
	} {
		request(t, fd, nsinit.Record{Kind: nsinit.ZygPrepare, Ints: ints})
	}
	request(t, fd, nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{8, 0, 0, 0, 0}}, n)
	if rep := nextReply(t, fd); rep.Kind != nsinit.ZygFailed || rep.Int(0) != 8 {
		t.Errorf("spawn after the prepares: %+v, want ZygFailed for id 8", rep)
	}
	time.Sleep(50 * time.Millisecond)
	if p := spareOf1(zpid); p != 0 {
		t.Errorf("host: spare %d kept after refused prepares", p)
	}

	status, err := os.ReadFile("/proc/" + strconv.Itoa(zpid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(status, []byte("\nThreads:\t1\n")) {
		t.Errorf("zygote is not single-threaded:\n%s", status)
	}

	// A real init (init.c), in no new namespace. It waits for its config
	// on the control socket while the test looks at it, then fails once
	// the test closes its end, and says so on its status pipe.
	ctl, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostCtl := os.NewFile(uintptr(ctl[0]), "control")
	defer hostCtl.Close()
	defer unix.Close(ctl[1])
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	request(t, fd, nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{7, 0, uint64(os.Getuid()), uint64(os.Getgid()), 0}}, n, n, n, ctl[1], int(sw.Fd()))
	sw.Close()
	rep := nextReply(t, fd)
	if rep.Kind != nsinit.ZygStarted || rep.Int(0) != 7 {
		t.Fatalf("spawn: %+v (%s)", rep, rep.Blob(0))
	}
	ipid := int(rep.Int(1))
	if ppid := parentOf(ipid); ppid != zpid {
		t.Errorf("init %d has parent %d, not the zygote %d", ipid, ppid, zpid)
	}
	// No exec: the zygote's clone, named by the init's first steps, and
	// as single-threaded as the zygote.
	var comm []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if comm, _ = os.ReadFile("/proc/" + strconv.Itoa(ipid) + "/comm"); string(comm) == "hutch-init\n" {
			break
		}
	}
	if string(comm) != "hutch-init\n" {
		t.Errorf("init's comm is %q, want hutch-init", comm)
	}
	if status, err := os.ReadFile("/proc/" + strconv.Itoa(ipid) + "/status"); err != nil || !bytes.Contains(status, []byte("\nThreads:\t1\n")) {
		t.Errorf("init is not single-threaded (%v):\n%s", err, status)
	}
	hostCtl.Close()
	ev, err := nsinit.ReadEvent(sr, nil)
	if err != nil || ev.Kind != nsinit.EventError || ev.Error == nil || ev.Error.Op != "read config" {
		t.Errorf("init's status pipe: %+v (%v), want its config error", ev, err)
	}
	rep = nextReply(t, fd)
	if rep.Kind != nsinit.ZygExited || rep.Int(0) != 7 || syscall.WaitStatus(rep.Int(1)).ExitStatus() != 1 {
		t.Errorf("reap: %+v, want ZygExited id 7 with exit status 1", rep)
	}

	// The host closes its end: the zygote exits.
	host.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("zygote exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("zygote still running 10 s after its socket closed")
	}
}

// parentOf returns pid's parent from /proc/pid/stat, -1 when it is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestPrestart: Prestart starts a server with no init asked of it, once
// however often it is called, and the Spawn that follows uses that
// server rather than starting its own.
func TestPrestart(t *testing.T) {
	c := &Client{}
	first, second := c.prestart(), c.prestart()
	for _, done := range []<-chan struct{}{first, second} {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a Prestart not done after 10 s")
		}
	}
	pid := c.ServerPid()
	if pid == 0 {
		t.Fatal("no server after Prestart")
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// Start returns once the exec is past its point of no return, which
	// is before the new program's arguments are in place: until then its
	// cmdline reads empty (found so, 2 runs in 30).
	var cmdline []byte
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cmdline, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || len(cmdline) > 0 {
			break
		}
	}
	if err != nil || !strings.HasPrefix(string(cmdline), nsinit.ZygoteArg0+"\x00") {
		t.Fatalf("host: pid %d is not a spawn server: %q, %v", pid, cmdline, err)
	}
	if n := c.ServersStarted(); n != 1 {
		t.Errorf("servers started by two Prestarts: %d, want 1", n)
	}
	if n := c.Spawned(); n != 0 {
		t.Errorf("Prestart counted %d spawns", n)
	}
	// No namespaces: the init waits for a plan on its control socket.
	in, end := spawnWaiting(t, c, 0)
	if ppid := parentOf(in.Pid); ppid != pid {
		t.Errorf("host: the init's parent is %d, want the prestarted server %d", ppid, pid)
	}
	end()
	if n := c.ServersStarted(); n != 1 {
		t.Errorf("servers started after a Spawn: %d, want 1", n)
	}
}

// spareOf returns the spare the server pid keeps, seen on the host (its
// child named hutch-spare), waiting up to 10 s for one other than not; 0
// if none came.
func spareOf(t *testing.T, pid, not int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p := spareOf1(pid); p != 0 && p != not {
			return p
		}
	}
	return 0
}

// spareOf1 is the spare the server pid keeps now, or 0.
func spareOf1(pid int) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	for _, s := range strings.Fields(string(b)) {
		comm, _ := os.ReadFile("/proc/" + s + "/comm")
		if strings.TrimSpace(string(comm)) == "hutch-spare" {
			p, _ := strconv.Atoi(s)
			return p
		}
	}
	return 0
}

// spawnWaiting spawns an init with flags that waits for its plan until
// end is called or the test ends (its control socket closes then).
func spawnWaiting(t *testing.T, c *Client, flags uintptr) (in *Init, end func()) {
	t.Helper()
	return spawnWaitingIn(t, c, flags, nil)
}

// spawnWaitingIn is spawnWaiting into the cgroup v2 directory cgroup,
// unless that is nil.
func spawnWaitingIn(t *testing.T, c *Client, flags uintptr, cgroup *os.File) (in *Init, end func()) {
	t.Helper()
	in, control, status := startWaiting(t, c.Spawn, flags, cgroup)
	var once sync.Once
	end = func() {
		once.Do(func() {
			control.Close()
			status.Close()
			in.Wait()
		})
	}
	t.Cleanup(end)
	return in, end
}

// startWaiting starts an init through start (a Client's Spawn, or Direct)
// with flags, into cgroup unless that is nil, its stdio /dev/null. It
// returns the init with the host's ends of its control socket and status
// pipe: the init waits for its config until the control socket closes.
func startWaiting(t *testing.T, start func(Request) (*Init, error), flags uintptr, cgroup *os.File) (*Init, *os.File, *os.File) {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	control := os.NewFile(uintptr(pair[1]), "control")
	defer control.Close()
	host := os.NewFile(uintptr(pair[0]), "host control")
	in, err := start(Request{Cloneflags: flags, UID: os.Getuid(), GID: os.Getgid(), Stdin: null, Stdout: null, Stderr: null, Control: control, Status: w, Cgroup: cgroup})
	if err != nil {
		r.Close()
		host.Close()
		t.Fatal(err)
	}
	return in, host, r
}

// TestSpare: after Prepare the server keeps an init cloned ahead, seen on
// the host as its child; a Spawn of that kind is that process, and a new
// spare follows once an init ends (not while the one that took it runs);
// a Spawn of another kind clones its own and leaves the spare; a spare
// killed from outside is not handed out, and is replaced once an init
// ends; a change of the host's mounts discards the spare (the next comes
// when an init ends), and the next init's mount namespace (read on the
// host) holds the new mount.
func TestSpare(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	c := &Client{}
	server, _ := prepareServer(t, c, Ahead{Cloneflags: allNS, UID: os.Getuid(), GID: os.Getgid()})
	spare := spareOf(t, server, 0)
	if spare == 0 {
		t.Fatal("host: no spare after Prepare")
	}
	// Nothing of the zygote's in the waiting spare: its stdio (/dev/null),
	// its socket and its error pipe, and not the zygote's socket with the
	// host, whose last holder must be the zygote.
	hostSock, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", server, nsinit.ZygoteFd))
	if err != nil {
		t.Fatal(err)
	}
	// The spare closes what it inherited once it runs: it is looked at
	// until it has, for up to 5 s.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", spare))
		var held []string
		hostFd := ""
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", spare, fd.Name()))
			if l == hostSock {
				hostFd = fd.Name()
			}
			held = append(held, fd.Name()+" "+l)
		}
		if hostFd == "" && len(held) <= 5 {
			break
		}
		if time.Now().After(deadline) {
			if hostFd != "" {
				t.Fatalf("host: the spare holds the zygote's socket with the host (fd %s)", hostFd)
			}
			t.Fatalf("host: the spare holds %d fds: %v", len(held), held)
		}
	}

	in, end := spawnWaiting(t, c, allNS)
	if in.Pid != spare {
		t.Errorf("host: the init is %d, want the spare %d", in.Pid, spare)
	}
	time.Sleep(50 * time.Millisecond)
	if p := spareOf1(server); p != 0 {
		t.Errorf("host: spare %d cloned while the init that took the last one runs", p)
	}
	end()
	next := spareOf(t, server, spare)
	if next == 0 {
		t.Fatal("host: no new spare after an init ended")
	}

	other, _ := spawnWaiting(t, c, unix.CLONE_NEWUSER|unix.CLONE_NEWNS)
	if other.Pid == next {
		t.Error("host: a Spawn of another kind took the spare")
	}
	// (A mount made on the host meanwhile, by another test, may have
	// replaced it: a spare is what must be there.)
	if next = spareOf(t, server, 0); next == 0 {
		t.Fatal("host: no spare after a Spawn of another kind")
	}

	if err := syscall.Kill(next, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); parentOf(next) == server; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("host: the killed spare is not reaped")
		}
	}
	afterKill, end := spawnWaiting(t, c, allNS)
	if afterKill.Pid == next {
		t.Error("host: a Spawn was handed the killed spare")
	}
	end()
	fresh := spareOf(t, server, next)
	if fresh == 0 {
		t.Fatal("host: no spare after an init ended")
	}

	if os.Getuid() != 0 {
		return // the mount below needs root
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	// The stale spare goes, and none is made until an init ends.
	for deadline := time.Now().Add(10 * time.Second); parentOf(fresh) == server; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("host: the stale spare is still the server's child 10 s after the host's mounts changed")
		}
	}
	time.Sleep(50 * time.Millisecond)
	if p := spareOf1(server); p != 0 {
		t.Errorf("host: spare %d cloned at the mount change, before any init ended", p)
	}
	in, end = spawnWaiting(t, c, allNS)
	mi, err := os.ReadFile("/proc/" + strconv.Itoa(in.Pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mi), " "+dir+" ") {
		t.Errorf("host: the init's mounts lack %s, mounted before its spawn", dir)
	}
	end()
	if spare = spareOf(t, server, 0); spare == 0 {
		t.Fatal("host: no spare after an init ended")
	}

	// Taken into a cgroup v2 directory (as CLONE_INTO_CGROUP would put a
	// clone): the host sees that very process in the group.
	if v2 := cgroup2Mount(); v2 != "" {
		dir := filepath.Join(v2, fmt.Sprintf("hutch-spare-test-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		cg, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		in, end = spawnWaitingIn(t, c, allNS, cg)
		cg.Close()
		if in.Pid != spare {
			t.Errorf("host: the init into a cgroup is %d, want the spare %d", in.Pid, spare)
		}
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(in.Pid)) {
			t.Errorf("host: init %d not in %s (cgroup.procs: %q)", in.Pid, dir, procs)
		}
		end()
		if spare = spareOf(t, server, spare); spare == 0 {
			t.Fatal("host: no spare after an init ended")
		}
	}
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Dead with the zygote (a zombie until the host's reaper gets it).
	if !waitExited(spare, 5*time.Second) {
		t.Fatalf("host: spare %d alive 5 s after its zygote's SIGKILL", spare)
	}
}

// allNS are the clone flags of a sandbox init with every namespace.
const allNS = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// prepareServer has c Prepare a and returns its server, once told, which
// the test's end kills, and the Prepare's withdraw.
func prepareServer(t *testing.T, c *Client, a Ahead) (server int, withdraw func()) {
	t.Helper()
	ready, withdraw := c.prepare(a)
	<-ready
	if server = c.ServerPid(); server == 0 {
		t.Fatal("no server after Prepare")
	}
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL) })
	return server, withdraw
}

// waitExited waits up to d until pid has exited, as the host sees it:
// gone from /proc, or a zombie not yet reaped.
func waitExited(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return true
		}
	}
	return false
}

// TestPrepareWithdrawn: the latest Prepare not withdrawn is the kind the
// server keeps. Withdrawing the latest goes back to the one before it
// (its spare is the next Spawn of that kind); withdrawing the last leaves
// the server no spare, and an init's end clones none (each seen on the
// host as the server's children). A withdrawal starts no server.
func TestPrepareWithdrawn(t *testing.T) {
	const fewer = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	// A withdrawal after the server died starts no other.
	idle := &Client{}
	idleServer, idleWithdraw := prepareServer(t, idle, Ahead{Cloneflags: allNS, UID: os.Getuid(), GID: os.Getgid()})
	if err := syscall.Kill(idleServer, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitExited(idleServer, 10*time.Second) {
		t.Fatal("host: the server lives 10 s after its SIGKILL")
	}
	idleWithdraw()
	if n := idle.ServersStarted(); n != 1 {
		t.Errorf("servers started: %d after a withdrawal once the server died, want 1", n)
	}
	if idle.Prepared() != (Ahead{}) {
		t.Errorf("Prepared after the only Prepare was withdrawn: %+v, want none", idle.Prepared())
	}

	c := &Client{}
	a := Ahead{Cloneflags: allNS, UID: os.Getuid(), GID: os.Getgid()}
	b := Ahead{Cloneflags: fewer, UID: os.Getuid(), GID: os.Getgid()}
	server, withdrawA := prepareServer(t, c, a)
	spareA := spareOf(t, server, 0)
	if spareA == 0 {
		t.Fatal("host: no spare after Prepare")
	}
	readyB, withdrawB := c.prepare(b)
	<-readyB
	if got := c.Prepared(); got != b {
		t.Errorf("Prepared: %+v, want the latest, %+v", got, b)
	}
	spareB := spareOf(t, server, spareA)
	if spareB == 0 {
		t.Fatal("host: no spare of the latest Prepare's kind")
	}
	withdrawB()
	withdrawB() // a second call changes nothing
	if got := c.Prepared(); got != a {
		t.Errorf("Prepared after the latest was withdrawn: %+v, want the one before, %+v", got, a)
	}
	spareA = spareOf(t, server, spareB)
	if spareA == 0 {
		t.Fatal("host: no spare after the latest Prepare was withdrawn")
	}
	in, end := spawnWaiting(t, c, allNS)
	if in.Pid != spareA {
		t.Errorf("host: the init is %d, want the spare %d of the Prepare left", in.Pid, spareA)
	}
	withdrawA()
	end()
	// The init's end is reaped, and no spare follows it.
	for deadline := time.Now().Add(10 * time.Second); parentOf(in.Pid) == server; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("host: the init is not reaped")
		}
	}
	time.Sleep(50 * time.Millisecond)
	if p := spareOf1(server); p != 0 {
		t.Errorf("host: spare %d cloned after every Prepare was withdrawn", p)
	}
	if c.Prepared() != (Ahead{}) {
		t.Errorf("Prepared: %+v, want none", c.Prepared())
	}
}

// cgroup2Mount returns a cgroup v2 hierarchy this test may make a group
// in (root only), or "".
func cgroup2Mount() string {
	if os.Getuid() != 0 {
		return ""
	}
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return p
		}
	}
	return ""
}
