package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hutchbox/hutch/darwin"
	"github.com/hutchbox/hutch/leaks"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
)

// machine is what a macOS Sandbox holds besides its policy: the Seatbelt
// profile compiled once from it (package darwin), which every command
// runs under through /usr/bin/sandbox-exec, and its private temporary
// directory.
type machine struct {
	grantState
	reloadState
	dp      darwin.Policy
	profile darwin.Profile // dp's, for commands without a proxy
	tmp     string
	env     []string
	// rules is the allow-list of Network "allow": each command gets a
	// proxy of its own on a localhost port, the only one its profile
	// lets it connect to.
	rules *netns.Rules
	// closed is set by Close: nothing starts after it.
	closed atomic.Bool
	// leaks scans arguments, environment, output and reads (Policy.Leaks);
	// nil for LeaksOff.
	leaks *leaks.Scanner
}

// NewFiles is New: a Seatbelt Sandbox starts nothing ahead of its
// commands.
func NewFiles(p Policy) (*Sandbox, error) { return New(p) }

// New validates p and compiles its profile: Check's decision, and the
// private temporary directory it allows.
func New(p Policy) (*Sandbox, error) {
	tmp, err := os.MkdirTemp("", "hutch-tmp-")
	if err != nil {
		return nil, err
	}
	sb, repos, err := decide(p, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	home := filepath.Join(tmp, "home")
	_ = os.Mkdir(home, 0o700)
	if sb.policy.Home != "" {
		home = sb.policy.Home
	}
	makeGitCodeDirs(repos, sb.policy.AllowGitWrite)
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/bin:/bin:/usr/sbin:/sbin"
	}
	if sb.policy.Tools != "" {
		path = sb.policy.Tools + ":" + path
	}
	sb.env = mergeEnv([]string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmp, "HUTCH_SANDBOX=1"}, sb.policy.Env)
	return sb, nil
}

// decide is New's decision, all of Check: p resolved by the rules every
// platform shares and macOS's, what the Seatbelt profile cannot hold
// refused, the grants' ceiling checked, and the profile compiled with tmp
// as the private temporary directory. It makes nothing; it returns the
// repositories whose missing code directories New makes.
func decide(p Policy, tmp string) (*Sandbox, []gitRepo, error) {
	r, err := resolvePolicy(p, darwinRules(hostHome()))
	if err != nil {
		return nil, nil, err
	}
	given := p
	p = r.policy
	if p.Unsandboxed {
		return nil, nil, &PolicyError{Field: "Unsandboxed", Value: "true", Reason: "the disabled mode is not implemented on macOS"}
	}
	if err := seatbeltLevel(p.MinLevel); err != nil {
		return nil, nil, err
	}
	if len(p.Reach) > 0 {
		return nil, nil, &PolicyError{Field: "Reach", Value: p.Reach[0].Addr, Reason: "reached ports are not implemented for the Seatbelt profile yet"}
	}
	if len(p.Publish) > 0 {
		return nil, nil, &PolicyError{Field: "Publish", Value: p.Publish[0].String(), Reason: "published ports are not implemented for the Seatbelt profile yet"}
	}
	if p.Apps != nil {
		return nil, nil, &PolicyError{Field: "Apps", Reason: "app isolation is not implemented for the Seatbelt profile yet"}
	}
	if len(p.Binds) > 0 {
		return nil, nil, &PolicyError{Field: "Binds", Value: p.Binds[0].String(), Reason: "host trees at other paths are not implemented for the Seatbelt profile"}
	}
	if p.Reads == ReadsListed {
		return nil, nil, &PolicyError{Field: "Reads", Value: string(p.Reads), Reason: "a listed view is not implemented for the Seatbelt profile yet"}
	}
	if p.Root != "" {
		return nil, nil, &PolicyError{Field: "Root", Value: p.Root, Reason: "a root file system of its own needs mounts, which the Seatbelt profile does not have"}
	}
	if p.AllowNested {
		return nil, nil, &PolicyError{Field: "AllowNested", Value: "true", Reason: "macOS has no namespaces to nest; a Seatbelt profile cannot be nested in another either"}
	}
	dp, repos := seatbeltPolicy(r)
	dp.Writable = append(dp.Writable, tmp)
	if p.Home != "" {
		dp.Writable = append(dp.Writable, p.Home)
	}
	sb := &Sandbox{policy: p, machine: machine{tmp: tmp, rules: r.rules, dp: dp, leaks: r.leaks}}
	if err := sb.setupGrants(given, p); err != nil {
		return nil, nil, err
	}
	// Compiled once here; only a command with its own proxy port needs
	// a profile of its own.
	if sb.profile, err = darwin.Compile(dp); err != nil {
		return nil, nil, seatbeltError(err)
	}
	return sb, repos, nil
}

// Policy returns the validated policy.
func (sb *Sandbox) Policy() Policy { return sb.inEffect().policy.clone() }

// Check decides what New decides (see the Linux doc), with a private
// temporary directory's path in the profile that New would make, and
// makes nothing.
func Check(p Policy) (*Resolved, error) {
	sb, _, err := decide(p, filepath.Join(os.TempDir(), "hutch-tmp-checked"))
	if err != nil {
		return nil, err
	}
	pol := sb.policy.clone()
	return &Resolved{policy: pol, level: LevelSeatbelt, workspace: pol.Workspace, writable: pol.Writable}, nil
}

// WorkDir resolves dir as a command's Cmd.Dir (see the Linux doc).
func (sb *Sandbox) WorkDir(dir string) (string, error) {
	cur := sb.inEffect()
	return workDir(dir, cur.policy.Workspace, cur.policy.Writable)
}

// Close removes the sandbox's private temporary directory. After Close,
// Start fails with ErrClosed. It is idempotent.
func (sb *Sandbox) Close() error {
	if sb.closed.Swap(true) {
		return nil
	}
	if n := sb.next.Load(); n != nil {
		n.Close()
	}
	sb.closeGranted()
	return os.RemoveAll(sb.tmp)
}

func (sb *Sandbox) isClosed() bool { return sb.closed.Load() }

// There is no start to wait for on macOS: a Sandbox is its profile.
func (sb *Sandbox) lockLife() func()     { return func() {} }
func (sb *Sandbox) isClosedLocked() bool { return sb.closed.Load() }
func (sb *Sandbox) retire()              { sb.retired.Store(true); sb.closeGranted() }

// Prewarmed is always 0 on macOS: there is nothing to build ahead.
func (sb *Sandbox) Prewarmed() int { return 0 }

// cmdState is the part of a Cmd that macOS's commands need: the
// sandbox-exec process, its proxy and its leak stages.
type cmdState struct {
	runCtx context.Context // ctx with the policy's timeout
	cancel context.CancelFunc
	cmd    *exec.Cmd
	start  time.Time

	proxy     *netns.Proxy
	netMu     sync.Mutex
	netEvents []netns.Event

	// leaks are the secrets found in the output; finish passes on what
	// the leak stages held back, once the output has ended.
	leaks    leakLog
	leakHit  bool
	finishes []func() error

	mu      sync.Mutex
	ended   bool
	stopped bool // Stop was called
	grace   *time.Timer
}

// Start starts the command under sandbox-exec. As on Linux, Result is
// set once Start returns an error: a command that never ran has one too,
// and a context that ended before it started is reported as the kill it
// is (an *ExitError).
func (c *Cmd) Start() error {
	if c.startCalled {
		return errors.New("hutch: Start was already called")
	}
	c.startCalled, c.start = true, time.Now()
	sb, unlock, err := c.sb.startIn(c.Grant)
	if err == nil {
		unlock()
		c.sb = sb
		err = c.startSeatbelt()
	}
	if err == nil {
		return nil
	}
	r := c.sb.result()
	r.ExitCode, r.Wall = -1, time.Since(c.start)
	c.Result = r
	if c.ctx != nil && c.ctx.Err() != nil {
		r.Signal, r.Killed, r.KillReason = syscall.SIGKILL, true, ctxKillReason(c.ctx)
		r.Reason = string(r.KillReason)
		return &ExitError{Result: r, killErr: contextError(c.ctx)}
	}
	r.Error = strings.TrimPrefix(err.Error(), "hutch: ")
	return err
}

// result is the Result every command of sb starts from.
func (sb *Sandbox) result() *Result {
	return &Result{Level: LevelSeatbelt, Backend: BackendSeatbelt, Network: sb.policy.Network, LeakAction: sb.policy.Leaks,
		Unenforced: []string{"resource limits: none on macOS", "processes: the command sees the host's processes", "output limit: not enforced on macOS"}}
}

