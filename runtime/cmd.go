//go:build linux

package runtime

import (
	"bytes"
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

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/nsinit"
)

// setupError is the init's report of a failed step, as the caller sees it.
func setupError(e *nsinit.SetupError) *SetupError {
	return newSetupError(e.Layer, e.Op, e.Path, e.Msg, syscall.Errno(e.Errno))
}

// Cmd is a command to run in a Sandbox, used like exec.Cmd.
type Cmd struct {
	// Path is the command: absolute, or looked up in PATH inside the
	// sandbox.
	Path string
	// Args holds the command line, including the command as Args[0].
	Args []string
	// Env are KEY=VALUE pairs added to the sandbox's environment.
	Env []string
	// Dir is the working directory: relative to the workspace, or
	// absolute; empty means the workspace. With symlinks resolved it must
	// lie in the workspace or a writable path, or Start refuses it; Start
	// sets it to the resolved path.
	Dir string

	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	// Result is set once Wait returns, also on failure.
	Result *Result

	sb  *Sandbox
	ctx context.Context

	start    time.Time
	fsStart  time.Time // start as filesystems stamp files, for Repositories
	startup  time.Duration
	in       *sandboxInit
	copiers  sync.WaitGroup
	closers  []io.Closer
	started  nsinit.Event
	killOnce sync.Once
	reason   KillReason
	killErr  error // why, for errors.Is: the context's error or ErrTimeout
	output   *limiter
	stopCtx  func() bool
	timer    *time.Timer
	finished bool

	mu          sync.Mutex
	running     bool // the init reported the command started
	limitHit    bool // output went past the limit
	startFailed bool
}

// Command returns a Cmd that runs name with args in the sandbox. ctx kills
// the whole command (everything it started) when done.
func (sb *Sandbox) Command(ctx context.Context, name string, args ...string) *Cmd {
	return &Cmd{Path: name, Args: append([]string{name}, args...), sb: sb, ctx: ctx}
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("hutch: Stdout already set")
	}
	var out, errb bytes.Buffer
	c.Stdout = &out
	captureErr := c.Stderr == nil
	if captureErr {
		c.Stderr = &errb
	}
	err := c.Run()
	var ee *ExitError
	if captureErr && errors.As(err, &ee) {
		ee.Stderr = errb.Bytes()
	}
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns stdout and stderr together.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("hutch: Stdout or Stderr already set")
	}
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
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
	dir, err := workDir(c.Dir, c.sb.spec.Workspace, c.sb.spec.Writable)
	if err != nil {
		return err
	}
	c.Dir = dir
	return nil
}

// Start starts the command and returns once it runs in its sandbox, or
// with the reason it could not: a *PolicyError for bad input (nothing was
// started), a *SetupError for a layer that failed or a command that
// errors.Is reports as ErrNotFound or ErrCannotExec; the context's error
// (errors.Is) when it ended first.
func (c *Cmd) Start() error {
	if c.in != nil {
		return errors.New("hutch: already started")
	}
	if c.ctx == nil {
		return errors.New("hutch: nil Context")
	}
	if err := c.check(); err != nil {
		return err
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	c.start, c.fsStart = time.Now(), fsNow()
	path := c.Path

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
		return err
	}
	limit := c.sb.policy.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	c.output = &limiter{left: limit, unlimited: limit < 0, onExceed: c.outputExceeded}

	stdin, err := c.stdinFile()
	if err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdin)
	stdout, err := c.outputFile(c.Stdout)
	if err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdout)
	stderr := stdout
	if !sameWriter(c.Stdout, c.Stderr) {
		if stderr, err = c.outputFile(c.Stderr); err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, stderr)
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
	c.in = in
	err = in.send(nsinit.Command{Path: path, Args: c.Args, Env: mergeEnv(c.sb.env, c.Env), Dir: c.Dir, Roots: c.sb.roots()}, [3]*os.File{stdin, stdout, stderr})
	for _, f := range childEnds {
		f.Close()
	}
	childEnds = nil
	c.watch()
	if err != nil {
		// The init is gone; it may have said why.
		for ev := range in.events {
			if ev.Kind == nsinit.EventError && ev.Error != nil {
				c.abort()
				return setupError(ev.Error)
			}
		}
		c.abort()
		return fmt.Errorf("hutch: hand the command to its sandbox: %w", err)
	}

	for {
		ev, ok := <-in.events
		switch {
		case ok && ev.Kind == nsinit.EventReady:
			continue
		case ok && ev.Kind == nsinit.EventStarted:
			c.started = ev
			if len(ev.Phases) > 0 && ev.Phases[0].Name == "go-runtime-start" {
				p := &c.started.Phases[0]
				p.Name, p.Nanos, p.Start = "spawn", p.Start-in.spawnAt, in.spawnAt
			}
			c.startup = time.Since(c.start)
			c.mu.Lock()
			c.running = true
			pending := c.limitHit
			c.mu.Unlock()
			if pending {
				c.kill(KilledOutputLimit, nil)
			}
			if c.sb.pool != nil {
				c.sb.pool.refill()
			}
			return nil
		case ok && ev.Kind == nsinit.EventError && ev.Error != nil:
			c.abort()
			return setupError(ev.Error)
		default:
			c.abort()
			if c.killErr != nil {
				return fmt.Errorf("hutch: killed before start: %w", c.killErr)
			}
			if c.reason != "" {
				return fmt.Errorf("hutch: killed before start: %s", c.reason)
			}
			return errors.New("hutch: sandbox init exited before starting the command")
		}
	}
}

