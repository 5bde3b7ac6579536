//go:build !linux

package runtime

import (
	"errors"
	"fmt"
)

// explainer is Linux's: elsewhere there is no view to explain yet.
type explainer struct{}

// Explain says which rule decides a path for an access; on Linux only for
// now (the Seatbelt profile's rules are not named yet): an error matching
// errors.ErrUnsupported here.
func (sb *Sandbox) Explain(name string, access Access) (Explanation, error) {
	return Explanation{}, fmt.Errorf("hutch: Explain is Linux-only for now: %w", errors.ErrUnsupported)
}

// Explain is Sandbox.Explain for the decision r; Linux-only for now.
func (r *Resolved) Explain(name string, access Access) (Explanation, error) {
	return Explanation{}, fmt.Errorf("hutch: Explain is Linux-only for now: %w", errors.ErrUnsupported)
}
