//go:build linux

package runtime

import (
	"slices"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/seccomp"
)

// OCIView is a policy resolved as New resolves it, in the terms an OCI
// runtime's configuration takes (package oci writes it out): the same
// mount plan, filter, environment and limits hutch's own inits get, so
// that each rule has one implementation.
type OCIView struct {
	// Policy is the policy as resolved (Sandbox.Policy's form).
	Policy Policy
	// Mounts is the view a command started now would get, top-level and
	// deep deny-name matches and git guards included.
	Mounts mounts.Plan
	// Seccomp is the system-call filter; nil when SkipLayers skips it.
	// SeccompName names it as Result.SeccompProfile does.
	Seccomp     *seccomp.Profile
	SeccompName string
	// ModeWall is set when hutch stacks its mode rules (no setuid files)
	// as a second filter under a caller's profile; OCI has one filter.
	ModeWall bool
	// Env is every command's base environment, the policy's Env merged.
	Env []string
	// Limits go into the command's cgroup; Rlimits are set per process.
	Limits  cgroups.Limits
	Rlimits []cgroups.Rlimit
	// Hostname is the sandbox's host name.
	Hostname string
}

// ExportView resolves p as New does at LevelNamespaces, without probing
// the host's namespaces or creating anything but the missing code
// directories of the repositories' git directories (as every command's
// start does), and returns what the OCI form of p is built from. A
// Backend of BackendOCI is what it is for, and is accepted.
func ExportView(p Policy) (OCIView, error) {
	if p.Backend == BackendOCI || p.Backend == BackendAuto {
		p.Backend = ""
	}
	r, err := resolvePolicy(p, linuxRules())
	if err != nil {
		return OCIView{}, err
	}
	if r.policy.Unsandboxed {
		return OCIView{}, &PolicyError{Field: "Backend", Value: string(BackendNone), Reason: "the disabled mode has no OCI form"}
	}
	sb := resolvedSandbox(r)
	sb.level = LevelNamespaces
	defer sb.closeTrees() // read once, for the export
	if err := sb.validate(r); err != nil {
		return OCIView{}, err
	}
	f, err := sb.readFresh()
	if err != nil {
		return OCIView{}, err
	}
	sb.setupEnv()
	pol := &sb.policy
	v := OCIView{
		Policy:   pol.clone(),
		Mounts:   sb.plan(f),
		Env:      mergeEnv(sb.env, pol.Env),
		Limits:   cgroups.Limits{MemoryBytes: enforced(pol.Memory), Pids: enforced(pol.Pids), CPUs: enforced(pol.CPUs), FileSizeBytes: enforced(pol.FileSize)},
		Hostname: sb.config(f).Hostname,
		ModeWall: sb.modeWall != nil,
	}
	// The per-process limits every init sets when the limits are in a
	// cgroup (setupLimits): an OCI runtime puts the rest in its cgroup.
	v.Rlimits = cgroups.Rlimits(cgroups.Limits{FileSizeBytes: v.Limits.FileSizeBytes})
	if !slices.Contains(pol.SkipLayers, LayerSeccomp) {
		prof, builtin, name, err := filterProfile(pol, sb.level)
		if err != nil {
			return OCIView{}, err
		}
		if builtin != "" {
			prof = builtin.Profile()
		}
		v.Seccomp, v.SeccompName = prof, name
	}
	return v, nil
}
