//go:build linux || darwin

package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// reloadState is what Reload keeps in a Sandbox: the Sandbox its
// commands now start in, when Reload made one.
type reloadState struct {
	reloadMu sync.Mutex
	next     atomic.Pointer[Sandbox]
	// retired: Reload replaced this Sandbox, which the caller still
	// holds; a Start that reached it finds the one in effect instead.
	retired atomic.Bool
}

// inEffect is the Sandbox sb's commands start in now.
func (sb *Sandbox) inEffect() *Sandbox {
	if n := sb.next.Load(); n != nil {
		return n
	}
	return sb
}

// Reload puts policy p in effect for sb: every command started once
// Reload has returned runs under p, with inits built for p (the old
// policy's pooled inits are dropped); commands already started keep the
// policy they started with, and nothing is interrupted. A p that New
// refuses changes nothing (the error is New's). Policy, the file
// operations and Close follow.
func (sb *Sandbox) Reload(p Policy) error {
	sb.reloadMu.Lock()
	defer sb.reloadMu.Unlock()
	if sb.isClosed() {
		return fmt.Errorf("hutch: %w", ErrClosed)
	}
	next, err := New(p)
	if err != nil {
		return err
	}
	old := sb.inEffect()
	sb.next.Store(next)
	if old != sb {
		// Waits for the commands being started in it; started ones
		// run on.
		return old.Close()
	}
	sb.retire()
	return nil
}

// startIn is the Sandbox a command of front starts in, with its life
// read-locked (so that it is not closed or retired under the start),
// or ErrClosed. A Sandbox that Reload replaced between the choice and
// the lock is passed over for the one in effect.
func (front *Sandbox) startIn(g Grant) (*Sandbox, func(), error) {
	for {
		gen := front.inEffect()
		sb, err := gen.forGrant(g)
		if err != nil {
			return nil, nil, err
		}
		unlock := sb.lockLife()
		if !sb.isClosedLocked() && !gen.retired.Load() {
			return sb, unlock, nil
		}
		unlock()
		if front.inEffect() == gen {
			return nil, nil, fmt.Errorf("hutch: %w", ErrClosed)
		}
	}
}