func (c *Cmd) startSeatbelt() error {
	if c.ctx == nil {
		return errors.New("hutch: nil Context")
	}
	if c.sb.closed.Load() {
		return fmt.Errorf("hutch: %w", ErrClosed)
	}
	if err := checkWaitDelay(c.WaitDelay); err != nil {
		return err
	}
	dir, err := workDir(c.Dir, c.sb.policy.Workspace, c.sb.policy.Writable)
	if err != nil {
		return err
	}
	c.Dir = dir
	// The same list as on Linux: sandbox-exec passes the environment on
	// to dyld and to whatever the command runs.
	if err := checkEnv("Cmd.Env", c.Env); err != nil {
		return err
	}
	if err := checkLeaksIn(c.sb.leaks, "Cmd.Env", c.Args, c.Env); err != nil {
		return err
	}
	if err := lookCommand(c.Path, c.Dir, mergeEnv(c.sb.env, c.Env)); err != nil {
		return err
	}
	ctx := c.ctx
	if t := c.sb.policy.Timeout; t > 0 {
		ctx, c.cancel = context.WithTimeout(ctx, t)
	}
	c.runCtx = ctx
	prof, env := c.sb.profile, c.sb.env
	if c.sb.rules != nil {
		port, err := c.startProxy()
		if err != nil {
			return err
		}
		dp := c.sb.dp
		dp.ProxyPort = port
		if prof, err = darwin.Compile(dp); err != nil {
			c.stopProxy()
			return seatbeltError(err)
		}
		env = mergeEnv(mergeEnv(env, proxyEnv(port)), c.sb.policy.Env)
	}
	cmd := prof.Command(ctx, c.Path, c.Args[1:]...)
	cmd.Env = mergeEnv(env, c.Env)
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	if sameWriter(c.Stdout, c.Stderr) {
		cmd.Stdout = c.leakStage("output", c.Stdout)
		cmd.Stderr = cmd.Stdout
	} else {
		cmd.Stdout, cmd.Stderr = c.leakStage("stdout", c.Stdout), c.leakStage("stderr", c.Stderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		c.armGrace()
		if c.Cancel != nil {
			return c.Cancel()
		}
		return c.Signal(syscall.SIGTERM)
	}
	cmd.WaitDelay = c.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = DefaultWaitDelay
	}
	c.cmd = cmd
	if err := cmd.Start(); err != nil {
		c.cmd = nil
		c.stopProxy()
		return err
	}
	return nil
}

// lookCommand finds the command as sandbox-exec's execvp will, on the
// same filesystem: a command that is missing or cannot be executed fails
// Start with the *SetupError it does on Linux (ErrNotFound,
// ErrCannotExec), not as sandbox-exec's exit status.
func lookCommand(name, dir string, env []string) error {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if errno := executable(p); errno != 0 {
			return newSetupError(LayerExec, nsinit.OpLookPath, name, errno.Error(), errno)
		}
		return nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if executable(filepath.Join(d, name)) == 0 {
			return nil
		}
	}
	return newSetupError(LayerExec, nsinit.OpLookPath, name, fmt.Sprintf("%q not found in PATH: %v", name, syscall.ENOENT), syscall.ENOENT)
}

// executable is 0 for a file this process may execute, or why not.
func executable(path string) syscall.Errno {
	fi, err := os.Stat(path)
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno
	case err != nil:
		return syscall.ENOENT
	case fi.IsDir():
		return syscall.EACCES // what execve says of a directory
	}
	if err := syscall.Access(path, 1 /* X_OK */); errors.As(err, &errno) {
		return errno
	}
	return 0
}

