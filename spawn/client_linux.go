package spawn

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/nsinit"
)

// ErrServerDied is returned for commands in flight when the spawn server
// dies; the next Spawn starts a new server.
var ErrServerDied = errors.New("spawn: server died")

// Request is what the host asks the server to start.
type Request struct {
	// Cloneflags are the namespaces to create (CLONE_NEW*).
	Cloneflags uintptr
	// UID and GID are the host ids, mapped to themselves inside.
	UID, GID int
	// Stdin, Stdout, Stderr, Control and Status are handed to the init as
	// fds 0-4. The caller keeps ownership and closes them after Spawn.
	Stdin, Stdout, Stderr, Control, Status *os.File
	// Cgroup, if set, is a cgroup v2 directory the init is cloned into.
	Cgroup *os.File
}

// Init is a running sandbox init, as the server that cloned it sees it,
// or as the host does when it started the init itself (Direct).
type Init struct {
	c      *Client
	id     uint64
	proc   *os.Process // set for an init Direct started
	Pid    int         // host pid of the init
	done   chan struct{}
	status syscall.WaitStatus
	err    error
}

// Wait blocks until the init has been reaped: from then on nothing of the
// sandbox's pid namespace is alive.
func (p *Init) Wait() (syscall.WaitStatus, error) {
	<-p.done
	return p.status, p.err
}

// Done is closed when the init has been reaped.
func (p *Init) Done() <-chan struct{} { return p.done }

// Signal sends sig to the init. SIGKILL ends the whole sandbox.
func (p *Init) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if p.proc != nil {
		if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	return p.c.send(nsinit.Record{Kind: nsinit.ZygKill, Ints: []uint64{p.id, uint64(sig)}}, nil)
}

// Direct starts a sandbox init as a child of this process, without the
// spawn server: the host binary is run again with argv[0] InitArg0, in
// r's new namespaces, r's ids mapped to themselves, and becomes the init
// before its Go runtime starts (nsinit/zygote.c). It returns once the
// init's process runs.
//
// It costs a clone of this process's page tables (Go cannot vfork into a
// new user namespace) and an exec, where Spawn costs a message to a
// server that may first have to be started: it is for a host that starts
// few inits, or holds a small heap, and would otherwise start a server for
// one. Neither Spawned nor ServersStarted counts it.
func Direct(r Request) (*Init, error) {
	attr := &syscall.SysProcAttr{
		Cloneflags: r.Cloneflags,
		Setsid:     true,
		// Of the thread that starts it, which lives as long as the init
		// (see below). In a new pid namespace Go's check of the parent
		// right after the prctl sees none (getppid is 0 there) and sends
		// the child SIGKILL, which the kernel drops: the child is the
		// namespace's pid 1 and the signal comes from inside.
		Pdeathsig: syscall.SIGKILL,
	}
	if r.Cloneflags&syscall.CLONE_NEWUSER != 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: r.UID, HostID: r.UID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: r.GID, HostID: r.GID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		if r.UID != 0 {
			// The init builds its sandbox with every capability in its
			// user namespace, as a zygote's clone holds them; an exec
			// keeps them for uid 0 only, and as ambient ones for any
			// other. The init clears what is left ambient and
			// inheritable (nsinit/zygote.c).
			caps, err := allCaps()
			if err != nil {
				return nil, err
			}
			attr.AmbientCaps = caps
		}
	}
	if r.Cgroup != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, int(r.Cgroup.Fd())
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{nsinit.InitArg0},
		Env:         []string{},
		Stdin:       r.Stdin,
		Stdout:      r.Stdout,
		Stderr:      r.Stderr,
		ExtraFiles:  []*os.File{r.Control, r.Status},
		SysProcAttr: attr,
	}
	p := &Init{done: make(chan struct{})}
	started := make(chan error, 1)
	// As startServer's: the starting thread must outlive the init, since
	// its exit would send the parent-death signal. The goroutine keeps it
	// until the init is reaped, then lets it exit.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.proc, p.Pid = cmd.Process, cmd.Process.Pid
		started <- nil
		_ = cmd.Wait() // no copying goroutines: r's files are *os.File
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = ws
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("spawn: start init: %w", err)
	}
	runtime.KeepAlive(r)
	return p, nil
}

// allCaps lists the capabilities this kernel knows, 0 to cap_last_cap:
// raising one it does not know fails the start.
var allCaps = sync.OnceValues(func() ([]uintptr, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("spawn: cap_last_cap: %w", err)
	}
	caps := make([]uintptr, last+1)
	for c := range caps {
		caps[c] = uintptr(c)
	}
	return caps, nil
})

// Client is the host's handle on the spawn server. One per process is
// enough (see Default); it is safe for concurrent use.
type Client struct {
	mu      sync.Mutex
	conn    *conn // current server, nil until first use or after it died
	nextID  uint64
	started int    // servers started, for tests and diagnostics
	spawned uint64 // spawn requests sent
	told    Ahead  // the kind the current server was last told to keep

	// amu guards prepared, which Prepare and its withdrawal change
	// without waiting for c.mu (held while a server starts).
	amu      sync.Mutex
	prepared []preparation // the Prepares not withdrawn, oldest first
	nextPrep uint64
}

