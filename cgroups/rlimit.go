//go:build linux

package cgroups

import "golang.org/x/sys/unix"

// Rlimit is one resource limit to set with setrlimit(2).
type Rlimit struct {
	Resource   int // unix.RLIMIT_*
	Soft, Hard uint64
}

// NoFileCap is the RLIMIT_NOFILE a sandboxed command gets at most: enough for
// any build or test run, far below the million-fd hard limits some hosts set
// (a process that sizes tables by the limit, or loops over every possible
// fd, is slow with those).
const NoFileCap = 65536

// Rlimits is the rlimit fallback for hosts without writable cgroups (and
// the per-process limits cgroups do not provide). It is a pure function of
// l; the sandbox init applies the result without ever raising a current
// limit.
//
//   - RLIMIT_CORE is 0 always: a core dump of a sandboxed process would be
//     written by the kernel on the host's terms (core_pattern may pipe to a
//     host helper), outside the sandbox's accounting.
//   - RLIMIT_NOFILE is capped at NoFileCap.
//   - RLIMIT_DATA from MemoryBytes: the private writable memory of each
//     process (heap, anonymous mappings), not its address space. RLIMIT_AS
//     would count the large PROT_NONE ranges that runtimes reserve up front
//     (Go's arenas, V8's pointer-compression cage, the JVM's heap) and make
//     them fail to start under a limit they would fit; it would also stop
//     the Go sandbox init itself, which carries these limits to the command.
//     It bounds each process, not the command's total.
//   - RLIMIT_NPROC from Pids. It is not a per-sandbox count: it limits the
//     processes of the real uid, and the sandbox's uid maps to the host
//     user's own, so processes the user already runs elsewhere on the host
//     count against it (on kernels since 5.14 the count is kept per user
//     namespace and uid, but every ancestor namespace's count is checked
//     too). It is therefore only approximately the command's own limit.
//   - RLIMIT_CPU is not derived from CPUs: CPUs is a rate (cores), RLIMIT_CPU
//     a total of seconds; a timeout is the right bound on total time.
//   - RLIMIT_FSIZE from FileSizeBytes: the largest file any process of the
//     command may write (SIGXFSZ, then EFBIG, beyond it).
func Rlimits(l Limits) []Rlimit {
	rl := []Rlimit{
		{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0},
		{Resource: unix.RLIMIT_NOFILE, Soft: NoFileCap, Hard: NoFileCap},
	}
	if l.MemoryBytes > 0 {
		rl = append(rl, Rlimit{Resource: unix.RLIMIT_DATA, Soft: uint64(l.MemoryBytes), Hard: uint64(l.MemoryBytes)})
	}
	if l.Pids > 0 {
		rl = append(rl, Rlimit{Resource: unix.RLIMIT_NPROC, Soft: uint64(l.Pids), Hard: uint64(l.Pids)})
	}
	if l.FileSizeBytes > 0 {
		rl = append(rl, Rlimit{Resource: unix.RLIMIT_FSIZE, Soft: uint64(l.FileSizeBytes), Hard: uint64(l.FileSizeBytes)})
	}
	return rl
}

// ForChild reports whether r must be set by the command's process itself,
// just before its exec, rather than inherited from the one that starts it: a memory limit low enough
// for a command could stop hutch's sandbox init, whose address space (the
// host binary it was cloned from) may already be larger than many
// commands need, before it has read its command.
func (r Rlimit) ForChild() bool {
	return r.Resource == unix.RLIMIT_DATA || r.Resource == unix.RLIMIT_AS
}
