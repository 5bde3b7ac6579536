package runtime

import (
	"fmt"
	"slices"
	"strings"
)

// Level is a rung of the fallback ladder: how strongly a host can isolate
// a command. New picks the strongest level the host offers and refuses
// when that is weaker than Policy.MinLevel. Every Result names its level.
type Level string

// The levels, strongest first.
const (
	// LevelNamespaces: fresh user, mount, pid, network, ipc, uts and
	// cgroup namespaces with a fresh /proc, then Landlock and seccomp.
	LevelNamespaces Level = "namespaces"
	// LevelNamespacesNoProc: the same, but /proc is an empty directory:
	// procfs cannot be mounted here (nested in a container whose /proc
	// has masked submounts). Tools that read /proc fail.
	LevelNamespacesNoProc Level = "namespaces-no-proc"
	// LevelLandlock: no user namespaces (AppArmor's restriction, a
	// container's seccomp profile). The command runs in the host's
	// namespaces, confined by Landlock (writes only to the workspace and
	// writable paths and a private temporary directory, no reads of
	// denied paths outside them), seccomp without socket(2), no
	// capabilities and no_new_privs. It sees the host's processes and
	// /tmp is not private; Result.Unenforced lists what is missing.
	LevelLandlock Level = "landlock"
	// LevelSeatbelt is macOS: the command runs under a Seatbelt profile
	// (see package darwin), with no namespaces and no resource limits.
	LevelSeatbelt Level = "seatbelt"
	// LevelUnsandboxed is no isolation at all: Policy.Unsandboxed, the
	// disabled mode of self-hosted setups. Every Result of such a command
	// says so (Unsandboxed, this Level, no Layers).
	LevelUnsandboxed Level = "unsandboxed"
)

// levels orders the rungs, strongest first.
var levels = []Level{LevelNamespaces, LevelNamespacesNoProc, LevelLandlock}

func (l Level) rank() int { return slices.Index(levels, l) }

// LevelError is New's refusal: the host cannot reach the policy's
// MinLevel. Reasons say why each stronger level is out of reach and
// Remedy how to get it (`hutch doctor` says more).
type LevelError struct {
	Need, Have Level // Have is "" when no level at all is reachable
	Reasons    []string
	Remedy     string
	// Backend is the backend the policy chose, "" for none.
	Backend Backend
}

// Is makes a LevelError of a policy that chose a backend match
// ErrBackendUnavailable: the host lacks it. Without a choice it is the
// policy's MinLevel that the host does not meet.
func (e *LevelError) Is(target error) bool {
	return target == ErrBackendUnavailable && e.Backend != ""
}

// Error implements error.
func (e *LevelError) Error() string {
	have := string(e.Have)
	if have == "" {
		have = "none"
	}
	s := fmt.Sprintf("hutch: this host gives isolation level %s, the policy needs %s: %s", have, e.Need, strings.Join(e.Reasons, "; "))
	if e.Remedy != "" {
		s += " (" + e.Remedy + ")"
	}
	return s
}

// ReadScope is what of the host a Sandbox's commands may read
// (Policy.Reads).
type ReadScope string

// The read modes: the host's whole tree but the deny-list; only what the
// policy lists.
const (
	ReadsHost   ReadScope = "host"
	ReadsListed ReadScope = "listed"
)

// ListedSystemTrees are the host trees a listed view (ReadsListed) shows
// to every command, read-only, where the host has them: programs and their
// libraries (/usr, and /bin, /sbin and the /lib directories, links into
// /usr on most hosts, the programs themselves on the others) and /etc, for
// the dynamic loader's cache, users and groups, name resolution, TLS
// roots and the alternatives programs are found through. /etc is shown
// with the deny-list applied. Nothing else of the host is: not /home,
// /root, /var, /opt, /srv, /mnt, /media, /boot or /sys; Policy.Read lists
// more.
var ListedSystemTrees = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// NetworkMode is what a Sandbox's commands can reach (Policy.Network).
type NetworkMode string

// The network modes: loopback only; only the allow-list, through the
// egress proxy; the host's network, with no isolation.
const (
	NetworkNone  NetworkMode = "none"
	NetworkAllow NetworkMode = "allow"
	NetworkHost  NetworkMode = "host"
)
