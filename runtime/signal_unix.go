//go:build unix

package runtime

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is the signal's C name ("SIGKILL"), as shells and the CLI say it.
func signalName(s syscall.Signal) string { return unix.SignalName(s) }
