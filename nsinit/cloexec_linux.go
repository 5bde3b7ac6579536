package nsinit

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MarkCloseOnExec sets close-on-exec on every fd from first up, so that no
// fd a process inherited by mistake reaches what it execs (CVE-2024-21626).
// It uses close_range(2) where the kernel has CLOSE_RANGE_CLOEXEC (5.11)
// and walks /proc/self/fd otherwise.
func MarkCloseOnExec(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !(errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)) {
		return err
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first {
			continue
		}
		// The directory's own fd is closed by now: EBADF is fine.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return nil
}
