//go:build unix

package policyfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openNonblocking opens path for reading without waiting on a FIFO.
func openNonblocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
}

// readUntrusted reads and parses the policy file name in the directory
// dir, which a sandboxed command may have written: no symlink is followed
// on the way (dir's own path is the caller's), and the file must be
// regular, as ReadFile.
func readUntrusted(dir string, name ...string) (*File, error) {
	path := filepath.Join(append([]string{dir}, name...)...)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for i, n := range name {
		flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(name)-1 {
			flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		next, err := unix.Openat(fd, n, flags, 0)
		unix.Close(fd)
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return nil, fmt.Errorf("%s: %s is a symlink or not a directory: a policy file in the workspace is read only where it lies, no link followed", path, filepath.Join(append([]string{dir}, name[:i+1]...)...))
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		fd = next
	}
	return readOpened(path, os.NewFile(uintptr(fd), path))
}
