//go:build linux

package nsinit

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestMarkCloseOnExec: an fd opened without O_CLOEXEC comes out with it.
func TestMarkCloseOnExec(t *testing.T) {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := MarkCloseOnExec(fd); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd %d flags %#x, %v: not close-on-exec", fd, flags, err)
	}
}
