// Package cgroups owns the per-command control groups of hutch: where they
// live, the limits written into them before anything runs there, the
// accounting read back after the command, and a teardown that cannot leak
// (kill everything in the group, remove it, and sweep groups a crashed host
// left behind).
//
// Three host layouts are handled:
//
//   - V2: /sys/fs/cgroup is cgroup2 with controllers (most current
//     distributions). One directory per command; the command is cloned
//     straight into it (CLONE_INTO_CGROUP, see Group.FD), so it never runs
//     outside its limits, and cgroup.kill ends it atomically.
//   - V1: one hierarchy per controller (or per co-mounted set such as
//     "cpu,cpuacct"). One directory per command in each hierarchy a
//     command needs (memory, pids, cpuacct and freezer always; cpu with a
//     CPU limit, blkio with an io weight); the command's process joins it
//     before it runs anything of the command (Group.Add, or better
//     nsinit's STEP_CGROUP_JOIN), and is killed under the freezer.
//   - Hybrid: v1 controllers plus a cgroup2 mount without controllers
//     (systemd's "hybrid" mode). Limits can only live in the v1
//     hierarchies, so groups are made exactly as on V1.
//
// Costs measured on this package's development host (hybrid, Linux 6.18,
// 2 vCPUs; see bench_test.go): Create+Destroy of a group with memory, pids
// and CPU limits 0.39 ms (five v1 hierarchies: a mkdir and an rmdir of
// 20-70 us each, and three limit writes); with a live process attached and
// killed at Destroy, 1.4 ms. Attaching a process by pid (Add) after the
// host has been idle for a while costs 5-12 ms: cgroup.procs takes the
// kernel's global threadgroup rwsem, whose writer waits out an RCU grace
// period. A thread moving itself (writing "0" to tasks) does not, and costs 0.1 ms.
//
// # Why most of github.com/containerd/cgroups/v3 is not used here
//
// The library is the project's chosen dependency, and this package uses it
// where it costs nothing: the root package's /proc/self/cgroup parser. Its
// cgroup1 and cgroup2 managers are not imported by the package proper, for
// reasons measured on this code base:
//
//   - hutch used to re-execute the host binary (/proc/self/exe) as the
//     init of every sandbox, so every package linked into it paid its
//     init functions on every command (the init is C now, and runs none). Importing cgroup2 links protobuf (its
//     stats types), logrus, cilium/ebpf and dbus: measured on a binary
//     linking hutch's runtime package, +6.3 MB and +0.5 ms per exec at the
//     median (2.65 ms against 2.15 ms; 33 more package inits); cgroup1
//     costs +4.7 MB and +0.35 ms. Placing a command in a v2 cgroup costs
//     about 0.5 ms in all, so the import would double it.
//   - cgroup1.New creates the group in every mounted hierarchy (cpuset,
//     devices, net_cls, hugetlb, ...), copying cpuset.cpus/mems, where a
//     command needs four or five; each extra hierarchy is a mkdir and an
//     rmdir of 20-70 us and another cgroup.procs write.
//   - cgroup2.NewManager rewrites cgroup.subtree_control of every ancestor
//     on every create, and its IO type knows io.bfq.weight but not
//     io.weight.
//
// The file-level logic is small: which file gets which value, in the
// kernel's formats, is written out below with the reason for each choice.
// The tests check the v2 writes against the library's cgroup2 manager as an
// oracle (a test-only import, which does not reach any binary).
package cgroups