// cloneflags are the namespaces a Sandbox's commands get: all of them, or
// none at LevelLandlock.
func (sb *Sandbox) cloneflags() uintptr {
	switch {
	case sb.level == LevelLandlock:
		return 0
	case sb.policy.Network == NetworkHost:
		return cloneflags &^ unix.CLONE_NEWNET
	}
	return cloneflags
}

// cloneflags are the namespaces every command gets.
const cloneflags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// outputExceeded kills the command for its output. Output can outrun the
// init's "started" report; the kill then waits for it, so that a command
// that did start always ends with a Result.
func (c *Cmd) outputExceeded() {
	c.mu.Lock()
	running := c.running
	c.limitHit = true
	c.mu.Unlock()
	if running {
		c.kill(KilledOutputLimit, nil)
	}
}

// abort kills a sandbox that failed to start and releases everything.
func (c *Cmd) abort() {
	c.startFailed = true
	c.kill("", nil)
	_, _ = c.in.proc.Wait()
	for range c.in.events {
	}
	c.copiers.Wait()
	c.stopWatch()
	for _, cl := range c.closers {
		cl.Close()
	}
	c.closers = nil
	c.in.close()
}

// watch arranges for the timeout and the context to kill the command.
func (c *Cmd) watch() {
	c.stopCtx = context.AfterFunc(c.ctx, func() {
		if errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
			c.kill(KilledTimeout, contextError(c.ctx))
		} else {
			c.kill(KilledCanceled, contextError(c.ctx))
		}
	})
	if t := c.sb.policy.Timeout; t > 0 {
		c.timer = time.AfterFunc(t, func() { c.kill(KilledTimeout, ErrTimeout) })
	}
}

