//go:build linux

package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// limitEvents counts what the kernel records of a command's limits in
// the runtime's own cgroup, which the runtime removes as the command
// ends, before the Result is made. The group of hutch's above it holds
// the limits, but on cgroup v1 an OOM kill is counted in the victim's
// group alone (memory.oom_control's oom_kill), and before Linux 6.12 a
// fork refused at a pids limit in the forking task's group alone
// (pids.events' max), on v2 too: both in the runtime's group. So the
// counters of that group are read while the command runs, the largest
// reading kept, and on v1 the memory controller's OOM notifications of
// hutch's group (an eventfd, cgroup.event_control), which a removal
// cannot take away, count OOM kills the last reading missed.
type limitEvents struct {
	oomFiles, pidsFiles []string // the runtime's group's counter files
	oomKills, pidsHits  uint64   // the largest readings
	oomNotify           int      // the eventfd, or -1
}

// watchLimits follows the runtime's group name below each of parent's
// directories (one per hierarchy).
func watchLimits(parentDirs []string, name string) *limitEvents {
	e := &limitEvents{oomNotify: -1}
	for _, d := range parentDirs {
		child := filepath.Join(d, name)
		if _, err := os.Stat(filepath.Join(d, "memory.oom_control")); err == nil {
			e.oomFiles = append(e.oomFiles, filepath.Join(child, "memory.oom_control"))
			e.notifyOOM(d)
		}
		if _, err := os.Stat(filepath.Join(d, "memory.events")); err == nil {
			e.oomFiles = append(e.oomFiles, filepath.Join(child, "memory.events"))
		}
		if _, err := os.Stat(filepath.Join(d, "pids.events")); err == nil {
			e.pidsFiles = append(e.pidsFiles, filepath.Join(child, "pids.events"))
		}
	}
	return e
}

// notifyOOM registers an eventfd for the OOM notifications of the v1
// memory group dir: one each time the group, or one below it, is out of
// memory; best effort (without it only the readings count).
func (e *limitEvents) notifyOOM(dir string) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return
	}
	ctl, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		unix.Close(efd)
		return
	}
	defer ctl.Close() // the registration holds its own reference
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(fmt.Sprintf("%d %d", efd, ctl.Fd())), 0); err != nil {
		unix.Close(efd)
		return
	}
	e.oomNotify = efd
}

// read takes a reading of the runtime's group's counters, if it is
// there.
func (e *limitEvents) read() {
	for _, f := range e.oomFiles {
		e.oomKills = max(e.oomKills, counter(f, "oom_kill"))
	}
	for _, f := range e.pidsFiles {
		e.pidsHits = max(e.pidsHits, counter(f, "max"))
	}
}

// close takes the OOM notifications and ends the registration (closing
// the eventfd removes it).
func (e *limitEvents) close() {
	if e.oomNotify < 0 {
		return
	}
	var b [8]byte
	if n, err := unix.Read(e.oomNotify, b[:]); err == nil && n == 8 {
		e.oomKills = max(e.oomKills, uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24|uint64(b[4])<<32|uint64(b[5])<<40|uint64(b[6])<<48|uint64(b[7])<<56)
	}
	unix.Close(e.oomNotify)
	e.oomNotify = -1
}

// counter is key's value in the flat keyed file path (0 if either is
// missing).
func counter(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
