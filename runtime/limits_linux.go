//go:build linux

package runtime

import (
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
)

var (
	managerOnce sync.Once
	manager     *cgroups.Manager
	managerErr  error
)

// cgroupManager is the process's cgroup manager, made on first use.
func cgroupManager() (*cgroups.Manager, error) {
	managerOnce.Do(func() { manager, managerErr = cgroups.NewManager() })
	return manager, managerErr
}

// setupLimits decides, once per Sandbox, how the policy's limits are
// enforced: a cgroup per command, or (if the policy allows degrading)
// rlimits. It also sweeps groups a crashed host left behind. The limits
// are the caller's validated values, so a group that cannot be made is
// the host's failure: only that may degrade.
func (sb *Sandbox) setupLimits() error {
	p := &sb.policy
	sb.limits = cgroups.Limits{MemoryBytes: enforced(p.Memory), Pids: enforced(p.Pids), CPUs: enforced(p.CPUs), FileSizeBytes: enforced(p.FileSize)}
	// checkLimits vetted the values already; should the two ever disagree,
	// the caller's value is still refused, never degraded to rlimits.
	if err := sb.limits.Validate(); err != nil {
		return &PolicyError{Field: "Memory, Pids, CPUs or FileSize", Reason: err.Error()}
	}
	// Core dumps and file-size and fd caps are per process in any case.
	base := cgroups.Rlimits(cgroups.Limits{FileSizeBytes: sb.limits.FileSizeBytes})
	if l := sb.limits; l.MemoryBytes == 0 && l.Pids == 0 && l.CPUs == 0 {
		sb.rlimits = base
		return nil
	}
	m, err := cgroupManager()
	if err == nil {
		if _, err = m.Sweep(); err != nil {
			p.logger().Debug("hutch: cgroup sweep", "err", err)
		}
		// One group proves the limits can be applied here; the first
		// init gets it.
		var g *cgroups.Group
		if g, err = sb.createGroup(m); err == nil {
			// What it could not enforce, every group of this host will
			// not either: the Result of a command that never got a group
			// of its own says so from this.
			sb.cgroupUnenforced = g.Unenforced()
			sb.probeGroup.Store(g)
			sb.cgroups, sb.rlimits = m, base
			return nil
		}
	}
	if !slices.Contains(p.AllowDegraded, LayerCgroup) {
		return &LayerError{Layer: LayerCgroup, Reason: err.Error(), Remedy: "run as root, delegate a cgroup v2 subtree (systemd Delegate=yes), or allow degrading to rlimits"}
	}
	sb.cgroupSkip = "cgroups unavailable, limits are per-process rlimits: " + err.Error()
	// Info, not Warn: every Result says it too; the log says it once.
	p.logger().Info("hutch: "+sb.cgroupSkip, "memory", p.Memory, "pids", p.Pids)
	sb.rlimits = cgroups.Rlimits(sb.limits)
	return nil
}

// newGroup is the cgroup of a new init: the probe group while no init
// has taken it, otherwise one made now.
func (sb *Sandbox) newGroup() (*cgroups.Group, error) {
	if g := sb.probeGroup.Swap(nil); g != nil {
		return g, nil
	}
	return sb.createGroup(sb.cgroups)
}

// createGroup makes an init's group in m. When the init is pid 1 of its
// sandbox, its end kills everything in it at once: the group needs no
// freezer on v1 (CreateInPidNS), a mkdir, an rmdir and a join less for
// every command. Without a pid namespace (LevelLandlock) the freezer is
// what stops a forking command between the listing of its processes and
// their kill.
func (sb *Sandbox) createGroup(m *cgroups.Manager) (*cgroups.Group, error) {
	if sb.cloneflags()&unix.CLONE_NEWPID != 0 {
		return m.CreateInPidNS(sb.limits)
	}
	return m.Create(sb.limits)
}

// dropProbeGroup removes the probe group if no init took it.
func (sb *Sandbox) dropProbeGroup() {
	if g := sb.probeGroup.Swap(nil); g != nil {
		if err := g.Destroy(); err != nil {
			sb.policy.logger().Warn("hutch: remove cgroup", "group", g.Path(), "err", err)
		}
	}
}

// limitsUnenforced says, one line each, which of the policy's limits do
// not hold as asked: without cgroups, what the rlimits fallback cannot
// bound; with them, what the command's group could not enforce (group,
// from Group.Unenforced: swap without swap accounting, ...).
func (sb *Sandbox) limitsUnenforced(group []string) []string {
	p := &sb.policy
	if sb.cgroups != nil {
		return group
	}
	var out []string
	if p.Memory > 0 {
		// RLIMIT_DATA is what the fallback has: it counts one process's
		// private memory, not what it maps shared (a memfd or /dev/shm
		// filled a GiB under a 256 MiB limit), nor the sum of a tree.
		out = append(out, "memory: without cgroups the limit is RLIMIT_DATA per process; shared memory (memfd, MAP_SHARED, /dev/shm) and the sum over processes are not bounded")
	}
	if p.Pids > 0 {
		out = append(out, fmt.Sprintf("pids: without cgroups the limit is RLIMIT_NPROC, which counts every process of the host's uid %d, not the command's own", sb.uid))
	}
	if p.CPUs > 0 {
		out = append(out, "cpus: without cgroups there is no CPU rate limit (RLIMIT_CPU bounds total seconds, not a rate; Timeout bounds the time)")
	}
	return out
}