func (c *Cmd) stopWatch() {
	if c.stopCtx != nil {
		c.stopCtx()
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}

// kill ends the whole sandbox: SIGKILL to its init empties the pid
// namespace. The first reason given is the one reported; err is what the
// command's ExitError then wraps.
func (c *Cmd) kill(reason KillReason, err error) {
	c.killOnce.Do(func() {
		c.reason, c.killErr = reason, err
		c.in.kill()
	})
}

// Wait waits for the command and everything it started to end, and for its
// output to be copied. It returns an *ExitError unless the command exited 0;
// when hutch killed the command for its context or Policy.Timeout, that
// error wraps the context's error or ErrTimeout.
func (c *Cmd) Wait() error {
	if c.in == nil || c.startFailed {
		return errors.New("hutch: not started")
	}
	if c.finished {
		return errors.New("hutch: Wait was already called")
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
	var werr error
	if exited == nil {
		_, werr = c.in.proc.Wait()
	}
	c.copiers.Wait()
	c.stopWatch()
	for _, cl := range c.closers {
		cl.Close()
	}
	c.closers = nil

	r := &Result{
		Wall:      time.Since(c.start),
		Startup:   c.startup,
		Layers:    c.started.Layers,
		Phases:    c.started.Phases,
		Skipped:   c.started.Skipped,
		Truncated: c.output.truncated(),
		Prewarmed: c.in.pooled,

		UnixSocketWall: c.started.UnixWall,
	}
	if slices.Contains(r.Layers, LayerSeccomp) {
		r.SeccompProfile = c.sb.filterName
	}
	r.Level, r.Unenforced, r.Network = c.sb.level, c.sb.unenforced(), c.sb.policy.Network
	r.NetworkEvents = c.in.networkEvents()
	// Everything the command started is dead: what it left is final.
	r.Repositories = repoChanges(c.sb.roots(), c.sb.repos(c.in.fresh), c.fsStart)
	if slices.Contains(r.Layers, LayerLandlock) {
		r.LandlockABI = c.sb.landlock.ABI
	} else if c.sb.landlockSkip != "" {
		r.Skipped = append(slices.Clone(r.Skipped), Skipped{Layer: LayerLandlock, Reason: c.sb.landlockSkip})
	}
	if g := c.in.group; g != nil {
		r.Layers = append(r.Layers, LayerCgroup)
		r.Cgroup = c.sb.cgroups.Layout().String()
		if u, err := g.Usage(); err == nil {
			r.Usage = &u
		}
	} else if c.sb.cgroupSkip != "" {
		r.Skipped = append(slices.Clone(r.Skipped), Skipped{Layer: LayerCgroup, Reason: c.sb.cgroupSkip})
	}
	c.killOnce.Do(func() {}) // no kill after this point
	if exited != nil {
		// The command ended on its own, even if a kill was on its way.
		r.ExitCode, r.Signal = exited.ExitCode, syscall.Signal(exited.Signal)
	} else {
		// The init died before it could report the command's end: hutch's
		// kill, or the spawn server going away.
		r.ExitCode, r.Signal = -1, syscall.SIGKILL
		if c.reason != "" {
			r.Killed, r.KillReason = true, c.reason
		}
	}
	switch {
	case r.Usage != nil && r.Usage.OOMKills > 0:
		r.Reason = fmt.Sprintf("memory limit of %s exceeded (OOM kill)", FormatSize(c.sb.policy.Memory))
	case r.Killed:
		r.Reason = string(r.KillReason)
	}
	c.Result = r
	// The init exits on its own once it reported; its namespaces' teardown
	// and the cgroup's removal happen off the caller's path.
	in := c.in
	go func() {
		_, _ = in.proc.Wait()
		for range in.events {
		}
		in.close()
	}()
	if werr != nil && exited == nil {
		return fmt.Errorf("hutch: %w", werr)
	}
	if !r.Success() {
		ee := &ExitError{Result: r}
		if r.Killed {
			ee.killErr = c.killErr
		}
		return ee
	}
	return nil
}

func sameWriter(a, b io.Writer) bool {
	if a == nil || b == nil {
		return false
	}
	defer func() { _ = recover() }() // uncomparable writer types
	return a == b
}

// stdinFile is the command's stdin: /dev/null, or a pipe fed from Stdin.
// The command never gets an fd to a host file, only to a pipe or
// /dev/null, so /proc/self/fd/0 reopens nothing of the host's.
func (c *Cmd) stdinFile() (*os.File, error) {
	if c.Stdin == nil {
		return os.Open(os.DevNull)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, w)
	go func() {
		_, _ = io.Copy(w, c.Stdin)
		w.Close()
	}()
	return r, nil
}

// outputFile is the write end handed to the command for one of its output
// streams; a goroutine copies from the read end to dst through the
// command's output limit.
func (c *Cmd) outputFile(dst io.Writer) (*os.File, error) {
	if dst == nil {
		dst = io.Discard
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, r)
	c.copiers.Add(1)
	go func() {
		defer c.copiers.Done()
		if _, err := io.Copy(c.output.writer(dst), r); err != nil {
			// dst failed (a pipe whose reader is gone: hutch run ... |
			// head): close the command's pipe too, so that it gets EPIPE
			// or SIGPIPE as in a shell pipeline, instead of running on
			// with nobody reading.
			r.Close()
		}
	}()
	return w, nil
}

// limiter counts output across a command's streams and truncates it at
// the limit. Past the limit, output is drained and dropped so the command
// never blocks on a full pipe, and onExceed runs once.
type limiter struct {
	mu        sync.Mutex
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
	// Writes to dst happen under the lock: the two streams may share one
	// writer (CombinedOutput), which need not be safe for concurrent use.
	var err error
	if n > 0 {
		_, err = w.dst.Write(p[:n])
	}
	l.mu.Unlock()
	if exceeded {
		l.onExceed()
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
