package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	if os.Args[0] == Arg0 {
		os.Exit(runInit())
	}
}

// initState is the init's one run.
type initState struct {
	cfg       Config
	status    *os.File
	enc       *json.Encoder
	layers    []Layer
	skipped   []Skipped
	sigs      chan os.Signal
	sigsReady chan struct{}
	// cgroupTasks are v1 tasks files to join (see Config.CgroupTasks).
	cgroupTasks []int
	phases      []Phase
	last        int64 // CLOCK_MONOTONIC at the end of the last phase
	// handoff is the socket the init hands the host its egress listener
	// and unix wall through (see HandoffEgress), or -1.
	handoff int
	// childRlimits are set on the command's process once it exists (see
	// cgroups.Rlimit.ForChild).
	childRlimits []cgroups.Rlimit
	// unixWall says how the unix-sockets layer is enforced, if it is.
	unixWall string
}

// runInit is the whole life of the init. It runs from a package init
// function, on the main goroutine, which the Go runtime keeps locked to the
// main thread during initialization; it locks it once more so the thread
// that drops privileges is the thread that forks the command.
func runInit() int {
	runtime.LockOSThread()
	// Nothing in the sandbox may open /proc/1/exe, /proc/1/mem or
	// /proc/1/environ of this process: non-dumpable makes every such
	// access need CAP_SYS_PTRACE, which the command never holds
	// (CVE-2019-5736).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return 1
	}
	st := &initState{status: os.NewFile(StatusFd, "status"), last: Monotonic()}
	st.enc = json.NewEncoder(st.status)
	st.phase("go-runtime-start") // from the first line of Go code; see runtime's "spawn"
	// Signal forwarding is set up concurrently with the rest: its first use
	// starts a runtime thread, about a millisecond that would otherwise sit
	// on the spawn's critical path. run waits for it before the command.
	st.sigs = make(chan os.Signal, 16)
	st.sigsReady = make(chan struct{})
	go func() {
		signal.Notify(st.sigs, Forwarded...)
		close(st.sigsReady)
	}()
	if err := st.readConfig(); err != nil {
		st.fail(LayerFilesystem, "read config", "", err)
		return 1
	}
	// Every fd beyond stdio, whatever the host left open by mistake, is
	// closed on exec (CVE-2024-21626).
	if err := MarkCloseOnExec(3); err != nil {
		st.fail(LayerFilesystem, "close_range", "", err)
		return 1
	}
	st.phase("config")
	st.layers = append(st.layers, st.cfg.Namespaces...)
	if err := st.setup(); err != nil {
		return 1
	}
	st.phase("filesystem")
	if err := st.confine(); err != nil {
		return 1
	}
	st.phase("confine")
	st.send(Event{Kind: EventReady})
	cmd, stdio, err := st.readCommand()
	st.phase("wait-command")
	if err != nil {
		// The host closed the socket: a pooled init it no longer needs.
		return 0
	}
	return st.run(cmd, stdio)
}

// phase records the time since the previous phase ended under name. It
// returns true so it can sit in a chain of steps.
func (st *initState) phase(name string) bool {
	now := Monotonic()
	if name == "go-runtime-start" {
		// Nothing before this line of ours has a clock reading; the
		// host's spawn request time is the start (see Phases' first
		// entry, filled in by the host).
		st.phases = append(st.phases, Phase{Name: name, Start: now})
	} else {
		st.phases = append(st.phases, Phase{Name: name, Start: st.last, Nanos: now - st.last})
	}
	st.last = now
	return true
}

func (st *initState) readConfig() error {
	b, fds, err := ReadFrame(ControlFd)
	if err == nil {
		err = json.Unmarshal(b, &st.cfg)
	}
	if err == nil && len(fds) != st.cfg.wantFds() {
		err = fmt.Errorf("config frame with %d fds, want %d", len(fds), st.cfg.wantFds())
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return err
	}
	st.cgroupTasks = fds[:st.cfg.CgroupTasks]
	st.handoff = -1
	if st.cfg.HandsOff() {
		st.handoff = fds[st.cfg.CgroupTasks]
	}
	return nil
}

