//go:build linux

// Package nsinit owns the sandbox init and the pre-runtime stage it
// starts from.
//
// The init is C (init.c), run by the zygote's clone child in the sandbox's
// fresh namespaces, as pid 1 of the sandbox, without an exec: no Go code
// runs in a sandbox. It decides nothing. The host encodes a Config into
// the init's plan (EncodeConfig), records the init runs in order: identity,
// network, the filesystem view, then every privilege dropped and the
// seccomp filter loaded on the thread that will fork the command. The init
// reads the plan from an inherited socket (never argv or env: both are
// readable by other processes and size-capped), runs it, and waits for the
// Command (EncodeCommand), which may come at once or much later (a warm
// pool). It starts the command, reaps, forwards signals, and reports to
// the host over a pipe as Events (ReadEvent). When the command exits, the
// init kills and reaps whatever it left behind in the pid namespace,
// reports the exit, and exits itself; the namespaces' teardown happens off
// the command's critical path.
//
// Importing this package (package runtime does) links the stage (zygote.c),
// whose constructor takes over a process started with its role marker as
// argv[0] before the Go runtime exists.
package nsinit

import (
	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

// Config is the sandbox part of the init's configuration: everything but
// the command. EncodeConfig makes it the init's plan, the first frame on
// the control socket.
type Config struct {
	Mounts   mounts.Plan
	Hostname string
	// Namespaces are the namespace layers the init was cloned into; the
	// init reports them as enforced once it runs inside them.
	Namespaces []Layer
	// Degradable layers may be skipped when they cannot be set up; the
	// skip is reported. Every other failure fails the run.
	Degradable []Layer
	// Rlimits are set on the init once the filesystem view is built and
	// inherited by the command, but for those that are ForChild, set by
	// the command's own process just before its exec.
	Rlimits []cgroups.Rlimit
	// CgroupTasks is the number of cgroup v1 tasks files that come with
	// the config frame: the init's forking thread joins the group through
	// them (cgroupSteps) before it confines itself.
	CgroupTasks int
	// Skip layers are not set up; each is reported as skipped.
	Skip []Layer
	// UserCounts are the limits written to /proc/sys/user/<name> in the
	// init's user namespace (LayerUserCounts) before anything else runs
	// there; none without a user namespace of its own.
	UserCounts map[string]uint64

	// Egress, when set, is a loopback port inside the sandbox that the
	// host's egress proxy serves (see Egress). With Egress or UnixWall,
	// the handoff socket is the config frame's last fd.
	Egress *Egress
	// Ingress has the init make sockets in the sandbox's network
	// namespace for the host, one per request on the handoff socket
	// (HandoffIngress), while its command runs: the host connects each
	// to a published loopback port (runtime.Publish).
	Ingress bool
	// Reach are further loopback ports the init listens on, as for
	// Egress, each listener handed to the host (HandoffEgress; the host
	// tells them apart by their port), which forwards their connections
	// to one host service each (runtime.Reach).
	Reach []int

	// Landlock is the ruleset the forking thread restricts itself to
	// after dropping privileges and before seccomp; nil means none.
	Landlock *landlock.Ruleset
	// HostRuleset has the host begin that ruleset (Plan.Ruleset) with
	// the rules on paths the view shares with the host, passed as the
	// config frame's last fd; the init adds the rest. Without it the
	// init opens every rule's path itself.
	HostRuleset bool

	// Seccomp is the compiled filter (a BPF program) loaded last, on the
	// thread that forks the command. It is required unless Skip holds
	// LayerSeccomp: EncodeConfig refuses a Config without it.
	Seccomp []byte
	// ModeWall is seccomp.ModeWall compiled, loaded just before Seccomp
	// when the profile is the caller's (the default holds its rules itself);
	// empty means none.
	ModeWall []byte
	// Denials, if set, has the filter loaded in its notifying form.
	Denials *Denials

	// UnixWall, when set, keeps pathname unix sockets outside its Allowed
	// trees unreachable: through Landlock when the ruleset above was
	// applied at landlock.ResolveUnixABI or later, otherwise through its
	// Filter (seccomp.UnixWall), whose listener the init hands to the
	// host (HandoffWall), which answers it (netns.UnixWall).
	UnixWall *UnixWall

	// Unprivileged says the init lacks CAP_SETPCAP, so it cannot empty
	// its bounding set or lock its securebits (privilegeSteps) and only
	// clears what it holds and sets no_new_privs: possible only in the
	// host's user namespace (LevelLandlock), as an ordinary user or as a
	// root whose bounding set lacks it. Everywhere else it holds it:
	// clone(CLONE_NEWUSER) gives the child every capability in its new
	// user namespace, which it keeps since no exec follows. The init
	// decides nothing, so the host says which. The zero value is the
	// safe one: an init wrongly taken for privileged fails its first
	// bounding-set drop (EPERM) and the run with it.
	Unprivileged bool
}

// Denials are the notifying forms of the command's filter
// (seccomp.Notifying): loaded in its place, with a listener the host
// answers, they hand the host each call the filter refuses, so that it can
// count it and answer it with the filter's own errno.
type Denials struct {
	// Filter is Seccomp, notifying.
	Filter []byte
	// WithWall is Seccomp with UnixWall.Filter chained after it,
	// notifying: loaded in place of both where the unix wall is a filter
	// (one listener per process). Where the wall is not a filter, or may
	// degrade (a failed wall must not take the profile with it), Filter is
	// loaded alone, or nothing notifies.
	WithWall []byte
}

// UnixWall is the configuration of the unix-sockets layer.
type UnixWall struct {
	// Filter is seccomp.UnixWall compiled.
	Filter []byte
	// Allowed are the trees of the view in which sockets may be reached:
	// the writable trees, the private /tmp and /dev/shm.
	Allowed []string
}

// Command is the per-command part, sent in a second frame once the
// sandbox is built (at once for a cold start; when a command comes, for a
// pooled init). The frame carries the command's stdin, stdout and stderr.
type Command struct {
	// Path is the command to exec, absolute or looked up in Env's PATH
	// inside the sandbox's view.
	Path string
	Args []string
	Env  []string
	Dir  string
	// Roots are the trees the working directory must lie in (the
	// workspace and the writable paths), checked again after the chdir:
	// the host checked Dir, but the command's trees can change under it.
	Roots []string
	// Refused are the trees the working directory may not lie in,
	// however the chdir got there (a symlink swapped in after the host's
	// check): Go decides which, the init only compares.
	Refused []string
}

// Event kinds, in the order the init sends them.
const (
	EventReady   = "ready"   // the sandbox is built; the init waits for its command
	EventStarted = "started" // the command was exec'd
	EventExited  = "exited"  // the command ended
	EventError   = "error"   // setup or exec failed; nothing runs
)

// Event is one message on the status pipe (see ReadEvent).
type Event struct {
	Kind string
	// Pid is the command's pid inside the sandbox (started).
	Pid int
	// Layers were enforced; Skipped were degradable and not set up
	// (started).
	Layers  []Layer
	Skipped []Skipped
	// Phases are the init's steps up to the exec (started).
	Phases []Phase
	// UnixWall is how the unix-sockets layer was enforced, when it was
	// (UnixWallLandlock or UnixWallNotify; started).
	UnixWall string
	// ExitCode and Signal describe how the command ended (exited); Signal
	// is 0 unless a signal killed it.
	ExitCode int
	Signal   int
	// Error describes a failed setup step (error).
	Error *SetupError
}

// Monotonic reads CLOCK_MONOTONIC in nanoseconds.
func Monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// SetupError is a failed setup step, as it crosses the status pipe.
type SetupError struct {
	Layer Layer
	Op    string
	Path  string
	Errno int
	Msg   string
}

// Error implements error.
func (e *SetupError) Error() string {
	s := string(e.Layer) + ": " + e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	return s + ": " + e.Msg
}
