//go:build linux

package ociview

import (
	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/seccomp"
)

// View is a runtime.Resolved compiled for an OCI runtime, which makes the
// namespaces: the plan of runtime.LevelNamespaces, whatever level the
// Resolved came to on the host that checked it.
type View struct {
	// Mounts is the view a command started now would get, top-level and
	// deep deny-name matches and git guards included.
	Mounts mounts.Plan
	// Seccomp is the system-call filter; nil when the policy's SkipLayers
	// skips it. SeccompName names it as runtime.Result.SeccompProfile does.
	Seccomp     *seccomp.Profile
	SeccompName string
	// ModeWall is set when hutch stacks its mode rules (no setuid files)
	// as a second filter under a caller's profile; OCI has one filter.
	ModeWall bool
	// Env is every command's base environment, the policy's Env merged.
	Env []string
	// HostEnv names the variables of Env whose values are the host's
	// (PATH, the locale, the terminal, the user, RUSTUP_HOME), not the
	// policy's: right for a command on the host's root, wrong in an
	// image's, which has its own.
	HostEnv []string
	// Limits go into the command's cgroup; Rlimits are set per process.
	Limits  cgroups.Limits
	Rlimits []cgroups.Rlimit
	// Hostname is the sandbox's host name.
	Hostname string
}

// Compile compiles resolved, a *runtime.Resolved, into a View. Package
// runtime sets it when it is initialised; package oci, which imports
// runtime, calls it. It is a variable and not a function of runtime's so
// that the compiler stays unexported there, beside the plan it shares
// with every command.
var Compile func(resolved any) (View, error)