// readCommand waits for the command frame and its three stdio fds.
func (st *initState) readCommand() (Command, []int, error) {
	var cmd Command
	b, fds, err := ReadFrame(ControlFd)
	if err == nil && len(fds) != 3 {
		err = fmt.Errorf("command frame with %d fds, want 3", len(fds))
	}
	if err == nil {
		err = json.Unmarshal(b, &cmd)
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return cmd, nil, err
	}
	return cmd, fds, nil
}

func (st *initState) send(ev Event) {
	_ = st.enc.Encode(ev)
}

func (st *initState) fail(layer Layer, op, path string, err error) {
	se := &SetupError{Layer: layer, Op: op, Path: path, Msg: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		se.Errno = int(errno)
	}
	var me *mounts.Error
	if errors.As(err, &me) && se.Path == "" {
		se.Path = me.Path
	}
	var ste *StepError
	if errors.As(err, &ste) && se.Path == "" {
		se.Path = ste.Path
	}
	st.send(Event{Kind: EventError, Error: se})
}

// try runs one setup step. A failure of a degradable layer is recorded
// and skipped; any other failure is reported and ends the init.
func (st *initState) try(layer Layer, op string, f func() error) bool {
	if slices.Contains(st.cfg.Skip, layer) && !slices.Contains(neverDegrade, layer) {
		st.skipped = append(st.skipped, Skipped{Layer: layer, Reason: "skipped by policy"})
		return true
	}
	if err := f(); err != nil {
		if slices.Contains(st.cfg.Degradable, layer) && !slices.Contains(neverDegrade, layer) {
			st.skipped = append(st.skipped, Skipped{Layer: layer, Reason: op + ": " + err.Error()})
			return true
		}
		st.fail(layer, op, "", err)
		return false
	}
	st.layers = append(st.layers, layer)
	return true
}

// neverDegrade are skipped by no configuration: without them there is no
// sandbox (a failed filesystem step leaves the host tree reachable).
var neverDegrade = []Layer{LayerFilesystem, LayerCapabilities, LayerNoNewPrivs, LayerSeccomp, LayerUserNS, LayerMountNS, LayerPidNS}

// setup builds the sandbox around the init, in order: identity, network,
// filesystem, working directory. Privileges are dropped in run, on the
// forking thread, after the last step that needs them.
func (st *initState) setup() error {
	cfg := &st.cfg
	if len(cfg.Namespaces) == 0 {
		// The host's namespaces (LevelLandlock): nothing to build, and
		// the init must keep what its command forks below itself, since
		// no pid namespace will end them (see KillDescendants).
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			st.fail(LayerExec, "become a child subreaper", "", err)
			return err
		}
		if !st.try(LayerKeyring, "join a new session keyring", joinSessionKeyring) {
			return errors.New("setup failed")
		}
		return nil
	}
	ok := st.try(LayerKeyring, "join a new session keyring", joinSessionKeyring) && st.try(LayerUTSNS, "sethostname", func() error {
		return sethostname(cfg.Hostname)
	}) && st.network() && st.phase("keyring-uts-loopback") &&
		st.try(LayerFilesystem, "build the filesystem view", func() error {
			return applyMounts(cfg.Mounts)
		})
	if !ok {
		return errors.New("setup failed")
	}
	// The uts layer was already reported as a namespace; keep one entry.
	st.layers = slices.Compact(sortLayers(st.layers))
	return nil
}

// network sets up the sandbox's network namespace: loopback up, and the
// egress bridge when the policy allows some destinations. With the host's
// network (no namespace of its own) there is nothing to do.
func (st *initState) network() bool {
	if !slices.Contains(st.cfg.Namespaces, LayerNetNS) {
		return true
	}
	if !st.try(LayerLoopback, "bring up loopback", loopbackUp) {
		return false
	}
	if e := st.cfg.Egress; e != nil {
		if err := startEgress(e.Port, st.handoff); err != nil {
			st.fail(LayerNetNS, "listen for the egress proxy", "", err)
			return false
		}
	}
	return true
}

