package seccomp

import (
	"errors"
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
	_, err := load(prog, 0)
	return err
}

// LoadListener installs prog like Load and returns the filter's listener:
// the fd (close-on-exec) through which a supervisor receives the calls the
// filter notifies and answers them (see UnixWall).
//
// Where the kernel has it (5.19), the filter waits killably once the
// supervisor has read a call: a signal then no longer interrupts a call the
// supervisor may already have performed (a connect that completed, then
// restarted, would fail with EISCONN).
func LoadListener(prog []byte) (int, error) {
	fd, err := load(prog, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|filterFlagWaitKillableRecv)
	if errors.Is(err, unix.EINVAL) {
		fd, err = load(prog, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	}
	return fd, err
}

// filterFlagWaitKillableRecv is SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
// (linux/seccomp.h, 5.19).
const filterFlagWaitKillableRecv = 1 << 5

func load(prog []byte, flags uintptr) (int, error) {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return -1, fmt.Errorf("seccomp: %d bytes is not a BPF program", len(prog))
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog) / 8),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return -1, fmt.Errorf("seccomp: load filter: %w", e)
	}
	if flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
		return -1, nil
	}
	return int(r), nil
}
