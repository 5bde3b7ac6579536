package cgroups

import "time"

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
