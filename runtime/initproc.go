//go:build linux

package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/spawn"
)

// sandboxInit is a sandbox init on its way to (or waiting at) the point
// where only its command is missing. It is used by exactly one command.
type sandboxInit struct {
	log *slog.Logger // the policy's
	// proxy is the egress proxy of Network "allow"; netEvents what it saw.
	proxy     *netns.Proxy
	netMu     sync.Mutex
	netEvents []netns.Event
	// ingress makes connections into the sandbox for its published
	// ports (Policy.Publish); nil without any.
	ingress *ingressSource
	// reach are the host services of Policy.Reach by the command's port;
	// reachers forward to them until the init is gone.
	reach    map[int]string
	reachMu  sync.Mutex
	reachers []*netns.Ingress

	// denied counts what the command is refused, from every source that
	// sees a refusal (Result.Denials); nil under DenialsOff.
	denied *denials

	// wall is how the listener the init hands over is served: the unix
	// wall's, and the profile's refusals (Policy.Denials).
	wall netns.WallOptions

	// noPidNS: the init shares the host's pid namespace (LevelLandlock);
	// hostNet, its network namespace (NetworkHost).
	noPidNS, hostNet bool
	proc             *spawn.Init
	control          int // host end of the control socket (blocking; raw fd)
	status           *os.File
	events           chan nsinit.Event
	fresh            fresh
	// cfgSent reports the config frame written: the command frame must
	// not overtake it on the socket.
	cfgSent chan error
	pooled  bool // handed out by the pool (for tests and results)
	// group is the command's cgroup, or nil without cgroups. Destroyed
	// once the init is reaped.
	group *cgroups.Group
	// spawnAt is when the spawn request went out (CLOCK_MONOTONIC).
	spawnAt int64
	// unhold counts the init out of what it held of its Sandbox
	// (holdTmp); nil if nothing.
	unhold func()

	closeOnce sync.Once
}

var (
	devNullOnce sync.Once
	devNull     *os.File
	devNullErr  error
)

// initStdio is the init's own stdin, stdout and stderr: /dev/null. The
// command's come later, over the control socket.
func initStdio() (*os.File, error) {
	devNullOnce.Do(func() { devNull, devNullErr = os.OpenFile(os.DevNull, os.O_RDWR, 0) })
	return devNull, devNullErr
}

// A spawner starts an init's process: spawn.Default().Spawn, through the
// spawn server, for commands and a New Sandbox's file door (whose first
// call then takes the spare: a message, where a direct start costs a
// copy of this process's page tables and an exec); spawn.Direct, from
// this process, for the file door of a NewFiles Sandbox, which would
// otherwise start a server and its spare for one init (hutch read).
type spawner func(spawn.Request) (*spawn.Init, error)

