package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs the BPF program prog (from Compile) on the calling thread
// only, without TSYNC: the sandbox init loads it on the thread that then
// forks the command, so the command inherits it and nothing else of the
// init is constrained. The caller must have set no_new_privs and locked
// the goroutine to its thread.
func Load(prog []byte) error {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("seccomp: %d bytes is not a BPF program", len(prog))
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog) / 8),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("seccomp: load filter: %w", e)
	}
	return nil
}
