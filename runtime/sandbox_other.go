//go:build !linux && !darwin

package runtime

import (
	"os"
)

// machine is empty: no Sandbox is made on this platform; New refuses.
type machine struct{}

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

// NewFiles returns ErrUnsupportedPlatform.
func NewFiles(p Policy) (*Sandbox, error) { return nil, ErrUnsupportedPlatform }

// Check returns ErrUnsupportedPlatform.
func Check(p Policy) (*Resolved, error) { return nil, ErrUnsupportedPlatform }

// Policy returns the policy.
func (sb *Sandbox) Policy() Policy { return sb.policy.clone() }

// Close does nothing.
func (sb *Sandbox) Close() error { return nil }

// Prewarmed is 0.
func (sb *Sandbox) Prewarmed() int { return 0 }

// cmdState: nothing runs here.
type cmdState struct{}

// Start returns ErrUnsupportedPlatform.
func (c *Cmd) Start() error { return ErrUnsupportedPlatform }

// Wait returns ErrUnsupportedPlatform.
func (c *Cmd) Wait() error { return ErrUnsupportedPlatform }

// Signal returns ErrUnsupportedPlatform.
func (c *Cmd) Signal(sig os.Signal) error { return ErrUnsupportedPlatform }

// Stop returns ErrUnsupportedPlatform.
func (c *Cmd) Stop(sig os.Signal) error { return ErrUnsupportedPlatform }

// NewResolved returns ErrUnsupportedPlatform.
func NewResolved(r *Resolved) (*Sandbox, error) { return nil, ErrUnsupportedPlatform }

// Published reports no ports: there is no Sandbox on this platform.
func (sb *Sandbox) Published() []Publish { return nil }
