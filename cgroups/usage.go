//go:build linux

package cgroups

import (
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// Usage reads what the group's processes consumed: peak memory, CPU
// time, the peak process count, and how often a limit was hit.
func (g *Group) Usage() (Usage, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usage(&usageReader{held: g.held})
}

func (g *Group) usage(r *usageReader) (Usage, error) {
	if g.m.v2 {
		return usageV2(r, g.dirs[0], g.ctl)
	}
	return usageV1(r, g.ctl)
}

// HoldUsage opens the files Usage reads and keeps them open until
// Destroy, so that Usage reads them again (a pread each) instead of
// opening them: a file of the cgroup filesystem is generated afresh at
// each read from its start, and an open, read and close of one costs
// three times a read. It is for a group made before its processes run
// (an init's, while the init is built), whose Usage is on the path of a
// command's end. Usage works the same without it; a file that cannot be
// held is opened at each Usage, as without it.
func (g *Group) HoldUsage() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil || g.destroyed {
		return
	}
	r := &usageReader{held: map[string]int{}, hold: true}
	_, _ = g.usage(r)
	g.held = r.held
}

// releaseUsage closes what HoldUsage opened, with g.mu held.
func (g *Group) releaseUsage() {
	for _, fd := range g.held {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	g.held = nil
}

// usageReader reads the counters' files and keeps the first error that is
// not a missing file (a missing file is a kernel without that counter, or
// a controller the group lacks). held maps the files HoldUsage opened to
// their fds, and those it found missing to -1; with hold set, it is being
// filled.
type usageReader struct {
	err  error
	held map[string]int
	hold bool
}

func (r *usageReader) file(path string) ([]byte, bool) {
	var b []byte
	var err error
	switch fd, ok := r.held[path]; {
	case ok && fd < 0:
		err = unix.ENOENT
	case ok:
		b, err = preadAll(fd, path)
	case r.hold:
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			r.held[path] = fd
			b, err = preadAll(fd, path)
			break
		}
		if err == unix.ENOENT {
			r.held[path] = -1
		}
		err = &fs.PathError{Op: "open", Path: path, Err: err}
	default:
		b, err = readFile(path)
	}
	if err != nil {
		if !isNotExist(err) && r.err == nil {
			r.err = err
		}
		return nil, false
	}
	return b, true
}

func (r *usageReader) uint(path string) (uint64, bool) {
	b, ok := r.file(path)
	if !ok {
		return 0, false
	}
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	n, err := parseUint(s)
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("%s: %w", path, err)
		}
		return 0, false
	}
	return n, true
}

func usageV2(r *usageReader, dir string, ctl [numCtl]string) (Usage, error) {
	var u Usage
	if ctl[ctlMemory] != "" {
		u.PeakMemoryBytes, _ = r.uint(dir + "/memory.peak")
		if b, ok := r.file(dir + "/memory.events"); ok {
			u.OOMKills, _ = keyed(b, "oom_kill")
		}
	}
	// cpu.stat's usage lines are there in every v2 group, with or without
	// the cpu controller.
	if b, ok := r.file(dir + "/cpu.stat"); ok {
		us, _ := keyed(b, "user_usec")
		sy, _ := keyed(b, "system_usec")
		u.CPUUser, u.CPUSystem = time.Duration(us)*time.Microsecond, time.Duration(sy)*time.Microsecond
	}
	if ctl[ctlPids] != "" {
		u.PidsPeak, u.PidsLimitHits = pidsUsage(r, dir)
	}
	return u, r.err
}

func usageV1(r *usageReader, ctl [numCtl]string) (Usage, error) {
	var u Usage
	if d := ctl[ctlMemory]; d != "" {
		u.PeakMemoryBytes, _ = r.uint(d + "/memory.max_usage_in_bytes")
		if b, ok := r.file(d + "/memory.oom_control"); ok {
			u.OOMKills, _ = keyed(b, "oom_kill")
		}
	}
	if d := ctl[ctlCPUAcct]; d != "" {
		// cpuacct.usage is the scheduler's exact runtime in ns; the
		// user/system split (cpuacct.stat, and usage_user/usage_sys too,
		// only in other units) is sampled at the timer tick, which a
		// throttled task can be in phase with. Scale the exact total by
		// the sampled split, as the kernel does for v2's cpu.stat
		// (cputime_adjust).
		total, ok := r.uint(d + "/cpuacct.usage")
		if b, ok2 := r.file(d + "/cpuacct.stat"); ok && ok2 {
			us, _ := keyed(b, "user")
			sy, _ := keyed(b, "system")
			u.CPUUser, u.CPUSystem = splitCPU(total, us, sy)
		}
	}
	if d := ctl[ctlPids]; d != "" {
		u.PidsPeak, u.PidsLimitHits = pidsUsage(r, d)
	}
	return u, r.err
}

// pidsUsage reads pids.peak (or pids.current) and pids.events' "max" from
// a pids directory (the same files on v1 and v2).
func pidsUsage(r *usageReader, d string) (peak, hits uint64) {
	var ok bool
	if peak, ok = r.uint(d + "/pids.peak"); !ok {
		peak, _ = r.uint(d + "/pids.current")
	}
	if b, ok := r.file(d + "/pids.events"); ok {
		hits, _ = keyed(b, "max")
	}
	return peak, hits
}

// splitCPU divides total ns of CPU time between user and system in the
// ratio of the sampled user and system ticks; without system ticks it is
// all user time (cputime_adjust's rule).
func splitCPU(total, userTicks, sysTicks uint64) (user, system time.Duration) {
	if sysTicks == 0 || userTicks+sysTicks == 0 {
		return time.Duration(total), 0
	}
	if userTicks == 0 {
		return 0, time.Duration(total)
	}
	// total*sys can overflow 64 bits past 2^64/2^32 ns; scale in floating
	// point, exact enough for accounting.
	s := uint64(float64(total) * float64(sysTicks) / float64(userTicks+sysTicks))
	return time.Duration(total - s), time.Duration(s)
}
