//go:build linux

package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/internal/ociview"
)

func init() {
	ociview.Compile = func(resolved any) (ociview.View, error) {
		r, ok := resolved.(*Resolved)
		if !ok || r == nil {
			return ociview.View{}, fmt.Errorf("hutch: the OCI form compiles a *runtime.Resolved, not %T", resolved)
		}
		return ociView(r)
	}
}

// checkOCI is Check of a policy for an OCI runtime (Backend BackendOCI),
// which makes the namespaces itself: the policy is resolved and validated
// as New would at LevelNamespaces, whatever this host offers, and the
// host's namespaces are not probed. The Resolved keeps BackendOCI, which
// NewResolved refuses as New does.
func checkOCI(p Policy) (*Resolved, error) {
	sb, err := namespacesSandbox(p)
	if err != nil {
		return nil, err
	}
	defer sb.closeTrees()
	if err := sb.setupGrants(p, sb.policy); err != nil {
		return nil, err
	}
	res := sb.resolved()
	res.policy.Backend = BackendOCI
	return res, nil
}

// namespacesSandbox is p resolved and validated at LevelNamespaces for an
// OCI runtime, without probing the host's namespaces: checkOCI's decision,
// and ociView's again from its Resolved (as NewResolved decides again).
// The caller closes its trees.
func namespacesSandbox(p Policy) (*Sandbox, error) {
	if p.Backend == BackendOCI || p.Backend == BackendAuto {
		p.Backend = ""
	}
	if p.AllowNested {
		// The bundle's /proc, its masks and its id mappings are the
		// runtime's, which checkNested's reasoning does not cover.
		return nil, &PolicyError{Field: "AllowNested", Value: "true", Reason: "not carried to an OCI runtime: nested sandboxes run with the namespaces backend"}
	}
	if p.Root != "" {
		// The bundle's root is its own (hutch oci export --rootfs).
		return nil, &PolicyError{Field: "Root", Value: p.Root, Reason: "not carried to an OCI runtime: give it as the bundle's root (hutch oci export --rootfs), or run with the namespaces backend"}
	}
	r, err := resolvePolicy(p, linuxRules())
	if err != nil {
		return nil, err
	}
	if r.policy.Unsandboxed {
		return nil, &PolicyError{Field: "Backend", Value: string(BackendNone), Reason: "the disabled mode has no OCI form"}
	}
	sb := resolvedSandbox(r)
	sb.level = LevelNamespaces
	if err := sb.validate(r); err != nil {
		sb.closeTrees()
		return nil, err
	}
	return sb, nil
}

// ociView compiles r for an OCI runtime: r's policy decided again at
// LevelNamespaces, without probing the host's namespaces or creating
// anything but the missing code directories of the repositories' git
// directories (as every command's start does).
func ociView(res *Resolved) (ociview.View, error) {
	sb, err := namespacesSandbox(res.policy)
	if err != nil {
		return ociview.View{}, err
	}
	defer sb.closeTrees() // read once, for the export
	f, err := sb.readFresh()
	if err != nil {
		return ociview.View{}, err
	}
	sb.setupEnv()
	pol := &sb.policy
	v := ociview.View{
		Mounts:   sb.plan(f),
		Env:      mergeEnv(sb.env, pol.Env),
		Limits:   cgroups.Limits{MemoryBytes: enforced(pol.Memory), Pids: enforced(pol.Pids), CPUs: enforced(pol.CPUs), FileSizeBytes: enforced(pol.FileSize)},
		Hostname: sb.config(f).Hostname,
		ModeWall: sb.modeWall != nil,
	}
	for _, k := range hostEnv() {
		// The policy's own value is the policy's, not the host's.
		if !slices.ContainsFunc(pol.Env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") }) {
			v.HostEnv = append(v.HostEnv, k)
		}
	}
	// The per-process limits every init sets when the limits are in a
	// cgroup (setupLimits): an OCI runtime puts the rest in its cgroup.
	v.Rlimits = cgroups.Rlimits(cgroups.Limits{FileSizeBytes: v.Limits.FileSizeBytes})
	if !slices.Contains(pol.SkipLayers, LayerSeccomp) {
		// The bundle runs on a kernel this host does not know: tracing
		// stays allowed, as in Docker's and Podman's profiles, which
		// allow it from Linux 4.8 on (see seccomp.Tracing).
		prof, builtin, name, err := filterProfile(pol, sb.level, false)
		if err != nil {
			return ociview.View{}, err
		}
		if builtin != "" {
			prof = builtin.Profile()
		}
		v.Seccomp, v.SeccompName = prof, name
	}
	return v, nil
}
