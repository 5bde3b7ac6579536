//go:build linux

package cgroups

import (
	"fmt"
	"math"
	"strconv"
)

// Limits are the resource limits of one command. Zero means no limit.
type Limits struct {
	// MemoryBytes bounds the command's memory (anonymous memory, page cache
	// and kernel memory charged to it). Past it the kernel reclaims, then
	// OOM-kills a process of the command.
	MemoryBytes int64
	// SwapBytes is how much swap the command may use on top of
	// MemoryBytes. With MemoryBytes set and SwapBytes 0 the command gets no
	// swap: otherwise a memory limit would only move the excess to disk.
	SwapBytes int64
	// Pids bounds the number of processes and threads alive at once.
	Pids int64
	// CPUs is a rate in cores: 1.5 lets the command use 150 ms of CPU time
	// per 100 ms period across all CPUs.
	CPUs float64
	// IOWeight is the proportional share of block IO on the cgroup v2
	// io.weight scale (1-10000, default 100). Where only BFQ's weight
	// (1-1000, default 100) exists it is clamped to that range, which
	// keeps the meaning of values near the default. Best effort: hosts
	// whose IO schedulers offer no weight do not enforce it.
	IOWeight uint16
	// FileSizeBytes bounds the size of any file the command writes. Cgroups
	// have no such limit; it is enforced only through RLIMIT_FSIZE (see
	// Rlimits) and ignored by Create.
	FileSizeBytes int64
}

// cpuPeriod is the CFS period hutch uses, in microseconds: the kernel's
// default for both v1 and v2, so a fresh v1 group needs no period write.
const cpuPeriod = 100000

// minQuota is the smallest CFS quota the kernel accepts (1 ms).
const minQuota = 1000

// MaxPids is the kernel's PID_MAX_LIMIT: pids.max takes no more.
const MaxPids = 1 << 22

// Validate reports a limit no kernel would apply as given. Create checks
// it too; a caller that tells its own bad values from the host's failures
// checks it first.
func (l Limits) Validate() error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("cgroups: negative MemoryBytes %d", l.MemoryBytes)
	case l.SwapBytes < 0:
		return fmt.Errorf("cgroups: negative SwapBytes %d", l.SwapBytes)
	case l.Pids < 0:
		return fmt.Errorf("cgroups: negative Pids %d", l.Pids)
	case l.Pids > MaxPids:
		return fmt.Errorf("cgroups: Pids %d above the kernel's limit of %d", l.Pids, MaxPids)
	case l.FileSizeBytes < 0:
		return fmt.Errorf("cgroups: negative FileSizeBytes %d", l.FileSizeBytes)
	case l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return fmt.Errorf("cgroups: invalid CPUs %v", l.CPUs)
	case l.IOWeight > 10000:
		return fmt.Errorf("cgroups: IOWeight %d out of range 1-10000", l.IOWeight)
	case l.MemoryBytes > 0 && l.SwapBytes > math.MaxInt64-l.MemoryBytes:
		return fmt.Errorf("cgroups: MemoryBytes+SwapBytes overflows")
	case l.CPUs*cpuPeriod > math.MaxInt64/2:
		return fmt.Errorf("cgroups: CPUs %v too large", l.CPUs)
	}
	return nil
}

// cpuQuota is the CFS quota in microseconds per cpuPeriod for CPUs.
func (l Limits) cpuQuota() int64 {
	return max(int64(math.Round(l.CPUs*cpuPeriod)), minQuota)
}

// cpuMax is the v2 cpu.max value: "quota period".
func (l Limits) cpuMax() string {
	return strconv.FormatInt(l.cpuQuota(), 10) + " " + strconv.Itoa(cpuPeriod)
}

// bfqWeight is IOWeight on BFQ's 1-1000 scale.
func (l Limits) bfqWeight() uint16 { return min(max(l.IOWeight, 1), 1000) }

// legacyBlkioWeight is IOWeight on CFQ's 10-1000 scale (v1 blkio.weight,
// kernels before 5.0).
func (l Limits) legacyBlkioWeight() uint16 { return min(max(l.IOWeight, 10), 1000) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
