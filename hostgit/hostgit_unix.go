//go:build unix

package hostgit

import (
	"errors"
	"os"
	"syscall"
)

// openUntrusted opens path for reading as a file a command could have
// written: a symbolic link is not followed, and a FIFO does not block.
func openUntrusted(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// processGone reports whether no process has pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// ownedByMe reports whether fi is owned by this process's user.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
