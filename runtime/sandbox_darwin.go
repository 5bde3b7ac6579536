package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hutchbox/hutch/darwin"
)

// Sandbox on macOS runs commands under a Seatbelt profile compiled once
// from the Policy (package darwin) through /usr/bin/sandbox-exec.
type Sandbox struct {
	policy Policy
	dp     darwin.Policy
	tmp    string
	env    []string
}

// New validates p and compiles its profile.
func New(p Policy) (*Sandbox, error) {
	p = p.clone()
	if p.Workspace == "" {
		return nil, &PolicyError{Field: "Workspace", Reason: "required"}
	}
	if err := checkPath("Workspace", p.Workspace); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p.Workspace); err != nil || !fi.IsDir() {
		return nil, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "not an existing directory"}
	}
	if p.MinLevel != "" && p.MinLevel != LevelSeatbelt && p.MinLevel != LevelLandlock {
		return nil, &LevelError{Need: p.MinLevel, Have: LevelSeatbelt, Reasons: []string{"macOS has no namespaces; the Seatbelt profile is its sandbox"}}
	}
	switch p.Network {
	case "", NetworkNone:
		p.Network = NetworkNone
	case NetworkHost:
	default:
		return nil, &PolicyError{Field: "Network", Value: string(p.Network), Reason: "on macOS only none and host are built"}
	}
	tmp, err := os.MkdirTemp("", "hutch-tmp-")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(tmp, "home")
	_ = os.Mkdir(home, 0o700)
	var deny []string
	if !p.NoDefaultDeny {
		for _, d := range DefaultDeny {
			deny = append(deny, resolve(d, p.Workspace))
		}
	}
	for _, d := range p.Deny {
		deny = append(deny, resolve(d, p.Workspace))
	}
	var writable []string
	for _, w := range p.Writable {
		writable = append(writable, resolve(w, p.Workspace))
	}
	sb := &Sandbox{policy: p, tmp: tmp, dp: darwin.Policy{
		Workspace:   p.Workspace,
		Writable:    append(writable, tmp),
		Deny:        deny,
		HostNetwork: p.Network == NetworkHost,
	}}
	if _, err := darwin.Compile(sb.dp, "", nil); err != nil {
		os.RemoveAll(tmp)
		return nil, &PolicyError{Field: "Workspace", Reason: err.Error()}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/bin:/bin:/usr/sbin:/sbin"
	}
	sb.env = mergeEnv([]string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmp, "HUTCH_SANDBOX=1"}, p.Env)
	return sb, nil
}

// Policy returns the validated policy.
func (sb *Sandbox) Policy() Policy { return sb.policy.clone() }

// Close removes the sandbox's private temporary directory.
func (sb *Sandbox) Close() error { return os.RemoveAll(sb.tmp) }

// Prewarmed is always 0 on macOS: there is nothing to build ahead.
func (sb *Sandbox) Prewarmed() int { return 0 }

// Cmd is a command to run in a Sandbox, used like exec.Cmd.
type Cmd struct {
	Path   string
	Args   []string
	Env    []string
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Result is set by Wait.
	Result *Result

	sb     *Sandbox
	ctx    context.Context
	runCtx context.Context // ctx with the policy's timeout
	cancel context.CancelFunc
	cmd    *exec.Cmd
	start  time.Time
}

// Command returns the Cmd to run name with args in the sandbox.
func (sb *Sandbox) Command(ctx context.Context, name string, args ...string) *Cmd {
	return &Cmd{Path: name, Args: append([]string{name}, args...), sb: sb, ctx: ctx}
}

// Start starts the command under sandbox-exec.
func (c *Cmd) Start() error {
	if c.cmd != nil {
		return errors.New("hutch: Start was already called")
	}
	ctx := c.ctx
	if t := c.sb.policy.Timeout; t > 0 {
		ctx, c.cancel = context.WithTimeout(ctx, t)
	}
	c.runCtx = ctx
	cmd, err := darwin.Command(ctx, c.sb.dp, c.Path, c.Args[1:]...)
	if err != nil {
		return &PolicyError{Field: "Cmd", Reason: err.Error()}
	}
	cmd.Env = mergeEnv(c.sb.env, c.Env)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = c.sb.policy.Workspace
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	c.cmd, c.start = cmd, time.Now()
	return cmd.Start()
}

// Wait waits for the command and fills in Result.
func (c *Cmd) Wait() error {
	if c.cmd == nil {
		return errors.New("hutch: not started")
	}
	err := c.cmd.Wait()
	if c.cancel != nil {
		c.cancel()
	}
	r := &Result{Wall: time.Since(c.start), Level: LevelSeatbelt, Network: c.sb.policy.Network,
		Unenforced: []string{"resource limits: none on macOS", "processes: the command sees the host's processes", "output limit: not enforced on macOS"}}
	if st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		r.ExitCode = st.ExitStatus()
		if st.Signaled() {
			r.Signal, r.ExitCode = st.Signal(), -1
		}
	}
	switch {
	case c.ctx.Err() == context.Canceled:
		r.Killed, r.KillReason = true, KilledCanceled
	case c.runCtx.Err() != nil:
		r.Killed, r.KillReason = true, KilledTimeout
	}
	c.Result = r
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("hutch: %w", err)
	}
	if !r.Success() {
		return &ExitError{Result: r}
	}
	return nil
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
	var out, errb bytes.Buffer
	c.Stdout = &out
	if c.Stderr == nil {
		c.Stderr = &errb
	}
	err := c.Run()
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr = errb.Bytes()
	}
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns its standard output and
// standard error together.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}
