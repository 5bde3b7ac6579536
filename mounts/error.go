package mounts

import "fmt"

// Error is a failed step of building a Plan's view. Step is the plan's
// Mount it belongs to, Op the operation that failed and Path the path it
// worked on.
type Error struct {
	Step Mount
	Op   string
	Path string
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("mounts: %s %s: %s %s: %v", e.Step.Kind, e.Step.Target, e.Op, e.Path, e.Err)
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }
