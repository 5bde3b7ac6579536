//go:build linux

package processes

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// endDescendants ends everything that still runs below this process and
// reaps it, so that when the supervisor ends, nothing of its process runs:
// the spawn server and its inits die with their parent by
// PR_SET_PDEATHSIG, but on the kernel's own time, after the supervisor's
// end has already told a Stop that it is over. This process is a child
// subreaper (supervise makes it one at its start; this makes sure), so
// that what its children leave (the server's inits, killed by their
// parent's death) comes to it to be reaped. It
// gives up after limit: a supervisor never hangs on its way out.
func endDescendants(limit time.Duration) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		killChildren()
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case err == unix.ECHILD:
			return
		case err == unix.EINTR || pid > 0:
			continue
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killChildren sends SIGKILL to each child of this process. Each is
// signalled through a pidfd opened before its parent is checked: a pid
// reaped (by another goroutine's Wait) and reused in between is never
// signalled.
func killChildren() {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if parentPid(pid) != self {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if parentPid(pid) == self {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}

// parentPid is field 4 of /proc/<pid>/stat, or -1.
func parentPid(pid int) int {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}
