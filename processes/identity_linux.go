//go:build linux

package processes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
})

// BootID is this boot's id (/proc/sys/kernel/random/boot_id).
func BootID() (string, error) { return bootID() }

// Identify reads the identity of the live process pid.
func Identify(pid int) (Identity, error) {
	boot, err := bootID()
	if err != nil {
		return Identity{}, err
	}
	st, err := startTime(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Pid: pid, StartTime: st, BootID: boot}, nil
}

// statFields are the fields of /proc/<pid>/stat after the command's name
// (field 3 on), or ErrGone.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("processes: pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("processes: /proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// startTime is field 22 of /proc/<pid>/stat; a zombie has none (ErrGone):
// it has ended, only its parent has not reaped it.
func startTime(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("processes: pid %d: %w", pid, ErrGone)
	}
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("processes: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("processes: pid %d is a zombie: %w", pid, ErrGone)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Live reports whether the process id names still runs: in this boot, and
// its pid still started at the recorded time.
func (id Identity) Live() (bool, error) {
	boot, err := bootID()
	if err != nil {
		return false, err
	}
	if id.BootID != boot {
		return false, nil
	}
	st, err := startTime(id.Pid)
	if errors.Is(err, ErrGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st == id.StartTime, nil
}

// Open returns a pidfd of the process id names, or ErrGone. The check
// comes after the open, so the pidfd is known to be that process's: a pid
// reused in between would have another start time.
func (id Identity) Open() (int, error) {
	boot, err := bootID()
	if err != nil {
		return -1, err
	}
	if id.BootID != boot {
		return -1, fmt.Errorf("processes: pid %d ran in boot %s, this is %s: %w", id.Pid, id.BootID, boot, ErrGone)
	}
	fd, err := unix.PidfdOpen(id.Pid, 0)
	if err == unix.ESRCH {
		return -1, fmt.Errorf("processes: pid %d: %w", id.Pid, ErrGone)
	}
	if err != nil {
		return -1, fmt.Errorf("processes: pidfd_open %d: %w", id.Pid, err)
	}
	st, err := startTime(id.Pid)
	if err == nil && st != id.StartTime {
		err = fmt.Errorf("processes: pid %d started at %d, not %d: another process: %w", id.Pid, st, id.StartTime, ErrGone)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Signal sends sig to the process id names, through a pidfd checked as
// Open does: a pid reused since is never signalled.
func (id Identity) Signal(sig unix.Signal) error {
	fd, err := id.Open()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if err == unix.ESRCH {
			return fmt.Errorf("processes: pid %d: %w", id.Pid, ErrGone)
		}
		return err
	}
	return nil
}
