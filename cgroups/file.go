//go:build linux

package cgroups

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The cgroup files are written and read with raw system calls rather than
// os.WriteFile/os.ReadFile: os.OpenFile adds an fstat (to decide whether the
// file is pollable) to every open, and os.WriteFile asks for O_CREAT, which
// on a cgroup filesystem can only fail differently. A limit is one
// open+write+close here.

// writeFile writes val to an existing file. A missing file is ENOENT (on a
// cgroup filesystem: the controller is not enabled for the group, or the
// kernel lacks the feature), never a file created by mistake.
func writeFile(path, val string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(val))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// readFile reads a whole (small) file. Cgroup files report a size of 4096
// or 0 whatever they hold, so the buffer grows as needed.
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return preadAll(fd, path)
}

// preadAll reads the whole of an open cgroup file from its start, which
// generates it afresh.
func preadAll(fd int, path string) ([]byte, error) {
	buf := make([]byte, 512)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		k, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			return buf[:n], nil
		}
		n += k
		if n < len(buf) {
			// A seq_file hands over all it generated that fits: a short
			// read is the end (the read for EOF would cost a system call
			// more).
			return buf[:n], nil
		}
	}
}

// readUint reads a file holding one number; "max" reads as ^uint64(0).
func readUint(path string) (uint64, error) {
	b, err := readFile(path)
	if err != nil {
		return 0, err
	}
	return parseUint(strings.TrimSpace(string(b)))
}

func parseUint(s string) (uint64, error) {
	if s == "max" {
		return ^uint64(0), nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// keyed returns the value of key in a "key value" per line file
// (memory.events, cpu.stat, pids.events, memory.oom_control,
// cpuacct.stat).
func keyed(b []byte, key string) (uint64, bool) {
	s := string(b)
	for len(s) > 0 {
		line, rest, _ := strings.Cut(s, "\n")
		s = rest
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := parseUint(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// parsePids parses a cgroup.procs file.
func parsePids(b []byte) []int {
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// isNotExist reports a missing file or directory.
func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }
