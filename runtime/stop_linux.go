package runtime

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/hutchbox/hutch/nsinit"
)

// Signal sends sig to the running command's process group: the command
// and whatever it started that did not move to a group of its own, as a
// terminal's ^C reaches a foreground job. A shell script and the child it
// waits for get it together, instead of the shell deferring its trap
// until that child ends. What left the group is killed with the rest of
// the sandbox when the command ends.
//
// SIGKILL kills everything in the sandbox at once, and the Result says
// so with KillReason KilledStopped: the caller ended it. The signals the
// sandbox's init can pass on are SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT; others are refused. Signal
// returns os.ErrProcessDone once the command has ended, and an error while
// its sandbox is being built. Once the command is handed to its init,
// which starts it at once, a signal is passed on as soon as the command
// exists, even if Start has not returned yet.
func (c *Cmd) Signal(sig os.Signal) error {
	s, err := passable(sig)
	if err != nil {
		return err
	}
	c.mu.Lock()
	switch {
	case !c.sent:
		// Its sandbox is being built: there is nothing to signal yet.
		c.mu.Unlock()
		return errNotRunning
	case c.ended || c.killed:
		c.mu.Unlock()
		return os.ErrProcessDone
	case s == syscall.SIGKILL:
		c.mu.Unlock()
		c.kill(KilledStopped, nil)
		return nil
	}
	defer c.mu.Unlock()
	if c.plain != nil {
		return syscall.Kill(-c.plain.cmd.Process.Pid, s)
	}
	// The init forwards it: pid 1 of the sandbox, it receives from the
	// host only the signals it has handlers for, exactly those above.
	// The spawn server delivers it through the init's pidfd, so a pid
	// reused after the sandbox is gone cannot be hit.
	return c.in.proc.Signal(s)
}

// passable is sig if Signal can deliver it.
func passable(sig os.Signal) (syscall.Signal, error) {
	s, ok := sig.(syscall.Signal)
	if !ok || (s != syscall.SIGKILL && !slices.Contains(nsinit.Forwarded, sig)) {
		return 0, fmt.Errorf("hutch: signal %v cannot be passed on to a sandboxed command", sig)
	}
	return s, nil
}

// errNotRunning is Signal's and Stop's error for a command that Start has
// not (successfully) started.
var errNotRunning = errors.New("hutch: command not started")

// Stop stops the running command gracefully on the caller's behalf: sig
// (SIGTERM if nil) to its process group as Signal sends it, then, if the
// command has not ended WaitDelay later, SIGKILL to everything in the
// sandbox. It returns at once; Wait reports the end, with Killed set and
// KillReason KilledStopped unless a reason came first (the context, the
// timeout). Calling it again sends the signal again; the SIGKILL stays
// where the first call put it.
func (c *Cmd) Stop(sig os.Signal) error {
	if sig == nil {
		sig = syscall.SIGTERM
	}
	if _, err := passable(sig); err != nil {
		return err
	}
	// The reason comes first: the command may end as soon as the signal
	// is out.
	c.mu.Lock()
	if c.sent && !c.ended && !c.killed && c.reason == "" {
		c.reason = KilledStopped
	}
	c.mu.Unlock()
	c.setSignalled(true)
	if err := c.Signal(sig); err != nil {
		c.setSignalled(false)
		return err
	}
	c.armGrace()
	return nil
}

// cancel stops the command for its context or Policy.Timeout: through
// Cancel and the grace that follows once it runs, at once while its
// sandbox is being built.
func (c *Cmd) cancel(reason KillReason, err error) {
	c.mu.Lock()
	first := c.reason == "" && !c.ended && !c.killed
	if first {
		c.reason, c.killErr = reason, err
	}
	running := c.running
	c.mu.Unlock()
	switch {
	case !first:
		return // already stopping, or over
	case !running:
		c.kill(reason, err)
		return
	}
	// The grace is armed first: Cancel is the caller's code and may block.
	c.armGrace()
	cancel := c.Cancel
	if cancel == nil {
		cancel = func() error { return c.Signal(syscall.SIGTERM) }
	}
	c.setSignalled(true)
	if cerr := cancel(); cerr != nil {
		c.setSignalled(false)
		if !errors.Is(cerr, os.ErrProcessDone) {
			c.kill(reason, err)
		}
	}
}

// setSignalled records whether a graceful stop reached the command. It is
// set before the signal goes out, not after: the command may handle it and
// end, and Wait report that end, before the sender's next line runs.
func (c *Cmd) setSignalled(v bool) {
	c.mu.Lock()
	c.signalled = v
	c.mu.Unlock()
}

// armGrace arranges for the sandbox to be killed WaitDelay from now,
// unless a kill is already on its way or the command has ended.
func (c *Cmd) armGrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.grace != nil || c.ended || c.killed {
		return
	}
	c.grace = time.AfterFunc(c.waitDelay(), func() { c.kill("", nil) })
}

// waitDelay is WaitDelay, or its default.
func (c *Cmd) waitDelay() time.Duration {
	if c.WaitDelay > 0 {
		return c.WaitDelay
	}
	return DefaultWaitDelay
}

// copyFailed records an error copying the command's stdio; the first
// one is reported.
func (c *Cmd) copyFailed(err error) {
	c.mu.Lock()
	if c.ioErr == nil {
		c.ioErr = err
	}
	c.mu.Unlock()
}

// waitCopies waits, once the command has ended, for its output to be
// copied: at most WaitDelay, for a host writer may block for good. Its
// error is the first copy error, and ErrWaitDelay if the wait ran out.
func (c *Cmd) waitCopies() error {
	done := make(chan struct{})
	go func() {
		c.copiers.Wait()
		close(done)
	}()
	t := time.NewTimer(c.waitDelay())
	defer t.Stop()
	var late error
	select {
	case <-done:
	case <-t.C:
		late = ErrWaitDelay
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ioErr != nil && late != nil {
		return errors.Join(c.ioErr, late)
	}
	if c.ioErr != nil {
		return c.ioErr
	}
	return late
}