// startInit starts a new init through start and sends it the sandbox
// configuration. It does not wait for the sandbox to be built.
func (sb *Sandbox) startInit(f fresh, start spawner) (in *sandboxInit, err error) {
	config := sb.config(f)
	// The command's cgroup exists, limits written, before the init runs
	// anything of the command: on v2 the init is cloned into it, so it is
	// made first; on v1 the init's forking thread joins it through the
	// tasks files that travel with the plan, so it is made while the init
	// is cloned (a mkdir and the limits' writes in each hierarchy, off the
	// spawn's path).
	var group *cgroups.Group
	var cgroupDir *os.File
	var tasks []*os.File
	defer func() {
		for _, t := range tasks {
			t.Close()
		}
		if err != nil && group != nil {
			_ = group.Destroy()
		}
	}()
	makeGroup := func() error {
		var err error
		if group, err = sb.newGroup(); err != nil {
			return &SetupError{Layer: LayerCgroup, Op: "create", Err: err}
		}
		if dir, ok := group.File(); ok {
			cgroupDir = dir // owned by group
			return nil
		}
		if tasks, err = group.OpenTasks(); err != nil {
			return &SetupError{Layer: LayerCgroup, Op: "open tasks", Err: err}
		}
		config.CgroupTasks = len(tasks)
		return nil
	}
	cloneInto := sb.cgroups != nil && sb.cgroups.Layout() == cgroups.V2
	if cloneInto {
		if err := makeGroup(); err != nil {
			return nil, err
		}
	}
	null, err := initStdio()
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hutch: control socket: %w", err)
	}
	initEnd := os.NewFile(uintptr(pair[1]), "control")
	defer initEnd.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		unix.Close(pair[0])
		return nil, err
	}
	defer statusW.Close()
	// The init is cloned while its plan is made: the clone (the
	// namespaces made) and the plan (the carve-out listed, the host's part
	// of the Landlock ruleset added) take about as long, and the init
	// waits for its plan on the control socket.
	spawnAt := nsinit.Monotonic()
	spawned := make(chan spawnResult, 1)
	go func() {
		proc, err := start(spawn.Request{
			Cloneflags: sb.cloneflags(),
			UID:        sb.uid, GID: sb.gid,
			Stdin: null, Stdout: null, Stderr: null, Control: initEnd, Status: statusW,
			Cgroup: cgroupDir,
		})
		spawned <- spawnResult{proc, err}
	}()
	cfgFd := -1
	var taskFds []int
	var ho *handoff
	// abandon undoes what this function made, the init included: it ends
	// at the control socket's close, its plan never sent, and is reaped
	// before its group goes.
	abandon := func(err error) (*sandboxInit, error) {
		if ho != nil {
			ho.sock.Close()
		}
		if cfgFd >= 0 {
			taskFds = append(taskFds, cfgFd)
		}
		closeFds(append(taskFds, pair[0]))
		statusR.Close()
		if r := <-spawned; r.err == nil {
			_, _ = r.proc.Wait()
		}
		return nil, err
	}
	if sb.cgroups != nil && !cloneInto {
		if err := makeGroup(); err != nil {
			return abandon(err)
		}
	}
	plan, ruleset, err := planInit(sb, f, config)
	if err != nil {
		return abandon(err)
	}
	if ruleset != nil {
		defer ruleset.Close()
	}
	// The config goes out while the spawn request travels; a config
	// larger than the socket buffer blocks this goroutine until the init
	// reads, or fails once the init is gone.
	// The goroutine writes through its own dup, so closing the control
	// socket never leaves it writing to a reused fd number.
	if cfgFd, err = unix.FcntlInt(uintptr(pair[0]), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		cfgFd = -1
		return abandon(err)
	}
	cfgSent := make(chan error, 1)
	// The tasks files travel with the config; the goroutine gets its own
	// copies, since this function closes its own when it returns.
	for _, t := range tasks {
		d, err := unix.FcntlInt(t.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return abandon(err)
		}
		taskFds = append(taskFds, d)
	}
	if config.HandsOff() {
		var initEnd *os.File
		ho, initEnd, err = newHandoff()
		if err == nil {
			var d int
			d, err = unix.FcntlInt(initEnd.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			initEnd.Close()
			if err == nil {
				taskFds = append(taskFds, d)
			}
		}
		if err != nil {
			return abandon(err)
		}
	}
	if ruleset != nil {
		d, err := unix.FcntlInt(ruleset.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return abandon(err)
		}
		taskFds = append(taskFds, d) // the config frame's last fd
	}
	go func() {
		cfgSent <- nsinit.WriteFrame(cfgFd, plan.Message, taskFds...)
		closeFds(append(taskFds, cfgFd))
	}()
	if group != nil {
		// The command's Result reads the group's usage once it has
		// ended: opened now, while the init is cloned and builds its
		// view, those files cost a read each there instead of an open, a
		// read and a close (some 80 us on the command's path).
		group.HoldUsage()
	}
	r := <-spawned
	proc, err := r.proc, r.err
	if err != nil {
		unix.Close(pair[0])
		statusR.Close()
		if ho != nil {
			ho.sock.Close()
		}
		return nil, fmt.Errorf("hutch: start sandbox: %w", err)
	}
	in = &sandboxInit{log: sb.policy.logger(), noPidNS: sb.level == LevelLandlock, hostNet: sb.policy.Network == NetworkHost, proc: proc, control: pair[0], status: statusR, events: make(chan nsinit.Event, 4), fresh: f, cfgSent: cfgSent, group: group, spawnAt: spawnAt, unhold: sb.holdTmp()}
	if sb.policy.Denials != DenialsOff {
		in.denied = &denials{}
	}
	in.wall = sb.wallOptions(in.hostNet, in.denied)
	go readEvents(statusR, plan, in.events)
	if config.Egress != nil {
		if err := in.startEgress(sb); err != nil {
			if ho != nil {
				ho.sock.Close()
			}
			in.release()
			return nil, err
		}
	}
	if ho != nil {
		for _, r := range sb.policy.Reach {
			if in.reach == nil {
				in.reach = map[int]string{}
			}
			in.reach[r.Port] = r.Addr
		}
		if config.Ingress {
			in.ingress = newIngressSource(ho)
		}
		go in.serveHandoff(ho)
	}
	return in, nil
}

