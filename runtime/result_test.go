package runtime

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestExitStatus: the one rule hutch run and the local API give a
// command's end as a shell's status.
func TestExitStatus(t *testing.T) {
	exited := &Result{ExitCode: 3}
	signaled := &Result{ExitCode: -1, Signal: syscall.SIGKILL}
	for _, tc := range []struct {
		name string
		r    *Result
		err  error
		want int
	}{
		{"success", &Result{}, nil, 0},
		{"exit code", exited, &ExitError{Result: exited}, 3},
		{"signal", signaled, &ExitError{Result: signaled}, 137},
		{"not found", &Result{ExitCode: -1}, fmt.Errorf("start: %w", ErrNotFound), 127},
		{"cannot execute", &Result{ExitCode: -1}, fmt.Errorf("start: %w", ErrCannotExec), 126},
		{"hutch failed, no result", nil, errors.New("sandbox: boom"), 125},
		{"hutch failed before the start", &Result{ExitCode: -1}, errors.New("sandbox: boom"), 125},
	} {
		if got := ExitStatus(tc.r, tc.err); got != tc.want {
			t.Errorf("%s: ExitStatus = %d, want %d", tc.name, got, tc.want)
		}
	}
}
