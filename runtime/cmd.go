//go:build linux

package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/leaks"
	"github.com/hutchbox/hutch/nsinit"
)

// setupError is the init's report of a failed step, as the caller sees it.
func setupError(e *nsinit.SetupError) *SetupError {
	return newSetupError(e.Layer, e.Op, e.Path, e.Msg, syscall.Errno(e.Errno))
}

// cmdState is the part of a Cmd that Linux's commands need: the init
// that runs it, its stdio copies, and how it is being ended.
type cmdState struct {
	// home is the Sandbox the command was made in, which Start may have
	// replaced with the one in effect (Reload) or one for its Grant: its
	// Close waits for the command's teardown.
	home *Sandbox

	start   time.Time
	fsStart time.Time // start as filesystems stamp files, for Repositories
	startup time.Duration
	in      *sandboxInit
	copiers sync.WaitGroup
	closers []io.Closer
	// pipes are the caller's ends of StdinPipe, StdoutPipe and
	// StderrPipe, closed by Wait (or a failed Start).
	pipes    []io.Closer
	started  nsinit.Event
	output   *limiter
	leaks    leakLog
	reported *reportScanner // the refusals its stderr names (DenialFile); nil when none are read
	stopCtx  func() bool
	timer    *time.Timer
	refill   *time.Timer // the pool's refill, if the command runs on
	finished bool

	mu      sync.Mutex
	running bool // the init reported the command started
	// sent: the command was handed to its init, which starts it at once
	// and holds a signal until the command exists to pass it to (so sent
	// holds whenever running does).
	sent     bool
	limitHit bool      // output went past the limit
	leakHit  bool      // output held a secret under LeaksKill
	plain    *plainCmd // the process of an unsandboxed command
	hostPid  int       // the command's pid on the host, once Pid found it
	// reason is why hutch ends the command (the first one given);
	// killErr what its ExitError then wraps for errors.Is: the context's
	// error or ErrTimeout.
	reason  KillReason
	killErr error
	// killed: the SIGKILL of the sandbox went out. signalled: a graceful
	// stop (Cancel or Stop) reached the command, whose own end is then
	// hutch's doing. ended: Wait saw the command's end; no signal may
	// follow. grace is the SIGKILL that ends a graceful stop.
	killed    bool
	signalled bool
	ended     bool
	grace     *time.Timer
	// ioErr is the first error copying the command's stdio.
	ioErr error
}

// checkCmd validates the per-command fields and resolves Dir.
func (c *Cmd) check() error {
	if c.sb == nil {
		return errors.New("hutch: Cmd not made by Sandbox.Command")
	}
	if c.Path == "" {
		return &PolicyError{Field: "Cmd.Path", Reason: "empty command"}
	}
	if len(c.Args) == 0 {
		c.Args = []string{c.Path}
	}
	for i, a := range c.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return &PolicyError{Field: fmt.Sprintf("Cmd.Args[%d]", i), Value: a, Reason: "contains a NUL byte"}
		}
	}
	if strings.IndexByte(c.Path, 0) >= 0 {
		return &PolicyError{Field: "Cmd.Path", Value: c.Path, Reason: "contains a NUL byte"}
	}
	if err := checkEnv("Cmd.Env", c.Env); err != nil {
		return err
	}
	if err := checkWaitDelay(c.WaitDelay); err != nil {
		return err
	}
	if c.Explain && c.sb.policy.Denials == DenialsOff {
		return &PolicyError{Field: "Cmd.Explain", Reason: "explains the recorded denials, and the Sandbox's Denials is off"}
	}
	dir, err := workDir(c.Dir, c.sb.spec.Workspace, c.sb.spec.Writable)
	if err != nil {
		return err
	}
	c.Dir = dir
	return nil
}

// testHookStart, when a test sets it, runs at named points of Start:
// "init" before the command's init is taken or made, "send" before the
// command is handed to it, "sent" after. Tests use it to land a kill or a
// signal at a known point.
var testHookStart func(stage string, c *Cmd)

// Start starts the command and returns once it runs in its sandbox, or
// with the reason it could not: a *PolicyError for bad input (nothing was
// started), a *SetupError for a layer that failed or a command that
// errors.Is reports as ErrNotFound or ErrCannotExec, ErrClosed for a
// closed Sandbox. When the context or Policy.Timeout ended the command
// before it started (or its sandbox died), Start returns the kill as Wait
// would: an *ExitError that errors.Is matches the context's error,
// ErrTimeout or ErrSandboxDied. Either way Result is set once Start
// returns an error; do not call Wait then.
func (c *Cmd) Start() error {
	if c.startCalled {
		return errors.New("hutch: already started")
	}
	c.startCalled = true
	c.start = time.Now()
	if c.ctx == nil {
		return c.notStarted(errors.New("hutch: nil Context"))
	}
	if err := c.check(); err != nil {
		return c.notStarted(err)
	}
	// The Sandbox in effect (Reload may have replaced this one), and a
	// grant runs the command in one with it added, once checked against
	// the Grantable; nothing starts when it is refused. Its life is held
	// until Start returns, so that Close waits for a command being set
	// up rather than tearing the Sandbox down under it.
	sb, unlock, err := c.sb.startIn(c.Grant)
	if err != nil {
		return c.notStarted(err)
	}
	defer unlock()
	c.home, c.sb = c.sb, sb
	if sb.policy.Unsandboxed {
		return c.startUnsandboxed()
	}
	if err := checkLeaksIn(sb.leaks, "Cmd.Env", c.Args, c.Env); err != nil {
		return c.notStarted(err)
	}
	if err := c.ctx.Err(); err != nil {
		c.kill(ctxKillReason(c.ctx), contextError(c.ctx))
		return c.notStarted(err)
	}
	c.fsStart = fsNow()
	path := c.Path
	// The timeout counts from here: setting the sandbox up is part of the
	// command's time, and a kill that lands before there is an init is
	// carried out as soon as there is one.
	c.watch()

	// Every pipe end here is O_CLOEXEC; the child ends travel to the init
	// by SCM_RIGHTS and are closed here once sent.
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	fail := func(err error) error {
		for _, cl := range c.closers {
			cl.Close()
		}
		c.closers = nil
		return c.notStarted(err)
	}
	// The resolved policy holds the limit itself, default filled in, or
	// Unlimited.
	limit := c.sb.policy.OutputLimit
	c.output = &limiter{left: limit, unlimited: limit == Unlimited, onExceed: c.outputExceeded}
	c.reported = c.sb.reportedFor()

	stdin, nullIn, err := c.stdinFile()
	if err != nil {
		return fail(err)
	}
	if !nullIn {
		childEnds = append(childEnds, stdin)
	}
	shared := sameWriter(c.Stdout, c.Stderr)
	stdoutName := "stdout"
	if shared {
		stdoutName = "output"
	}
	stdout, err := c.outputFile(stdoutName, c.Stdout)
	if err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdout)
	stderr := stdout
	if !shared {
		if stderr, err = c.outputFile("stderr", c.Stderr); err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, stderr)
	}

	if testHookStart != nil {
		testHookStart("init", c)
	}
	in, err := c.sb.takeInit()
	if err != nil {
		// The copiers wait for EOF on pipes whose write ends are only
		// ours: closing them (deferred) ends the copiers.
		for _, f := range childEnds {
			f.Close()
		}
		childEnds = nil
		c.copiers.Wait()
		return fail(err)
	}
	c.mu.Lock()
	c.in = in
	killed := c.killed
	c.mu.Unlock()
	if killed {
		// The kill landed while the init was being made: the command is
		// never handed to it (an init quicker than its SIGKILL would
		// start it).
		in.kill()
		for _, f := range childEnds {
			f.Close()
		}
		childEnds = nil
		return c.notStarted(c.abort())
	}
	if testHookStart != nil {
		testHookStart("send", c)
	}
	err = in.send(nsinit.Command{Path: path, Args: c.Args, Env: mergeEnv(c.sb.env, c.Env), Dir: c.Dir, Roots: c.sb.dirRoots(), Refused: cwdRefused}, [3]*os.File{stdin, stdout, stderr})
	for _, f := range childEnds {
		f.Close()
	}
	childEnds = nil
	if err == nil {
		c.mu.Lock()
		c.sent = true
		c.mu.Unlock()
		if testHookStart != nil {
			testHookStart("sent", c)
		}
	}
	if err != nil {
		// The init is gone; it may have said why.
		for ev := range in.events {
			if ev.Kind == nsinit.EventError && ev.Error != nil {
				c.abort()
				return c.notStarted(setupError(ev.Error))
			}
		}
		return c.notStarted(c.abort())
	}

	for {
		ev, ok := <-in.events
		switch {
		case ok && ev.Kind == nsinit.EventReady:
			continue
		case ok && ev.Kind == nsinit.EventStarted:
			c.started = ev
			if len(ev.Phases) > 0 && ev.Phases[0].Name == nsinit.FirstPhase {
				p := &c.started.Phases[0]
				p.Name, p.Nanos, p.Start = "spawn", p.Start-in.spawnAt, in.spawnAt
			}
			c.startup = time.Since(c.start)
			c.home.ingressRunning(in)
			c.mu.Lock()
			c.running = true
			limitHit, leakHit := c.limitHit, c.leakHit
			c.mu.Unlock()
			switch {
			case limitHit:
				c.kill(KilledOutputLimit, nil)
			case leakHit:
				c.kill(KilledLeak, nil)
			}
			if c.sb.pool != nil {
				// The refill waits for the command's end, which comes
				// first for most commands; one that runs on gets it
				// beside it after refillAfter.
				c.refill = time.AfterFunc(refillAfter, c.sb.pool.refill)
			}
			return nil
		case ok && ev.Kind == nsinit.EventError && ev.Error != nil:
			c.abort()
			return c.notStarted(setupError(ev.Error))
		default:
			// The init died before the command started: hutch's kill,
			// or something else's.
			return c.notStarted(c.abort())
		}
	}
}

