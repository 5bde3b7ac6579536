package cgroups

import (
	"fmt"
	"time"
)

// Usage is what a group's command consumed. Read it after the command has
// ended and before Destroy.
type Usage struct {
	// PeakMemoryBytes is the highest memory charge of the group (v2
	// memory.peak, Linux 5.19; v1 memory.max_usage_in_bytes). Page cache
	// counts, as it does against the limit.
	PeakMemoryBytes uint64 `json:"peak_memory_bytes"`
	// CPUUser and CPUSystem are the CPU time of every process that ran in
	// the group (v2 cpu.stat; v1 cpuacct.usage, split as cpuacct.stat).
	CPUUser   time.Duration `json:"cpu_user_ns"`
	CPUSystem time.Duration `json:"cpu_system_ns"`
	// PidsPeak is the most processes and threads alive at once (pids.peak
	// where the kernel has it; otherwise pids.current, which after the
	// command has ended is 0 and says nothing).
	PidsPeak uint64 `json:"pids_peak"`
	// PidsLimitHits counts forks refused at the pids limit (pids.events
	// "max").
	PidsLimitHits uint64 `json:"pids_limit_hits"`
	// OOMKills counts processes the kernel's OOM killer ended for the
	// group's memory limit (v2 memory.events oom_kill; v1
	// memory.oom_control oom_kill).
	OOMKills uint64 `json:"oom_kills"`
}

// Usage reads the group's accounting: a handful of small files, only those
// behind the fields (not the controllers' whole stat files).
func (g *Group) Usage() (Usage, error) {
	if g.m.v2 {
		return usageV2(g.dirs[0], g.ctl)
	}
	return usageV1(g.ctl)
}

// usageReader keeps the first error that is not a missing file (a missing
// file is a kernel without that counter, or a controller the group lacks).
type usageReader struct{ err error }

func (r *usageReader) file(path string) ([]byte, bool) {
	b, err := readFile(path)
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

func usageV2(dir string, ctl [numCtl]string) (Usage, error) {
	var u Usage
	var r usageReader
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
		u.PidsPeak, u.PidsLimitHits = pidsUsage(&r, dir)
	}
	return u, r.err
}

func usageV1(ctl [numCtl]string) (Usage, error) {
	var u Usage
	var r usageReader
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
		u.PidsPeak, u.PidsLimitHits = pidsUsage(&r, d)
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