// startProxy serves this command's egress proxy on a localhost port.
func (c *Cmd) startProxy() (int, error) {
	px, err := netns.NewProxy(netns.ProxyConfig{Rules: c.sb.rules, AllowLocal: c.sb.policy.AllowLocal, OnEvent: func(e netns.Event) {
		c.netMu.Lock()
		c.netEvents = append(c.netEvents, e)
		c.netMu.Unlock()
	}})
	if err != nil {
		return 0, err
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	c.proxy = px
	go px.Serve(l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cmd) stopProxy() {
	if c.proxy != nil {
		c.proxy.Close()
	}
}

// Wait waits for the command and fills in Result.
func (c *Cmd) Wait() error {
	if c.cmd == nil {
		return errors.New("hutch: not started")
	}
	err := c.cmd.Wait()
	for _, finish := range c.finishes {
		if ferr := finish(); err == nil && ferr != nil {
			err = ferr
		}
	}
	c.mu.Lock()
	c.ended = true
	leakHit := c.leakHit
	if c.grace != nil {
		c.grace.Stop()
	}
	stopped := c.stopped
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.stopProxy()
	r := c.sb.result()
	r.Wall = time.Since(c.start)
	if st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		r.ExitCode = st.ExitStatus()
		if st.Signaled() {
			r.Signal, r.ExitCode = st.Signal(), -1
		}
	}
	var killErr error
	switch {
	case c.ctx.Err() != nil:
		r.Killed, r.KillReason, killErr = true, ctxKillReason(c.ctx), contextError(c.ctx)
	case c.runCtx.Err() != nil:
		r.Killed, r.KillReason, killErr = true, KilledTimeout, ErrTimeout
	case leakHit:
		r.Killed, r.KillReason = true, KilledLeak
	case stopped:
		r.Killed, r.KillReason = true, KilledStopped
	}
	r.Leaks, r.LeaksDropped = c.leaks.result()
	c.netMu.Lock()
	r.NetworkEvents = c.netEvents
	c.netMu.Unlock()
	c.Result = r
	var ee *exec.ExitError
	var ioErr error
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		ioErr = ErrWaitDelay
	case err != nil && !errors.As(err, &ee):
		ioErr = fmt.Errorf("hutch: %w", err)
	}
	if !r.Success() || r.Killed {
		return &ExitError{Result: r, killErr: killErr, ioErr: ioErr}
	}
	return ioErr
}

// Signal sends sig to the command's process group. It returns
// os.ErrProcessDone once Wait saw the command end.
func (c *Cmd) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("hutch: signal %v cannot be sent", sig)
	}
	if c.cmd == nil || c.cmd.Process == nil {
		return errors.New("hutch: command not started")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return os.ErrProcessDone
	}
	return syscall.Kill(-c.cmd.Process.Pid, s)
}

// Stop sends sig (SIGTERM if nil) to the command's process group and
// SIGKILL WaitDelay later if it still runs.
func (c *Cmd) Stop(sig os.Signal) error {
	if sig == nil {
		sig = syscall.SIGTERM
	}
	// Marked first: the command may end as soon as the signal is out.
	c.mu.Lock()
	c.stopped = !c.ended
	c.mu.Unlock()
	if err := c.Signal(sig); err != nil {
		return err
	}
	c.armGrace()
	return nil
}

// armGrace kills the command's process group WaitDelay from now (os/exec's
// own kill reaches only the process).
func (c *Cmd) armGrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.grace == nil && !c.ended {
		c.grace = time.AfterFunc(c.cmd.WaitDelay, func() { _ = c.Signal(syscall.SIGKILL) })
	}
}

// Pid returns the command's process id once Start has returned; 0 before
// that and once Wait has seen the command end.
func (c *Cmd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil || c.ended {
		return 0
	}
	return c.cmd.Process.Pid
}

// leakStage is dst behind the policy's leak scanning, nil for nil (the
// command's output then goes to the null device, unscanned: nobody
// receives it).
func (c *Cmd) leakStage(name string, dst io.Writer) io.Writer {
	if dst == nil {
		return nil
	}
	// Without a copier of its own here, a secret held back (at the end of
	// what the command wrote so far) kills the command once it settles:
	// when more output comes, or at its end.
	w, finish, _ := leakStage(c.sb.leaks, c.sb.policy.Leaks, dst, func(f leaks.Finding) {
		c.leaks.add(name, f)
		if c.sb.policy.Leaks == LeaksKill {
			c.mu.Lock()
			c.leakHit = true
			c.mu.Unlock()
			c.Signal(syscall.SIGKILL)
		}
	})
	c.finishes = append(c.finishes, finish)
	return w
}

// NewResolved makes the Sandbox of a decision taken before (see the Linux
// doc): macOS has one level, Seatbelt, and a decision at another is
// refused with a *LevelError before anything is made.
func NewResolved(r *Resolved) (*Sandbox, error) {
	if r.level != LevelSeatbelt {
		return nil, &LevelError{Need: r.level, Have: LevelSeatbelt, Reasons: []string{"macOS has the Seatbelt level only"}}
	}
	return New(r.policy)
}

// Published reports no ports: Publish is refused on macOS.
func (sb *Sandbox) Published() []Publish { return nil }
