//go:build linux

package oci

import (
	"slices"
	"strconv"

	"github.com/hutchbox/hutch/runtime"
)

// unexpressed lists what hutch enforces for p that the OCI form f of
// view v does not, or does differently: said in the export's output and
// every Result, never dropped silently.
func unexpressed(v view, f *Form) []string {
	p := v.Policy
	userns := "user namespace: none; the command runs as the caller's uid and gid (" + uidOf(f) + ") with no capabilities, where hutch maps it into a user namespace of its own"
	if f.Rootless {
		m := f.Spec.Linux.UIDMappings[0]
		g := f.Spec.Linux.GIDMappings[0]
		userns = "user namespace: the runtime's own, mapping only the caller's uid and gid (" + strconv.FormatUint(uint64(m.HostID), 10) + ":" + strconv.FormatUint(uint64(g.HostID), 10) +
			") to 0: the command runs as root of that namespace with no capabilities, where hutch's runs as the caller's uid"
	}
	out := []string{
		"landlock: no Landlock ruleset (OCI runtime-spec has none); the mounts alone are the filesystem boundary",
		userns,
		"unix sockets: no socket wall; a unix socket reachable in the read-only tree outside the hidden /run can be connected to",
		"deny names and git guards: the matches and repositories found at export are masked and guarded; ones created later (hutch re-reads the top levels for every command) are not, and Result.Repositories is not reported",
		"masks of paths that do not exist at export are maskedPaths: runc and crun mask them if they exist when the command starts (as empty files), runsc ignores them; existing ones are mounted over, unreadable, as hutch's are",
		"leak scanning: no scan of arguments, environment or output (hutch-side)",
		"output limit: hutch-side; not applied to the runtime's output",
		"pid 1: the command is pid 1 of its pid namespace, where signals it has no handler for (SIGTERM, SIGINT) do not end it; hutch's own init is pid 1 and passes them on",
		"HOME is a tmpfs of its own in the private /tmp, not a directory in it",
	}
	switch p.Network {
	case runtime.NetworkAllow:
		out = append(out, "network allow: the egress proxy and its allow-list are hutch's; the bundle's network namespace has nothing in it, so no domain is reachable")
	case runtime.NetworkHost:
		out = append(out, "network host: the host's network, no isolation (as hutch's --net host)")
	default:
		out = append(out, "loopback: the runtime leaves lo down in the network namespace; hutch brings it up")
	}
	if v.ModeWall {
		out = append(out, "seccomp mode wall: hutch stacks its no-setuid-file rules under a caller's profile; OCI takes one profile, so only the caller's applies")
	}
	if v.Seccomp == nil {
		out = append(out, "seccomp: skipped by the policy")
	}
	if f.Rootless {
		// As hutch's own backend says them without cgroups.
		if v.Limits.MemoryBytes > 0 {
			out = append(out, "memory (rootless, no cgroup): the limit is RLIMIT_DATA per process; shared memory (memfd, MAP_SHARED, /dev/shm) and the sum over processes are not bounded")
		}
		if v.Limits.Pids > 0 {
			out = append(out, "pids (rootless, no cgroup): the limit is RLIMIT_NPROC, which counts every process of the caller's uid on the host, not the command's own")
		}
		if v.Limits.CPUs > 0 {
			out = append(out, "cpus (rootless, no cgroup): not limited")
		}
		out = append(out, "usage (rootless, no cgroup): the Result has none")
		if f.HostRoot {
			out = append(out, "root: the host's /, bound read-only (rro) by the configuration's first mount")
		}
		return out
	}
	if f.HostRoot {
		out = append(out, "root: the bundle's rootfs must hold the host's / bound read-only and recursively when the runtime starts (mount --rbind / rootfs; mount -o remount,bind,ro, recursively); hutch run --backend oci does it in a mount namespace of its own")
	}
	return out
}

// runtimeUnexpressed adds to f's list what the runtime named does
// differently from the configuration's letter.
func runtimeUnexpressed(runtimeName string, f *Form) []string {
	out := slices.Clone(f.Unexpressed)
	if runtimeName != "runsc" {
		return out
	}
	if r := f.Spec.Linux.Resources; r != nil && r.Pids != nil {
		out = append(out, "pids (runsc): the limit holds the sandbox's host cgroup, where the gVisor kernel's own threads count; the command's processes are gVisor tasks, not host processes, and are bounded by the memory limit, not this one")
	}
	return out
}

// uidOf is the uid and gid the form's command runs as, for messages.
func uidOf(f *Form) string {
	u := f.Spec.Process.User
	return strconv.FormatUint(uint64(u.UID), 10) + ":" + strconv.FormatUint(uint64(u.GID), 10)
}
