//go:build !unix

package runtime

import "syscall"

func signalName(s syscall.Signal) string { return s.String() }
