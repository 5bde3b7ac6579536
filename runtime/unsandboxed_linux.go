package runtime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// unsandboxedNote is what every Result of an unsandboxed command says it
// lacked, and what New logs once.
const unsandboxedNote = "everything: disabled mode (Policy.Unsandboxed) ran the command as a plain process with the host's full access"

// plainCmd is an unsandboxed command's process.
type plainCmd struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
}

// startUnsandboxed starts c as a plain process of the host, in the
// workspace (or Dir), with the host's environment and the policy's and
// c's on top; the context and Policy.Timeout stop it as they stop a
// sandboxed command (SIGTERM to its process group, SIGKILL WaitDelay
// later).
func (c *Cmd) startUnsandboxed() error {
	ctx, cancel := c.ctx, context.CancelFunc(func() {})
	if t := c.sb.policy.Timeout; t > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, t, ErrTimeout)
	}
	cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	cmd.Args = c.Args
	cmd.Env = mergeEnv(mergeEnv(os.Environ(), c.sb.policy.Env), c.Env)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = c.sb.policy.Workspace
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = c.waitDelay()
	if err := cmd.Start(); err != nil {
		cancel()
		return c.notStarted(err)
	}
	c.mu.Lock()
	c.plain = &plainCmd{cmd: cmd, cancel: cancel}
	c.running, c.sent = true, true
	c.mu.Unlock()
	return nil
}

// waitUnsandboxed is Wait for an unsandboxed command.
func (c *Cmd) waitUnsandboxed() error {
	p := c.plain
	err := p.cmd.Wait()
	p.cancel()
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	r := &Result{ExitCode: -1, Wall: time.Since(c.start)}
	c.sb.describe(r, nil)
	r.Layers, r.Skipped = nil, nil
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			r.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			r.Signal = ws.Signal()
		}
	}
	c.Result = r
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return &ExitError{Result: r, killErr: context.Cause(c.ctx)}
	}
	r.Error = err.Error()
	return err
}

// unsandboxed finishes New for Policy.Unsandboxed: refused without the
// host program's AllowUnsandboxed, and said loudly when it is allowed.
func (sb *Sandbox) unsandboxed() (*Sandbox, error) {
	if !sb.policy.AllowUnsandboxed {
		return nil, &PolicyError{Field: "Unsandboxed", Value: "true", Reason: "the disabled mode gives commands the host's full access; only the host program can allow it (Policy.AllowUnsandboxed; hutch run --allow-unsandboxed)"}
	}
	sb.level = LevelUnsandboxed
	sb.leaks = nil // nothing is enforced, the leak layer neither
	sb.policy.logger().Warn("hutch: DISABLED MODE: commands run unsandboxed, with the host's full access (Policy.Unsandboxed)")
	return sb, nil
}