// notStarted records the Result of a Start that did not start the
// command and returns what Start returns: the kill, as an *ExitError, when
// hutch killed the command before it started or its sandbox died under
// it (err then matches ErrSandboxDied); err otherwise. A kill wins over
// err: a timeout is a timeout wherever it lands.
func (c *Cmd) notStarted(err error) error {
	c.closePipes()
	c.stopWatch()
	c.refillPool()
	c.mu.Lock()
	c.ended = true // no kill after this point: c.reason is final
	reason, killErr := c.reason, c.killErr
	c.mu.Unlock()
	r := &Result{ExitCode: -1}
	if !c.start.IsZero() {
		r.Wall = time.Since(c.start)
	}
	if c.sb != nil {
		c.sb.describe(r, nil)
		r.Prewarmed = c.in != nil && c.in.pooled
	}
	c.Result = r
	switch {
	case reason != "":
		r.KillReason = reason
	case errors.Is(err, ErrSandboxDied):
		r.KillReason, killErr = KilledSandboxDied, err
	default:
		r.Error = strings.TrimPrefix(err.Error(), "hutch: ")
		return err
	}
	// The sandbox's init, when there was one, died of SIGKILL and took
	// everything in it along; when there was none yet, hutch reports the
	// kill all the same.
	r.Signal, r.Killed = syscall.SIGKILL, true
	r.Reason = string(r.KillReason)
	if r.KillReason == KilledSandboxDied {
		r.Reason = killErr.Error()
	}
	return &ExitError{Result: r, killErr: killErr}
}

// initExitWait bounds Wait's wait for an init that reported its
// command's end to exit itself.
const initExitWait = time.Second

// refillAfter is how long a command runs before the pool's refill
// starts beside it: the agent's usual command (ls, cat, git status) is
// over by then, and its refill comes after it instead of competing with
// it for the CPU.
var refillAfter = 100 * time.Millisecond

// refillPool refills the pool once the command has ended (or never ran),
// unless its timer did already: after refillSettle, so that a command
// issued right after this one starts first.
func (c *Cmd) refillPool() {
	if c.refill != nil {
		c.refill.Stop()
	}
	if c.sb != nil && c.sb.pool != nil {
		c.sb.pool.refillSoon()
	}
}

// leakFound records a secret found in the command's output stream, and
// under LeaksKill kills the command.
func (c *Cmd) leakFound(stream string, f leaks.Finding) {
	c.leaks.add(stream, f)
	if c.sb.policy.Leaks == LeaksKill {
		c.killForOutput(KilledLeak, &c.leakHit)
	}
}

// outputExceeded kills the command for the amount of its output.
func (c *Cmd) outputExceeded() { c.killForOutput(KilledOutputLimit, &c.limitHit) }

// killForOutput kills the command for what it wrote, recording hit (under
// c.mu). Output can outrun the init's "started" report; the kill then
// waits for it, so that a command that did start always ends with a
// Result.
func (c *Cmd) killForOutput(reason KillReason, hit *bool) {
	c.mu.Lock()
	running := c.running
	*hit = true
	c.mu.Unlock()
	if running {
		c.kill(reason, nil)
	}
}

