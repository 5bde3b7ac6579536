//go:build !linux && !darwin

package runtime

import (
	"context"
	"io"
	"os"
	"time"
)

// Sandbox is never made on this platform; New refuses.
type Sandbox struct{ policy Policy }

// Narrow returns ErrUnsupportedPlatform.
func (sb *Sandbox) Narrow(Grant) (*Sandbox, error) { return nil, ErrUnsupportedPlatform }

// PolicyWith returns ErrUnsupportedPlatform.
func (sb *Sandbox) PolicyWith(Grant) (Policy, error) { return Policy{}, ErrUnsupportedPlatform }

// WorkDir returns ErrUnsupportedPlatform.
func (sb *Sandbox) WorkDir(string) (string, error) { return "", ErrUnsupportedPlatform }

// Reload returns ErrUnsupportedPlatform.
func (sb *Sandbox) Reload(Policy) error { return ErrUnsupportedPlatform }

// New returns ErrUnsupportedPlatform.
func New(p Policy) (*Sandbox, error) { return nil, ErrUnsupportedPlatform }

// Check returns ErrUnsupportedPlatform.
func Check(p Policy) (*Resolved, error) { return nil, ErrUnsupportedPlatform }

// Policy returns the policy.
func (sb *Sandbox) Policy() Policy { return sb.policy.clone() }

// Close does nothing.
func (sb *Sandbox) Close() error { return nil }

// Prewarmed is 0.
func (sb *Sandbox) Prewarmed() int { return 0 }

// Cmd is a command to run in a Sandbox, used like exec.Cmd.
type Cmd struct {
	Grant  Grant
	Path   string
	Args   []string
	Env    []string
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Cancel and WaitDelay are as on Linux; nothing runs here.
	Cancel    func() error
	WaitDelay time.Duration
	// Result is set by Wait.
	Result *Result
}

// Command returns a Cmd whose Start fails with ErrUnsupportedPlatform.
func (sb *Sandbox) Command(ctx context.Context, name string, args ...string) *Cmd {
	return &Cmd{Path: name, Args: append([]string{name}, args...)}
}

// Start returns ErrUnsupportedPlatform.
func (c *Cmd) Start() error { return ErrUnsupportedPlatform }

// Wait returns ErrUnsupportedPlatform.
func (c *Cmd) Wait() error { return ErrUnsupportedPlatform }

// Run returns ErrUnsupportedPlatform.
func (c *Cmd) Run() error { return ErrUnsupportedPlatform }

// Output returns ErrUnsupportedPlatform.
func (c *Cmd) Output() ([]byte, error) { return nil, ErrUnsupportedPlatform }

// CombinedOutput returns ErrUnsupportedPlatform.
func (c *Cmd) CombinedOutput() ([]byte, error) { return nil, ErrUnsupportedPlatform }

// Signal returns ErrUnsupportedPlatform.
func (c *Cmd) Signal(sig os.Signal) error { return ErrUnsupportedPlatform }

// Stop returns ErrUnsupportedPlatform.
func (c *Cmd) Stop(sig os.Signal) error { return ErrUnsupportedPlatform }

// decidedLevel: no level here (New refuses).
func (sb *Sandbox) decidedLevel() Level { return "" }
