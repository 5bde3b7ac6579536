package nsinit

// Layer names one isolation layer. Results list the layers that were
// actually enforced for a run.
type Layer string

// The layers an init can enforce, by the names Results report.
const (
	LayerUserNS     Layer = "user-namespace"
	LayerMountNS    Layer = "mount-namespace"
	LayerPidNS      Layer = "pid-namespace"
	LayerNetNS      Layer = "network-namespace"
	LayerIPCNS      Layer = "ipc-namespace"
	LayerUTSNS      Layer = "uts-namespace"
	LayerCgroupNS   Layer = "cgroup-namespace"
	LayerFilesystem Layer = "filesystem"
	LayerLoopback   Layer = "loopback"
	LayerKeyring    Layer = "session-keyring"
	// LayerUserCounts caps, in the sandbox's user namespace, the kernel's
	// per-user counts it would otherwise share with its host user
	// (inotify, fanotify, namespaces).
	LayerUserCounts   Layer = "user-counts"
	LayerNoNewPrivs   Layer = "no-new-privs"
	LayerCapabilities Layer = "capabilities"
	LayerSeccomp      Layer = "seccomp"
	LayerCgroup       Layer = "cgroup"
	LayerRlimits      Layer = "rlimits"
	LayerLandlock     Layer = "landlock"
	// LayerUnixSockets keeps pathname unix sockets outside the writable
	// trees unreachable for the command's whole life (Event.UnixWall says
	// by which mechanism).
	LayerUnixSockets Layer = "unix-sockets"

	// LayerExec is no isolation layer and never among a Result's layers:
	// it names the init's own steps around the command (its stdio, its
	// lookup and exec, the wait for it) in a SetupError.
	LayerExec Layer = "exec"
)

// The steps of LayerExec that concern the command itself: the host tells
// "the command could not be found or run" from a sandbox that failed by
// these, not by their messages.
const (
	OpLookPath = "look up command"
	OpExec     = "exec"
)

// How the unix-sockets layer is enforced.
const (
	// UnixWallLandlock: the Landlock ruleset handles
	// LANDLOCK_ACCESS_FS_RESOLVE_UNIX (ABI 9+).
	UnixWallLandlock = "landlock"
	// UnixWallNotify: a seccomp filter hands connect(2) to the init, which
	// checks and performs it (netns.UnixWall); unix datagram sockets are
	// refused.
	UnixWallNotify = "seccomp-notify"
)

// Phase is one timed step of an init, on CLOCK_MONOTONIC (comparable
// across processes of one machine): where a spawn's time goes.
type Phase struct {
	Name  string `json:"name"`
	Start int64  `json:"start_ns"` // CLOCK_MONOTONIC
	Nanos int64  `json:"ns"`
}

// Skipped is a degradable layer the init could not set up.
type Skipped struct {
	Layer  Layer  `json:"layer"`
	Reason string `json:"reason"`
}