// chdir enters the command's working directory, which must be a real
// path inside the new root: a cwd that resolved outside it (a leaked fd
// path) shows as "(unreachable)", and a symlink must not lead into /proc
// or /dev. With roots, it must lie in one of them: a directory the host
// checked may have been replaced by a symlink since.
func chdir(dir string, roots []string) error {
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err == nil && (mounts.Within(wd, "/proc") || mounts.Within(wd, "/dev")) {
		err = fmt.Errorf("working directory %q (through a symlink) is a kernel interface", wd)
	}
	if err == nil && (!filepath.IsAbs(wd) || strings.HasPrefix(wd, "(")) {
		err = fmt.Errorf("working directory %q is outside the sandbox", wd)
	}
	if err == nil && len(roots) > 0 && !slices.ContainsFunc(roots, func(r string) bool { return mounts.Within(wd, r) }) {
		err = fmt.Errorf("working directory %q (through a symlink) is outside the workspace and the writable paths", wd)
	}
	return err
}

func sortLayers(ls []Layer) []Layer {
	slices.Sort(ls)
	return ls
}

// lookPath finds file in the PATH of the command's environment, inside the
// new root.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, unix.Access(file, unix.X_OK)
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in PATH: %w", file, unix.ENOENT)
}

// emptyNamespace kills every other process of the pid namespace and reaps
// them all. Orphans are re-parented to the init (or to a subreaper, which
// dies too), so when wait4 reports no children left, nothing but the init
// is alive. A process forking while the kill goes out cannot escape: fork
// fails for a parent with a fatal signal pending.
func emptyNamespace() {
	if os.Getpid() != 1 {
		// Not a pid namespace of our own (LevelLandlock): kill(-1) would
		// hit every process of this uid on the host.
		KillDescendants(os.Getpid())
	} else {
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: no one left
		}
	}
}

// Forwarded are the signals the init passes on to the command's process
// group when it receives them (the host's way of signalling a command it
// cannot name by pid). Others would reach the init itself.
var Forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT}

// confine drops every privilege and loads the seccomp filter on this
// thread, the one that will fork the command, and starts forwarding
// signals. After it the init holds nothing the command could want, so it
// may wait for its command as long as it likes.
func (st *initState) confine() error {
	cfg := &st.cfg
	if len(cfg.Rlimits) > 0 {
		var own []cgroups.Rlimit
		for _, r := range cfg.Rlimits {
			if r.ForChild() {
				st.childRlimits = append(st.childRlimits, r)
			} else {
				own = append(own, r)
			}
		}
		if err := setRlimits(0, own); err != nil {
			st.fail(LayerRlimits, "set rlimits", "", err)
			return err
		}
		st.layers = append(st.layers, LayerRlimits)
	}
	if len(st.cgroupTasks) > 0 {
		// This thread forks the command: in the group, it is born there.
		err := joinCgroup(st.cgroupTasks)
		for _, fd := range st.cgroupTasks {
			unix.Close(fd)
		}
		if err != nil {
			st.fail(LayerCgroup, "join cgroup", "", err)
			return err
		}
	}
	if err := dropPrivileges(); err != nil {
		st.fail(LayerCapabilities, "drop privileges", "", err)
		return err
	}
	st.layers = append(st.layers, LayerCapabilities, LayerNoNewPrivs)
	// Landlock needs no_new_privs (set above) and must come before
	// seccomp, whose filter does not allow its system calls.
	if cfg.Landlock != nil {
		if err := restrictLandlock(*cfg.Landlock); err != nil {
			st.fail(LayerLandlock, "restrict", "", err)
			return err
		}
		st.layers = append(st.layers, LayerLandlock)
	}
	if cfg.UnixWall != nil && !st.try(LayerUnixSockets, "wall off unix sockets", st.wallUnixSockets) {
		return errors.New("unix wall failed")
	}
	// Last: from here on this thread runs under the command's filter.
	if slices.Contains(cfg.Skip, LayerSeccomp) {
		st.skipped = append(st.skipped, Skipped{Layer: LayerSeccomp, Reason: "skipped by policy"})
	} else {
		// Before the profile, which need not allow seccomp(2).
		if len(cfg.ModeWall) > 0 {
			if err := loadSeccomp(cfg.ModeWall); err != nil {
				st.fail(LayerSeccomp, "load the mode wall", "", err)
				return err
			}
		}
		// No filter and no skip is a config bug: fail closed.
		if err := loadSeccomp(cfg.Seccomp); err != nil {
			st.fail(LayerSeccomp, "load filter", "", err)
			return err
		}
		st.layers = append(st.layers, LayerSeccomp)
	}
	return nil
}

