// Package cgroups owns the per-command control groups of hutch: where they
// live, the limits written into them before anything runs there, the
// accounting read back after the command, and a teardown that cannot leak
// (kill everything in the group, remove it, and sweep groups a crashed host
// left behind).
//
// Three host layouts are handled:
//
//   - V2: /sys/fs/cgroup is cgroup2 with controllers (most current
//     distributions). One directory per command; the command can be cloned
//     straight into it (CLONE_INTO_CGROUP, see Group.FD), so it never runs
//     outside its limits, and cgroup.kill ends it atomically.
//   - V1: one hierarchy per controller (or per co-mounted set such as
//     "cpu,cpuacct"). One directory per command in each hierarchy hutch
//     uses (memory, pids, cpu, cpuacct, freezer, and blkio when an io
//     weight is asked for); the process is attached with Group.Add, and
//     killed under the freezer.
//   - Hybrid: v1 controllers plus a cgroup2 mount without controllers
//     (systemd's "hybrid" mode). Limits can only live in the v1
//     hierarchies, so groups are made exactly as on V1.
//
// # Why most of github.com/containerd/cgroups/v3 is not used here
//
// The library is the project's chosen dependency, and this package uses it
// where it costs nothing: the root package's /proc/self/cgroup parser. Its
// cgroup1 and cgroup2 managers are not imported by the package proper, for
// reasons measured on this code base:
//
//   - hutch re-executes the host binary (/proc/self/exe) as the init of
//     every sandbox, so every package linked into it pays its init
//     functions on every command. Importing cgroup2 links protobuf (the
//     stats types), logrus, cilium/ebpf and dbus: +8 MB of binary and about
//     1.5 ms more per exec (a binary with only that import starts in 2.75 ms
//     at the median against 1.16 ms for an empty one; cgroup1 alone costs
//     +6.4 MB and +0.6 ms of init). The whole per-command cgroup cost on v2
//     is about 0.5 ms, so the import would cost more than the feature.
//   - cgroup1.New creates the group in every mounted hierarchy (cpuset,
//     devices, net_cls, hugetlb, ...), copying cpuset.cpus/mems, where a
//     sandbox needs five; each mkdir of a v1 group is tens of microseconds
//     and each extra attach is another cgroup.procs write.
//   - cgroup2.NewManager rewrites cgroup.subtree_control of every ancestor
//     on every create, and its IO type knows io.bfq.weight but not
//     io.weight.
//
// The file-level logic is small: which file gets which value, in the
// kernel's formats, is written out below with the reason for each choice.
// The tests check the v2 writes against the library's cgroup2 manager as an
// oracle (a test-only import, which does not reach any binary).
package cgroups