type spawnResult struct {
	proc *spawn.Init
	err  error
}

// planInit encodes config, an init's built with f, as the init's plan
// (planMemo), and begins its Landlock ruleset on the host
// (nsinit.Plan.Ruleset), or takes the one begun ahead for that plan
// once the command before ended (rulesetAhead). A ruleset the host cannot begin (a path it may
// not open) is left to the init, which may (it holds capabilities over
// the host uid's files), or else fails as its own step, reported and
// degraded as such. Tests replace it.
var planInit = func(sb *Sandbox, f fresh, config nsinit.Config) (*nsinit.Plan, *os.File, error) {
	plan, err := sb.plans.encode(f, config)
	if err != nil {
		return nil, nil, err
	}
	if r := sb.rulesets.take(plan); r != nil {
		return plan, r, nil
	}
	ruleset, err := plan.Ruleset()
	if err != nil {
		config.HostRuleset = false
		plan, err = nsinit.EncodeConfig(config)
	}
	return plan, ruleset, err
}

// planMemo keeps the last plan a Sandbox made. An init's Config is the
// Sandbox's but for what is read fresh (f) and the number of cgroup v1
// tasks files, and EncodeConfig reads nothing from the host but the
// Landlock carve-outs' listings, which Plan.Current checks. So the next
// init with the same f and tasks files gets the same plan while it is
// current: the plan is made again only when something it comes from
// changed. Making it was about a tenth of the host's CPU per spawn, most
// of it allocation.
type planMemo struct {
	mu    sync.Mutex
	f     fresh
	tasks int
	plan  *nsinit.Plan
}

// encode is nsinit.EncodeConfig(config), config being an init's built
// with f: the last plan made, if it was made of the same and is current.
func (m *planMemo) encode(f fresh, config nsinit.Config) (*nsinit.Plan, error) {
	m.mu.Lock()
	plan := m.plan
	if plan != nil && (m.tasks != config.CgroupTasks || !m.f.equal(f)) {
		plan = nil
	}
	m.mu.Unlock()
	if plan != nil && plan.Current() {
		return plan, nil
	}
	plan, err := nsinit.EncodeConfig(config)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.f, m.tasks, m.plan = f, config.CgroupTasks, plan
	m.mu.Unlock()
	return plan, nil
}

