package seccomp

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxProfileSize bounds a profile file: Docker's default profile, the
// largest in common use, is under 30 KiB.
const MaxProfileSize = 4 << 20

// ParseFile reads the profile at path and parses it (see Parse). Only a
// regular file of at most MaxProfileSize bytes is read: a device such as
// /dev/zero never ends, and a FIFO blocks until someone writes to it.
func ParseFile(path string) (*Profile, error) {
	b, err := readFile(path, MaxProfileSize)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// readFile reads the regular file at path, refusing anything else and
// anything larger than limit, without blocking or reading past limit.
func readFile(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading waits for a writer without
	// it; on a regular file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("seccomp: profile is %s, not a regular file", fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("seccomp: profile is %d bytes, more than the %d a profile may have", fi.Size(), limit)
	}
	// A file can grow after the Stat, and some (in /proc) report size 0:
	// read one byte past the limit to tell.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("seccomp: profile is more than the %d bytes a profile may have", limit)
	}
	return b, nil
}

// fileKind names the type of a file that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "of type " + m.Type().String()
}