// describe fills in what the Sandbox knows of every command's run: its
// level and what that leaves unenforced, its network mode, and the layers
// the host made it skip. g is the command's cgroup, nil without one.
func (sb *Sandbox) describe(r *Result, g *cgroups.Group) {
	r.Level, r.Backend, r.Network, r.LeakAction = sb.level, sb.level.Backend(), sb.policy.Network, sb.policy.Leaks
	if sb.level == LevelUnsandboxed {
		r.Unsandboxed, r.Network, r.Unenforced, r.LeakAction = true, NetworkHost, []string{unsandboxedNote}, ""
		return
	}
	r.Nested = sb.policy.AllowNested
	var groupLines []string
	if g != nil {
		groupLines = g.Unenforced()
	} else {
		groupLines = sb.cgroupUnenforced
	}
	r.Unenforced = append(sb.unenforced(), sb.limitsUnenforced(groupLines)...)
	if !slices.Contains(r.Layers, LayerLandlock) && sb.landlockSkip != "" {
		r.Skipped = append(slices.Clone(r.Skipped), Skipped{Layer: LayerLandlock, Reason: sb.landlockSkip})
	}
	if g == nil && sb.cgroupSkip != "" {
		r.Skipped = append(slices.Clone(r.Skipped), Skipped{Layer: LayerCgroup, Reason: sb.cgroupSkip})
	}
}

// abort kills a sandbox that failed to start and releases everything. It
// returns how the init died when hutch did not kill it (an error matching
// ErrSandboxDied), or nil.
func (c *Cmd) abort() error {
	c.kill("", nil)
	ws, werr := c.in.wait()
	for range c.in.events {
	}
	c.copiers.Wait()
	c.stopWatch()
	for _, cl := range c.closers {
		cl.Close()
	}
	c.closers = nil
	c.in.close()
	c.mu.Lock()
	reason := c.reason
	c.mu.Unlock()
	if reason != "" {
		return nil // hutch's kill: notStarted reports it
	}
	return sandboxDied(ws, werr)
}

// sandboxDied says how a sandbox init that hutch did not kill died: its
// wait status, or the spawn server's end (werr).
func sandboxDied(ws syscall.WaitStatus, werr error) error {
	switch {
	case werr != nil:
		return fmt.Errorf("%w: %w", ErrSandboxDied, werr)
	case ws.Signaled():
		return fmt.Errorf("%w: killed by %s from outside hutch", ErrSandboxDied, signalName(ws.Signal()))
	}
	return fmt.Errorf("%w: it exited with status %d before the command ended", ErrSandboxDied, ws.ExitStatus())
}

// watch arranges for the timeout and the context to stop the command.
func (c *Cmd) watch() {
	c.stopCtx = context.AfterFunc(c.ctx, func() {
		c.cancel(ctxKillReason(c.ctx), contextError(c.ctx))
	})
	if t := c.sb.policy.Timeout; t > 0 {
		c.timer = time.AfterFunc(t, func() { c.cancel(KilledTimeout, ErrTimeout) })
	}
}