// wallUnixSockets sets up the unix-sockets layer on this thread, after
// Landlock and before the profile (which may not allow seccomp(2)): nothing
// to add where the Landlock ruleset already guards socket files, otherwise
// the notifying filter, whose listener the host answers for the sandbox's
// life.
func (st *initState) wallUnixSockets() error {
	ll := st.cfg.Landlock
	if ll != nil && ll.ABI >= landlock.ResolveUnixABI && slices.Contains(st.layers, LayerLandlock) {
		st.unixWall = UnixWallLandlock
		return nil
	}
	w := st.cfg.UnixWall
	listener, err := loadListener(w.Filter)
	if err != nil {
		return err
	}
	if err := handOffUnixWall(st.handoff, listener, w.Allowed); err != nil {
		return err
	}
	st.unixWall = UnixWallNotify
	return nil
}

func (st *initState) run(cmd Command, stdioFds []int) int {
	for i, fd := range stdioFds {
		// Dup3 without O_CLOEXEC: these are the command's 0, 1, 2.
		if err := unix.Dup3(fd, i, 0); err != nil {
			st.fail(LayerExec, "set up stdio", "", err)
			return 1
		}
	}
	for _, fd := range stdioFds {
		if fd > 2 {
			unix.Close(fd)
		}
	}
	if err := chdir(cmd.Dir, cmd.Roots); err != nil {
		st.fail(LayerFilesystem, "chdir", cmd.Dir, err)
		return 1
	}
	path, err := lookPath(cmd.Path, cmd.Env)
	if err != nil {
		st.fail(LayerExec, OpLookPath, cmd.Path, err)
		return 1
	}
	<-st.sigsReady
	sigs := st.sigs

	stdio := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	proc, err := os.StartProcess(path, cmd.Args, &os.ProcAttr{
		Env:   cmd.Env,
		Files: stdio,
		Sys: &syscall.SysProcAttr{
			// A new session without a controlling terminal: TIOCSTI has no
			// terminal to inject into.
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	})
	if err != nil {
		st.fail(LayerExec, OpExec, path, err)
		return 1
	}
	pid := proc.Pid
	if len(st.childRlimits) > 0 {
		// Within microseconds of its exec, before the dynamic loader is
		// done: the command cannot have grown much yet. (Only the rlimit
		// fallback for hosts without cgroups takes this path.)
		if err := setRlimits(pid, st.childRlimits); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			st.fail(LayerRlimits, "set the command's rlimits", "", err)
			return 1
		}
	}
	st.phase("exec")
	st.send(Event{Kind: EventStarted, Pid: pid, Layers: st.layers, Skipped: st.skipped, Phases: st.phases, UnixWall: st.unixWall})
	// The init keeps no copy of the command's stdio: output pipes reach
	// EOF as soon as the command's own tree closes them.
	devnull, _ := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if devnull != nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup3(int(devnull.Fd()), fd, 0)
		}
		devnull.Close()
	}

	// Signals go to the command's process group (it is a session leader,
	// so the group is its pid), as a terminal's ^C or coreutils timeout
	// would send them: a shell script and the children it waits for stop
	// together, instead of the shell deferring its trap until a foreground
	// child ends on its own. Whatever left the group (a daemon) is killed
	// with the rest of the namespace when the command ends.
	go func() {
		for s := range sigs {
			_ = unix.Kill(-pid, s.(syscall.Signal))
		}
	}()

	// Reap everything; the command's own end is the sandbox's end.
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			st.fail(LayerExec, "wait", "", err)
			return 1
		}
		if wpid != pid {
			continue
		}
		ev := Event{Kind: EventExited}
		switch {
		case ws.Exited():
			ev.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			ev.ExitCode = -1
			ev.Signal = int(ws.Signal())
		}
		emptyNamespace()
		st.send(ev)
		return 0
	}
}