// A preparation is one Prepare not withdrawn.
type preparation struct {
	id uint64
	Ahead
}

// Ahead is the kind of init a server keeps cloned ahead (see Prepare):
// a Request's Cloneflags, UID and GID.
type Ahead struct {
	Cloneflags uintptr
	UID, GID   int
}

type conn struct {
	fd      int
	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[uint64]*pending
	dead    bool
	pid     int
}

type pending struct {
	started chan nsinit.Record // receives ZygStarted or ZygFailed (Kind 0: the zygote died)
	init    *Init
}

var defaultClient = &Client{}

// Default returns the process-wide client.
func Default() *Client { return defaultClient }

// ServersStarted reports how many spawn servers this client has started.
func (c *Client) ServersStarted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// Spawned reports how many inits this client has asked for.
func (c *Client) Spawned() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spawned
}

// ServerPid returns the current server's pid, or 0 if none runs.
func (c *Client) ServerPid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0
	}
	return c.conn.pid
}

// Spawn asks the server to clone a sandbox init and returns once the init
// process exists (not once the command runs: that the init reports on the
// status pipe).
func (c *Client) Spawn(r Request) (*Init, error) {
	cn, id, err := c.get()
	if err != nil {
		return nil, err
	}
	p := &pending{started: make(chan nsinit.Record, 1), init: &Init{c: c, id: id, done: make(chan struct{})}}
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return nil, ErrServerDied
	}
	cn.pending[id] = p
	cn.mu.Unlock()

	fds := []int{int(r.Stdin.Fd()), int(r.Stdout.Fd()), int(r.Stderr.Fd()), int(r.Control.Fd()), int(r.Status.Fd())}
	var opts uint64
	if r.Cgroup != nil {
		opts |= nsinit.ZygIntoCgroup
		fds = append(fds, int(r.Cgroup.Fd()))
	}
	req := nsinit.Record{Kind: nsinit.ZygSpawn, Ints: []uint64{id, uint64(r.Cloneflags), uint64(r.UID), uint64(r.GID), opts}}
	if err := c.sendOn(cn, req, fds); err != nil {
		cn.drop(id)
		return nil, err
	}
	runtime.KeepAlive(r)
	rep := <-p.started
	if rep.Kind != nsinit.ZygStarted {
		if rep.Kind == 0 {
			return nil, ErrServerDied
		}
		return nil, fmt.Errorf("spawn: start init: %s: %w", rep.Blob(0), syscall.Errno(rep.Int(1)))
	}
	p.init.Pid = int(rep.Int(1))
	return p.init, nil
}

func (c *Client) send(req nsinit.Record, fds []int) error {
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	if cn == nil {
		return ErrServerDied
	}
	return c.sendOn(cn, req, fds)
}

func (c *Client) sendOn(cn *conn, req nsinit.Record, fds []int) error {
	b, err := nsinit.EncodeWire(req)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if cn.fd < 0 {
		return ErrServerDied
	}
	if err := unix.Sendmsg(cn.fd, b, oob, nil, 0); err != nil {
		return fmt.Errorf("spawn: send request: %w", err)
	}
	return nil
}

func (cn *conn) drop(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.mu.Unlock()
}

// get returns a live server connection, starting a server if needed, and a
// fresh request id.
func (c *Client) get() (*conn, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	c.spawned++
	cn, err := c.live()
	if err != nil {
		return nil, 0, err
	}
	return cn, c.nextID, nil
}

// Prestart starts a server in the background if none runs, for a caller
// that will soon Spawn: the server's own start (the loader, the binary's
// constructor) then runs beside the caller's work instead of before its
// first init. A server that fails to start is the next Spawn's error.
func (c *Client) Prestart() { c.prestart() }

// Prepare has the server keep one init of kind a cloned ahead (its
// namespaces made, its ids mapped, waiting), which the next Spawn asking
// the same Cloneflags, UID and GID takes instead of cloning its own: the
// clone is then off the Spawn's path. Once one is taken, the server clones
// the next when an init ends, not beside the sandbox just started. A spare
// whose copy of the host's mounts went stale is discarded, not taken.
//
// The latest Prepare not withdrawn wins, also for servers started later;
// Cloneflags 0 keeps none. withdraw takes this Prepare back (a Sandbox
// does as it closes): the server then keeps a spare of the latest one
// left, or none, and a command's end no longer clones one that nobody
// will take. Like Prestart, Prepare starts a server in the background if
// none runs; withdraw never starts one.
func (c *Client) Prepare(a Ahead) (withdraw func()) {
	_, withdraw = c.prepare(a)
	return withdraw
}

