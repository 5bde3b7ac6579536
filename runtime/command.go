package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"
)

// Cmd is a command to run in a Sandbox, used like exec.Cmd. It is the
// same type on every platform; what Start, Wait and the signals keep of a
// running command is each platform's own (cmdState).
type Cmd struct {
	// Grant is what this command is given beyond its Sandbox's policy
	// (network, domains, writable trees, git writes; nothing by
	// default). Start refuses with a *PermissionError, naming the first
	// tag, a Grant the Sandbox's Policy.Grantable does not cover, and
	// starts nothing; one that is covered runs in a Sandbox made for
	// that grant, once, and kept for the next command asking the same.
	Grant Grant

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

	// Stdin, Stdout and Stderr are copied to and from the command
	// through pipes: the command never holds a host file. Nil Stdin is
	// /dev/null; nil Stdout or Stderr discards. Wait returns the first
	// error of a copy (other than the command closing its stdin early)
	// when the command itself succeeded, and wraps it in the *ExitError
	// otherwise.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	// Explain has hutch append to Stderr, after the command ends, the
	// summary of its denials that Policy.Explain has for every command:
	// this command's alone. It needs the Sandbox's Policy.Denials
	// recorded (Start refuses it otherwise). Linux only.
	Explain bool

	// Cancel, if non-nil, is called when the command's context is done or
	// Policy.Timeout expires while the command runs, instead of the
	// default: SIGTERM to the command's process group (see Signal). It
	// may call Signal, or do anything else that makes the command end;
	// if it returns an error other than os.ErrProcessDone, the sandbox
	// is killed at once. Either way, if the command has not ended
	// WaitDelay after Cancel was called, hutch kills everything in the
	// sandbox with SIGKILL: unlike os/exec, the end of the sandbox never
	// depends on the command's cooperation. Before the command runs
	// (while its sandbox is built), cancellation kills at once.
	//
	// A command that ends after Cancel is reported as killed: Result's
	// Killed and KillReason say why, its Signal what actually ended it
	// (SIGTERM if it obeyed, SIGKILL if the grace ran out), and Wait
	// returns an *ExitError wrapping the context's error or ErrTimeout,
	// even if the command then exited 0.
	//
	// On macOS, which has no pid namespace, the SIGKILL after the grace
	// goes to the command's process group, and a process that left the
	// group lives on; Signal sends any signal.
	Cancel func() error

	// WaitDelay bounds the two waits that depend on something other than
	// the command: from Cancel (or Stop) to the SIGKILL of the sandbox,
	// and from the command's end to Wait's return while the copies to
	// Stdout and Stderr still block (a host writer that is stuck). When
	// the second runs out, Wait closes the pipes, leaves the stuck copy
	// behind, and returns an error matching ErrWaitDelay (within the
	// *ExitError if the command failed). Zero means DefaultWaitDelay;
	// negative is refused by Start.
	WaitDelay time.Duration

	// Result is set once Wait returns, also on failure, and once Start
	// returns an error: a command that never ran has one too.
	Result *Result

	sb  *Sandbox
	ctx context.Context

	startCalled bool

	// cmdState is what this platform's Start, Wait and signals keep.
	cmdState
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

// Output runs the command and returns its standard output. With Stderr
// unset, an *ExitError it returns holds what the command wrote there.
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
