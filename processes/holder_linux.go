package processes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A supervisor holds its supervisor.lock for its whole life. That is its
// identity when its record cannot say (unreadable, or judged stale while
// it still runs): the kernel's list of locks (/proc/locks) names the
// process that took the lock, and that process, checked to hold the lock
// file open, is the one to stop. Nothing about it is taken from a file a
// sandbox could write.

// lockHolder returns a pidfd of the process holding id's supervisor.lock,
// or -1 when none does.
func (s store) lockHolder(id string) (int, error) {
	path := filepath.Join(s.dir(id), supervisorLock)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return -1, nil
	}
	for _, pid := range lockPids(st.Dev, st.Ino) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		// Opened by pid: the number cannot be reused under the pidfd.
		// It names the holder if it has the lock file open (a dead
		// taker's pid, reused, would not).
		if holdsOpen(pid, st.Dev, st.Ino) {
			return fd, nil
		}
		unix.Close(fd)
	}
	return -1, nil
}

// lockPids are the pids /proc/locks gives for the flock locks on the file
// dev, ino.
func lockPids(dev, ino uint64) []int {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// holdsOpen says whether process pid has the file dev, ino open.
func holdsOpen(pid int, dev, ino uint64) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &st) == nil && st.Dev == dev && st.Ino == ino {
			return true
		}
	}
	return false
}
