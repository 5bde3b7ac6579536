//go:build linux

package runtime

import (
	"errors"
	"fmt"

	"github.com/hutchbox/hutch/internal/hostprobe"
	"github.com/hutchbox/hutch/landlock"
)

// chooseLevel decides, once per Sandbox, the level its commands get.
func (sb *Sandbox) chooseLevel() error {
	need := sb.policy.MinLevel
	if need.rank() < 0 && need != "" {
		return &PolicyError{Field: "MinLevel", Value: string(need), Reason: fmt.Sprintf("not a level (one of %v)", levels)}
	}
	// The floor: MinLevel, else what the backend accepts at the least.
	if need == "" {
		switch sb.policy.Backend {
		case BackendAuto, BackendLandlock:
			need = LevelLandlock
		case BackendNamespaces:
			need = LevelNamespacesNoProc
		default:
			need = LevelNamespaces
		}
	}
	var reasons []string
	var remedy string
	have := Level("")
	// Chosen by name, Landlock alone, whatever else is there.
	userns := errLandlockChosen
	if sb.policy.Backend != BackendLandlock {
		userns = probeUserNS(sb.uid)
		if userns == nil && hostprobe.Simulated("no-userns") {
			userns = &LayerError{Layer: LayerUserNS, Reason: hostprobe.SimulateEnv + " says no user namespaces"}
		}
	}
	if userns == nil {
		if err := hostprobe.ProcMountable(); err != nil {
			reasons = append(reasons, "no fresh /proc: "+err.Error())
			remedy = "in Docker: --security-opt systempaths=unconfined"
			have = LevelNamespacesNoProc
		} else {
			have = LevelNamespaces
		}
	} else {
		var le *LayerError
		switch {
		case userns == errLandlockChosen:
			reasons = append(reasons, userns.Error())
		case errors.As(userns, &le):
			reasons = append(reasons, "no user namespaces: "+le.Reason)
			remedy = le.Remedy
		default:
			reasons = append(reasons, "no user namespaces: "+userns.Error())
		}
		if abi := landlock.ABI(); abi >= 1 && !hostprobe.Simulated("no-landlock") {
			have = LevelLandlock
		} else {
			reasons = append(reasons, "no Landlock (Linux 5.13+ with landlock in the lsm= list)")
		}
	}
	if have == "" || have.rank() > need.rank() {
		return &LevelError{Need: need, Have: have, Reasons: reasons, Remedy: remedy, Backend: sb.policy.Backend}
	}
	sb.level, sb.levelReasons = have, reasons
	return nil
}

// errLandlockChosen stands for the namespaces not taken under
// BackendLandlock.
var errLandlockChosen = errors.New("backend landlock: chosen, no namespaces")

// levelState is the part of a Sandbox the ladder owns.
type levelState struct {
	level        Level
	levelReasons []string
	// tmpDir is LevelLandlock's private temporary directory; tmpHolds
	// keeps it while inits that may run a command in it live.
	tmpDir   string
	tmpHolds tmpHolds
}

// unenforced lists what the Sandbox's level gives up against
// LevelNamespaces; nil at LevelNamespaces.
func (sb *Sandbox) unenforced() []string {
	var out []string
	if sb.level != LevelLandlock && sb.landlock == nil && len(sb.carvable(sb.spec.Deny)) > 0 {
		out = append(out, "deny-list: masks cover the files there when a command starts; a denied path replaced or created during a run is readable (Landlock ABI 2+ keeps it by path)")
	}
	switch sb.level {
	case LevelNamespacesNoProc:
		return append(out, "/proc: an empty directory, procfs cannot be mounted here")
	case LevelLandlock:
		out = append(out,
			"namespaces: the command shares the host's pid, mount, network, ipc and uts namespaces; host processes are visible in /proc",
			"network: no network namespace; socket(2) is refused by seccomp instead (socketpair works)",
			"/tmp: the host's; TMPDIR and HOME point to a private directory ("+sb.tmpDir+")",
		)
		if sb.spec.Listed != nil {
			out = append(out, "reads listed: what lies outside the listed trees cannot be read or listed (Landlock), but its paths exist and can be stat'ed")
		}
		if sb.cgroups == nil {
			out = append(out, "lifetime: if the host process itself dies, processes the command daemonized can outlive it (no pid namespace or cgroup to kill them by)")
		}
		if sb.landlock != nil {
			out = append(out, sb.landlock.Unenforced...)
		}
		if f, err := sb.scanFresh(); err == nil && len(f.repos) > 0 {
			// Landlock grants rights down a tree; it cannot take them
			// back for a part of it.
			out = append(out, "git: the repositories in the writable trees are writable, .git/config and hooks included; Result.Repositories reports only those created or replaced (run git there with hutch git)")
		}
		return out
	}
	return out
}
