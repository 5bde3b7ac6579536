//go:build linux

package runtime

import (
	"slices"
	"sync"

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
		// One throwaway group proves the limits can be applied here.
		var g *cgroups.Group
		if g, err = m.Create(sb.limits); err == nil {
			_ = g.Destroy()
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