// send hands the init its command and the command's stdio.
func (in *sandboxInit) send(cmd nsinit.Command, stdio [3]*os.File) error {
	b, err := nsinit.EncodeCommand(cmd)
	if err != nil {
		// Cmd.check refuses every NUL; should one slip through, the init,
		// waiting for a command it will never get, must not keep the
		// caller waiting for its end.
		in.kill()
		return err
	}
	if err := <-in.cfgSent; err != nil {
		return err
	}
	return nsinit.WriteFrame(in.control, b, int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
}

// kill ends the init and, with it, its whole sandbox. Without a pid
// namespace (LevelLandlock) the init's death would orphan the command, so
// its descendants are killed first, from here (the init is their
// subreaper: whatever they fork or daemonize stays below it).
func (in *sandboxInit) kill() {
	if in.noPidNS {
		nsinit.KillDescendants(in.proc.Pid)
	}
	_ = in.proc.Signal(unix.SIGKILL)
}

// close releases the host's ends; call once the init has been reaped or
// will never be used.
func (in *sandboxInit) close() {
	in.closeOnce.Do(func() {
		if in.proxy != nil {
			in.proxy.Close()
		}
		unix.Close(in.control)
		in.status.Close()
		if in.group != nil {
			if err := in.group.Destroy(); err != nil {
				in.log.Warn("hutch: remove cgroup", "group", in.group.Path(), "err", err)
			}
		}
		if in.unhold != nil {
			in.unhold()
		}
	})
}

// ending tears down what is left of a command whose Wait is returning,
// in the background; Close waits for it, and once sb is closed it is done
// before ending returns. The init reported its command's end (exited) and
// exits right after: its end is awaited, briefly, so that the group is
// found empty instead of frozen and killed on the init's way out
// (milliseconds of CPU on a v1 freezer); the group is removed, whatever is
// still in it killed; then the host's ends are released once the init is
// reaped.
func (sb *Sandbox) ending(in *sandboxInit, g *cgroups.Group, exited bool) {
	end := func() {
		if g != nil {
			if exited {
				t := time.NewTimer(initExitWait)
				select {
				case <-in.proc.Done():
				case <-t.C:
				}
				t.Stop()
			}
			if err := g.Destroy(); err != nil {
				in.log.Warn("hutch: remove cgroup", "group", g.Path(), "err", err)
			}
		}
		in.reap()
	}
	sb.life.RLock()
	if sb.closed {
		sb.life.RUnlock()
		end()
		return
	}
	sb.endings.Add(1)
	sb.life.RUnlock()
	go func() {
		defer sb.endings.Done()
		if testHookEnding != nil {
			testHookEnding()
		}
		end()
	}()
}

// testHookEnding, when a test sets it, runs before a background ending.
var testHookEnding func()

// discard kills an init that will not be used and releases it in the
// background.
func (in *sandboxInit) discard() {
	in.kill()
	go in.reap()
}

// release kills an init that will not be used and returns once it has
// been reaped and released, its cgroup removed.
func (in *sandboxInit) release() {
	in.kill()
	in.reap()
}

// reap waits for the init's end (and its last events) and releases what
// the host holds of it.
func (in *sandboxInit) reap() {
	_, _ = in.wait()
	for range in.events {
	}
	in.close()
}

// wait waits for the init to be reaped, and returns its wait status. When
// its spawn server died (spawn.ErrServerDied), nobody here can reap it or
// learn its status, and the kernel's parent-death SIGKILL may still be on
// its way: wait then waits (at most orphanWait) for the process itself to
// end, through a pidfd, so that the caller's "the sandbox is gone" holds.
// A pid 1 ends only once everything in its pid namespace has died.
func (in *sandboxInit) wait() (syscall.WaitStatus, error) {
	ws, err := in.proc.Wait()
	if errors.Is(err, spawn.ErrServerDied) {
		awaitExit(in.proc.Pid, orphanWait)
	}
	return ws, err
}

// orphanWait bounds the wait for an init whose spawn server died.
const orphanWait = 5 * time.Second

// awaitExit waits until process pid has exited (is a zombie or gone), for
// at most d. It only waits: should the pid have been reaped and reused
// meanwhile, it waits for an unrelated process, never touches it.
func awaitExit(pid int, d time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			return
		}
	}
}

// readEvents passes on the events of the init running plan until its
// status pipe ends. An event that cannot be read ends them too: the pipe
// is out of step, and the init's exit tells the rest.
func readEvents(r io.Reader, plan *nsinit.Plan, out chan<- nsinit.Event) {
	defer close(out)
	br := bufio.NewReader(r)
	for {
		ev, err := nsinit.ReadEvent(br, plan)
		if err != nil {
			return
		}
		out <- ev
	}
}