func (c *Cmd) stopWatch() {
	if c.stopCtx != nil {
		c.stopCtx()
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Lock()
	if c.grace != nil {
		c.grace.Stop()
	}
	c.mu.Unlock()
}

// kill ends the whole sandbox: SIGKILL to its init empties the pid
// namespace. The first reason given is the one reported; err is what the
// command's ExitError then wraps. A kill before the init exists is
// carried out by Start as soon as it does.
func (c *Cmd) kill(reason KillReason, err error) {
	c.mu.Lock()
	if c.killed || c.ended {
		c.mu.Unlock()
		return
	}
	c.killed = true
	if c.reason == "" {
		c.reason, c.killErr = reason, err
	}
	in := c.in
	c.mu.Unlock()
	if in != nil {
		in.kill()
	}
}

// Wait waits for the command and everything it started to end, and for its
// output to be copied. It returns an *ExitError unless the command exited 0;
// when hutch killed the command for its context or Policy.Timeout, that
// error wraps the context's error or ErrTimeout.
func (c *Cmd) Wait() error {
	if c.finished {
		return errors.New("hutch: Wait was already called")
	}
	if c.plain != nil && c.Result == nil {
		c.finished = true
		return c.waitUnsandboxed()
	}
	if c.in == nil || c.Result != nil { // a failed Start left a Result
		return errors.New("hutch: not started")
	}
	c.finished = true
	// The init reports "exited" only once it has killed and reaped
	// everything else in the sandbox's pid namespace: from that event on,
	// nothing the command started is alive, and the init's own exit (the
	// namespaces' teardown) need not be waited for. Without the event
	// (hutch's kill, or the server gone) the init's reaping is the proof.
	var exited *nsinit.Event
	for ev := range c.in.events {
		if ev.Kind == nsinit.EventExited {
			e := ev
			exited = &e
			break
		}
	}
	var (
		ws   syscall.WaitStatus
		werr error
	)
	if exited == nil {
		ws, werr = c.in.wait()
	}
	c.home.ingressEnded(c.in)
	// The command has ended: no signal or kill from here on.
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.stopWatch()
	ioErr := c.waitCopies()
	for _, cl := range c.closers {
		cl.Close()
	}
	c.closers = nil
	c.closePipes()

	r := &Result{
		Wall:       time.Since(c.start),
		Startup:    c.startup,
		Layers:     c.started.Layers,
		Phases:     c.started.Phases,
		Skipped:    c.started.Skipped,
		Truncated:  c.output.truncated(),
		Prewarmed:  c.in.pooled,
		LeakAction: c.sb.policy.Leaks,

		UnixSocketWall: c.started.UnixWall,
	}
	if slices.Contains(r.Layers, LayerSeccomp) {
		r.SeccompProfile = c.sb.filterName
	}
	r.Leaks, r.LeaksDropped = c.leaks.result()
	r.NetworkEvents = c.in.networkEvents()
	if c.in.denied != nil {
		c.in.proxyDenials(r.NetworkEvents)
	}
	c.judgeReported()
	r.Denials, r.DenialsDropped = c.in.denied.result()
	r.Published, r.Ingress = c.home.Published(), c.in.ingress.recorded()
	// Everything the command started is dead: what it left is final.
	if _, now, err := c.sb.treesNow(); err == nil {
		r.Repositories = repoChanges(c.sb.repos(c.in.fresh), now, c.fsStart)
	}
	r.TreesWalked = c.sb.treesWalked()
	if slices.Contains(r.Layers, LayerLandlock) {
		r.LandlockABI = c.sb.landlock.ABI
	}
	g := c.in.group
	if g != nil {
		r.Layers = append(r.Layers, LayerCgroup)
		r.Cgroup = c.sb.cgroups.Layout().String()
		if u, err := g.Usage(); err == nil {
			r.Usage = &u
		}
	}
	c.sb.describe(r, g)
	c.mu.Lock()
	reason, killErr, signalled := c.reason, c.killErr, c.signalled
	c.mu.Unlock()
	if exited != nil {
		r.ExitCode, r.Signal = exited.ExitCode, syscall.Signal(exited.Signal)
		// After a graceful stop reached it, the command's end is hutch's
		// doing, whatever status it chose; otherwise it ended on its own,
		// even if a kill was on its way.
		if signalled && reason != "" {
			r.Killed, r.KillReason = true, reason
		}
	} else {
		// The init died before it could report the command's end, and
		// the pid namespace's end killed the command: hutch's kill, or
		// the init's death by other hands (or its spawn server's).
		r.ExitCode, r.Signal, r.Killed = -1, syscall.SIGKILL, true
		r.KillReason = reason
		if reason == "" {
			killErr = sandboxDied(ws, werr)
			r.KillReason, r.Reason = KilledSandboxDied, killErr.Error()
		}
	}
	switch {
	case r.Usage != nil && r.Usage.OOMKills > 0:
		r.Reason = fmt.Sprintf("memory limit of %s exceeded (OOM kill)", units.FormatSize(c.sb.policy.Memory))
	case r.Killed && r.Reason == "":
		r.Reason = string(r.KillReason)
	}
	c.Result = r
	// The init's own end (its namespaces' teardown) and the removal of
	// the group the command was charged to happen off the caller's path:
	// the Result is final, and nothing of the command is alive. Close
	// waits for them, so that nothing stays on the host once it returns
	// (a CLI run closes its Sandbox and exits right after).
	c.home.ending(c.in, g, exited != nil)
	c.refillPool()
	if c.sb.pool == nil {
		c.sb.rulesets.makeNext()
	}
	c.explainRefusals(r)
	if !r.Success() || r.Killed {
		ee := &ExitError{Result: r, ioErr: ioErr}
		if r.Killed {
			ee.killErr = killErr
		}
		return ee
	}
	return ioErr
}

// stdinFile is the command's stdin: /dev/null, or a pipe fed from Stdin.
// The command never gets an fd to a host file, only to a pipe or
// /dev/null, so /proc/self/fd/0 reopens nothing of the host's. The
// /dev/null is every command's (null is set): it must not be closed.
func (c *Cmd) stdinFile() (f *os.File, null bool, err error) {
	if c.Stdin == nil {
		f, err := nullStdin()
		return f, true, err
	}
	w, r, err := commandPipe(false)
	if err != nil {
		return nil, false, err
	}
	c.closers = append(c.closers, w)
	go func() {
		// Only the host's reader can fail in a way the caller needs to
		// hear of: writes fail once the command stops reading (EPIPE), or
		// once Wait closed the pipe, and that is the command's business.
		// The error is kept before the close, so that it is there when
		// the command, seeing EOF, ends.
		_, err := io.Copy(w, readerFunc(func(p []byte) (int, error) {
			n, err := c.Stdin.Read(p)
			if err != nil && err != io.EOF {
				c.copyFailed(fmt.Errorf("hutch: copying Stdin: %w", err))
			}
			return n, err
		}))
		w.Close()
		if in, ok := c.Stdin.(*stdinPipe); ok {
			// The command stopped reading: the caller's writes fail, as
			// they would on a pipe to it, instead of blocking.
			in.r.CloseWithError(cmp.Or(err, io.ErrClosedPipe))
		}
	}()
	return r, false, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// outputFile is the write end handed to the command for one of its output
// streams (named for Result.Leaks); a goroutine copies from the read end
// to dst through the leak scanner and the command's output limit.
func (c *Cmd) outputFile(name string, dst io.Writer) (*os.File, error) {
	if dst == nil {
		dst = io.Discard
	}
	r, w, err := commandPipe(true)
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, r)
	c.copiers.Add(1)
	out, finish, held := leakStage(c.sb.leaks, c.sb.policy.Leaks, c.output.writer(dst), func(f leaks.Finding) { c.leakFound(name, f) })
	out = c.scanReported(name, out)
	go func() {
		defer c.copiers.Done()
		var paused func()
		if held != nil {
			paused = func() {
				if held() {
					c.killForOutput(KilledLeak, &c.leakHit)
				}
			}
		}
		err := copyOutput(out, r, paused)
		if ferr := finish(); err == nil {
			err = ferr
		}
		if p, ok := dst.(*outputPipe); ok {
			// StdoutPipe's reader sees EOF (or the copy's error) now, as
			// a pipe from the command would, before Wait.
			p.w.CloseWithError(err)
		}
		if err != nil {
			// dst failed (a pipe whose reader is gone: hutch run ... |
			// head): close the command's pipe too, so that it gets EPIPE
			// or SIGPIPE as in a shell pipeline, instead of running on
			// with nobody reading.
			r.Close()
			c.copyFailed(fmt.Errorf("hutch: copying the command's output: %w", err))
		}
	}()
	return w, nil
}

// limiter counts output across a command's streams and truncates it at
// the limit. Past the limit, output is drained and dropped so the command
// never blocks on a full pipe, and onExceed runs once.
type limiter struct {
	mu        sync.Mutex
	wmu       sync.Mutex // held while writing to a destination
	left      int64
	unlimited bool
	over      bool
	onExceed  func()
}

func (l *limiter) truncated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over
}

type limitedWriter struct {
	l   *limiter
	dst io.Writer
}

func (l *limiter) writer(dst io.Writer) io.Writer {
	return &limitedWriter{l: l, dst: dst}
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	l := w.l
	l.mu.Lock()
	n := int64(len(p))
	exceeded := false
	if !l.unlimited {
		if n > l.left {
			n = l.left
			if !l.over {
				l.over, exceeded = true, true
			}
		}
		l.left -= n
	}
	l.mu.Unlock()
	// Writes to dst are serialized: the two streams may share one writer
	// (CombinedOutput), which need not be safe for concurrent use. They
	// happen outside mu, which Wait takes even when a writer is stuck.
	var err error
	if _, own := w.dst.(*outputPipe); own && n > 0 {
		// A pipe of its own (StdoutPipe, StderrPipe), read at the
		// caller's pace: a stream whose reader waits must not hold up
		// the other's writes.
		_, err = w.dst.Write(p[:n])
	} else if n > 0 {
		l.wmu.Lock()
		_, err = w.dst.Write(p[:n])
		l.wmu.Unlock()
	}
	if exceeded {
		l.onExceed()
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
