//go:build linux

package runtime

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
)

// Sandbox is a validated Policy plus what was learned about the host, ready
// to run commands. It is safe for concurrent use by many goroutines.
type Sandbox struct {
	policy Policy
	spec   mounts.Spec // the view, minus what is re-read per command
	// names are the deny names in effect; deep are the paths matching
	// them found below the top level of the writable trees when the
	// Sandbox was made (the top levels are re-read for every command).
	names []string
	deep  named
	// deepRepos are the git repositories below the top level of the
	// writable trees when the Sandbox was made (the top levels are
	// re-read for every command).
	deepRepos []gitRepo
	env       []string // the base environment of every command
	uid, gid  int
	// filter is the compiled system-call filter, loaded by every init;
	// filterName says which profile it is, for results.
	filter     []byte
	filterName string
	// modeWall is seccomp.ModeWall compiled, for a profile of the caller's
	// own or the default with SeccompAllow.
	modeWall []byte
	// pool holds prewarmed inits when Policy.Prewarm > 0.
	pool *pool

	// limits go into a cgroup per command when cgroups is set; rlimits
	// are set in every init (the fallback for limits without cgroups,
	// and the per-process limits cgroups do not have).
	limits     cgroups.Limits
	cgroups    *cgroups.Manager
	cgroupSkip string // why limits are not in a cgroup, when they are not
	rlimits    []cgroups.Rlimit

	// landlock is the ruleset every init restricts its forking thread to;
	// landlockSkip says why there is none, when there is none.
	landlock     *landlock.Ruleset
	landlockSkip string

	// netRules is the parsed allow-list of Network "allow".
	netRules *netns.Rules

	// unixWall is seccomp.UnixWall compiled, for inits whose Landlock
	// cannot guard unix sockets; nil when the layer is skipped or there
	// are no namespaces (LevelLandlock refuses socket(2) altogether).
	unixWall []byte

	levelState
}

// New validates p and probes the host once. Every later Command reuses
// the result.
func New(p Policy) (*Sandbox, error) {
	// The Sandbox owns its copy: a caller changing its slices afterwards
	// must not change what later commands get.
	sb := &Sandbox{policy: p.clone(), uid: os.Getuid(), gid: os.Getgid()}
	// Numbers before anything is probed: a layer that then fails to apply
	// a limit fails for the host's reasons, not the caller's value.
	if err := checkLimits(&sb.policy); err != nil {
		return nil, err
	}
	// The level first: the filesystem view, the filter and the Landlock
	// ruleset depend on it.
	if err := sb.chooseLevel(); err != nil {
		return nil, err
	}
	if err := sb.validate(); err != nil {
		return nil, err
	}
	if err := sb.setupNetwork(); err != nil {
		return nil, err
	}
	if err := sb.setupLimits(); err != nil {
		return nil, err
	}
	if err := sb.setupLandlock(); err != nil {
		return nil, err
	}
	if sb.policy.Prewarm > 0 {
		sb.pool = newPool(sb, sb.policy.Prewarm)
	}
	sb.policy.logger().Debug("hutch: sandbox ready", "workspace", sb.policy.Workspace, "level", sb.level,
		"cgroups", sb.cgroups != nil, "landlock", sb.landlock != nil, "network", sb.policy.Network)
	return sb, nil
}

// Policy returns the validated policy, with paths as resolved.
func (sb *Sandbox) Policy() Policy { return sb.policy.clone() }

// probeUserNS checks from the host's sysctls, without starting a process,
// that user namespaces can be created.
func probeUserNS(uid int) error {
	read := func(p string) (int, bool) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil
	}
	if n, ok := read("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		return &LayerError{Layer: LayerUserNS, Reason: "user.max_user_namespaces is 0", Remedy: "sysctl -w user.max_user_namespaces=15000"}
	}
	if uid != 0 {
		if n, ok := read("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
			return &LayerError{Layer: LayerUserNS, Reason: "kernel.unprivileged_userns_clone is 0", Remedy: "sysctl -w kernel.unprivileged_userns_clone=1"}
		}
		if n, ok := read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
			return &LayerError{Layer: LayerUserNS, Reason: "AppArmor restricts unprivileged user namespaces", Remedy: "add an AppArmor profile with 'userns,' for this binary, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"}
		}
	}
	return nil
}

// namespaces the init is cloned into, in the order they are reported.
var namespaces = []Layer{LayerUserNS, LayerMountNS, LayerPidNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerCgroupNS}

// config is an init's sandbox configuration.
func (sb *Sandbox) config(f fresh) nsinit.Config {
	if sb.level == LevelLandlock {
		// The host's namespaces: no mounts, no hostname, no loopback.
		return nsinit.Config{
			Mounts:     mounts.Plan{},
			Degradable: sb.policy.AllowDegraded,
			Seccomp:    sb.filter,
			ModeWall:   sb.modeWall,
			Skip:       sb.policy.SkipLayers,
			Rlimits:    sb.rlimits,
			Landlock:   sb.landlock,
		}
	}
	ns := namespaces
	if sb.policy.Network == NetworkHost {
		ns = slices.DeleteFunc(slices.Clone(ns), func(l Layer) bool { return l == LayerNetNS })
	}
	var egress *nsinit.Egress
	if sb.policy.Network == NetworkAllow {
		egress = &nsinit.Egress{Port: egressPort}
	}
	var wall *nsinit.UnixWall
	// Sent even when the policy skips the layer (no filter then): the
	// init reports the skip like any other.
	if sb.unixWall != nil || slices.Contains(sb.policy.SkipLayers, LayerUnixSockets) {
		wall = &nsinit.UnixWall{
			Filter:  sb.unixWall,
			Allowed: append(append([]string{sb.spec.Workspace}, sb.spec.Writable...), "/tmp", "/dev/shm"),
		}
	}
	return nsinit.Config{
		Mounts:     sb.plan(f),
		Hostname:   "hutch",
		Namespaces: ns,
		Egress:     egress,
		Degradable: sb.policy.AllowDegraded,
		Seccomp:    sb.filter,
		ModeWall:   sb.modeWall,
		Skip:       sb.policy.SkipLayers,
		Rlimits:    sb.rlimits,
		Landlock:   sb.landlock,
		UnixWall:   wall,
	}
}