// prepare is Prepare, with a channel closed once the server was told.
func (c *Client) prepare(a Ahead) (<-chan struct{}, func()) {
	c.amu.Lock()
	c.nextPrep++
	id := c.nextPrep
	c.prepared = append(c.prepared, preparation{id, a})
	c.amu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.mu.Lock()
		defer c.mu.Unlock()
		if cn, err := c.live(); err == nil {
			c.tell(cn)
		}
	}()
	var once sync.Once
	return done, func() {
		once.Do(func() {
			c.amu.Lock()
			c.prepared = slices.DeleteFunc(c.prepared, func(p preparation) bool { return p.id == id })
			c.amu.Unlock()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.conn != nil {
				c.tell(c.conn)
			}
		})
	}
}

// Prepared returns the kind of spare the server is to keep: the latest
// Prepare's not withdrawn, or the zero Ahead for none.
func (c *Client) Prepared() Ahead {
	c.amu.Lock()
	defer c.amu.Unlock()
	if len(c.prepared) == 0 {
		return Ahead{}
	}
	return c.prepared[len(c.prepared)-1].Ahead
}

// tell sends cn the kind of spare to keep if it was last told another.
// c.mu is held: what it reads and sends is the latest, in order.
func (c *Client) tell(cn *conn) {
	a := c.Prepared()
	if a == c.told {
		return
	}
	if c.sendOn(cn, prepareRecord(a), nil) == nil {
		c.told = a
	}
}

func prepareRecord(a Ahead) nsinit.Record {
	return nsinit.Record{Kind: nsinit.ZygPrepare, Ints: []uint64{uint64(a.Cloneflags), uint64(a.UID), uint64(a.GID)}}
}

// prestart is Prestart, with a channel closed once its start is done.
func (c *Client) prestart() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.mu.Lock()
		defer c.mu.Unlock()
		_, _ = c.live()
	}()
	return done
}

// live returns the current server's connection, starting a server if none
// runs or the last one died. c.mu is held.
func (c *Client) live() (*conn, error) {
	if c.conn != nil {
		c.conn.mu.Lock()
		dead := c.conn.dead
		c.conn.mu.Unlock()
		if !dead {
			return c.conn, nil
		}
		c.conn = nil
	}
	cn, err := startServer()
	if err != nil {
		return nil, err
	}
	c.conn = cn
	c.started++
	slog.Debug("hutch: spawn server started", "pid", cn.pid, "servers", c.started)
	go c.readLoop(cn)
	c.told = Ahead{} // a new server keeps none until told
	c.tell(cn)
	return cn, nil
}

// startServer re-execs the host binary as the spawn server. It is started
// from a goroutine locked to its own OS thread that stays alive as long as
// the server does: PR_SET_PDEATHSIG fires when the thread that created the
// child exits, not the process, so that thread must not go away early.
func startServer() (*conn, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spawn: socketpair: %w", err)
	}
	serverEnd := os.NewFile(uintptr(pair[1]), "spawn-server")
	type started struct {
		pid int
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns, its thread exits.
		cmd := &exec.Cmd{
			Path:        "/proc/self/exe",
			Args:        []string{nsinit.ZygoteArg0},
			Env:         []string{},
			ExtraFiles:  []*os.File{serverEnd},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
		}
		if err := cmd.Start(); err != nil {
			ch <- started{err: err}
			return
		}
		ch <- started{pid: cmd.Process.Pid}
		_ = cmd.Wait()
	}()
	s := <-ch
	serverEnd.Close()
	if s.err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("spawn: start server: %w", s.err)
	}
	return &conn{fd: pair[0], pending: map[uint64]*pending{}, pid: s.pid}, nil
}

func (c *Client) readLoop(cn *conn) {
	buf := make([]byte, nsinit.ZygMaxMessage)
	for {
		n, _, _, _, err := unix.Recvmsg(cn.fd, buf, nil, unix.MSG_CMSG_CLOEXEC)
		if err != nil && errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		recs, err := nsinit.DecodeWire(buf[:n])
		if err != nil || len(recs) != 1 {
			continue
		}
		rep := recs[0]
		id := rep.Int(0)
		cn.mu.Lock()
		p := cn.pending[id]
		if rep.Kind != nsinit.ZygStarted {
			delete(cn.pending, id)
		}
		cn.mu.Unlock()
		if p == nil {
			continue
		}
		switch rep.Kind {
		case nsinit.ZygStarted, nsinit.ZygFailed:
			p.started <- rep
		case nsinit.ZygExited:
			p.init.status = syscall.WaitStatus(uint32(rep.Int(1)))
			close(p.init.done)
		}
	}
	// The zygote is gone: fail everything in flight. Its inits are gone
	// too (their parent-death signal is SIGKILL).
	slog.Debug("hutch: zygote gone", "pid", cn.pid)
	cn.mu.Lock()
	cn.dead = true
	pend := cn.pending
	cn.pending = nil
	cn.mu.Unlock()
	cn.wmu.Lock()
	unix.Close(cn.fd)
	cn.fd = -1
	cn.wmu.Unlock()
	for _, p := range pend {
		select {
		case p.started <- nsinit.Record{}:
		default:
		}
		select {
		case <-p.init.done:
		default:
			p.init.err = ErrServerDied
			close(p.init.done)
		}
	}
}
