//go:build linux

// Package nsinit owns the sandbox init: the host binary started again, in
// fresh namespaces, as pid 1 of the sandbox.
//
// The init reads a Config from an inherited socket (never argv or env: both
// are readable by other processes and size-capped), builds the filesystem
// view, drops every privilege and loads the seccomp filter on the thread
// that will fork the command, and then waits for the Command, which may
// come at once or much later (a warm pool). It starts the command, reaps,
// forwards signals, and reports to the host over a pipe as Events. When
// the command exits, the init kills and reaps whatever it left behind in
// the pid namespace, reports the exit, and exits itself; the namespaces'
// teardown happens off the command's critical path.
//
// Importing this package (package runtime does) installs the role switch:
// a process started by hutch with a role marker as argv[0] runs that role
// from this package's init function and never reaches the host's main.
package nsinit

import (
	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

// Fds the init inherits beside stdin, stdout and stderr (which are
// /dev/null for the init itself; the command's own arrive with it).
const (
	ControlFd = 3 // the init's end of the control socket (see WriteFrame)
	StatusFd  = 4 // write end of the status pipe
)

// Config is the sandbox part of the init's configuration: everything but
// the command. It comes in the first frame on the control socket.
type Config struct {
	Mounts   mounts.Plan `json:"mounts"`
	Hostname string      `json:"hostname"`
	// Namespaces are the namespace layers the init was cloned into; the
	// init reports them as enforced once it runs inside them.
	Namespaces []Layer `json:"namespaces"`
	// Degradable layers may be skipped when they cannot be set up; the
	// skip is reported. Every other failure fails the run.
	Degradable []Layer `json:"degradable,omitempty"`
	// Rlimits are set on the init before anything else and inherited by
	// the command.
	Rlimits []cgroups.Rlimit `json:"rlimits,omitempty"`
	// CgroupTasks is the number of cgroup v1 tasks files that come with
	// the config frame: the init's forking thread joins the group through
	// them (joinCgroup) before it confines itself.
	CgroupTasks int `json:"cgroup_tasks,omitempty"`
	// Skip layers are not set up; each is reported as skipped.
	Skip []Layer `json:"skip,omitempty"`

	// Egress, when set, is a loopback port inside the sandbox that the
	// host's egress proxy serves (see Egress). With Egress or UnixWall,
	// the handoff socket is the config frame's last fd.
	Egress *Egress `json:"egress,omitempty"`

	// Landlock is the ruleset the forking thread restricts itself to
	// after dropping privileges and before seccomp; nil means none.
	Landlock *landlock.Ruleset `json:"landlock,omitempty"`

	// Seccomp is the compiled filter (a BPF program) loaded last, on the
	// thread that forks the command; empty means none.
	Seccomp []byte `json:"seccomp,omitempty"`
	// ModeWall is seccomp.ModeWall compiled, loaded just before Seccomp
	// when the profile is the caller's (the default holds its rules itself);
	// empty means none.
	ModeWall []byte `json:"mode_wall,omitempty"`

	// UnixWall, when set, keeps pathname unix sockets outside its Allowed
	// trees unreachable: through Landlock when the ruleset above was
	// applied at landlock.ResolveUnixABI or later, otherwise through its
	// Filter (seccomp.UnixWall), whose listener the init hands to the
	// host (HandoffWall), which answers it (netns.UnixWall).
	UnixWall *UnixWall `json:"unix_wall,omitempty"`
}

// UnixWall is the configuration of the unix-sockets layer.
type UnixWall struct {
	// Filter is seccomp.UnixWall compiled.
	Filter []byte `json:"filter"`
	// Allowed are the trees of the view in which sockets may be reached:
	// the writable trees, the private /tmp and /dev/shm.
	Allowed []string `json:"allowed"`
}

// Command is the per-command part, sent in a second frame once the
// sandbox is built (at once for a cold start; when a command comes, for a
// pooled init). The frame carries the command's stdin, stdout and stderr.
type Command struct {
	// Path is the command to exec, absolute or looked up in Env's PATH
	// inside the sandbox's view.
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Roots are the trees the working directory must lie in (the
	// workspace and the writable paths), checked again after the chdir:
	// the host checked Dir, but the command's trees can change under it.
	Roots []string `json:"roots,omitempty"`
}

// Event kinds, in the order the init sends them.
const (
	EventReady   = "ready"   // the sandbox is built; the init waits for its command
	EventStarted = "started" // the command was exec'd
	EventExited  = "exited"  // the command ended
	EventError   = "error"   // setup or exec failed; nothing runs
)

// Event is one line on the status pipe.
type Event struct {
	Kind string `json:"kind"`
	// Pid is the command's pid inside the sandbox (started).
	Pid int `json:"pid,omitempty"`
	// Layers were enforced; Skipped were degradable and not set up
	// (started).
	Layers  []Layer   `json:"layers,omitempty"`
	Skipped []Skipped `json:"skipped,omitempty"`
	// Phases are the init's steps up to the exec (started).
	Phases []Phase `json:"phases,omitempty"`
	// UnixWall is how the unix-sockets layer was enforced, when it was
	// (UnixWallLandlock or UnixWallNotify; started).
	UnixWall string `json:"unix_wall,omitempty"`
	// ExitCode and Signal describe how the command ended (exited); Signal
	// is 0 unless a signal killed it.
	ExitCode int `json:"exit_code"`
	Signal   int `json:"signal,omitempty"`
	// Error describes a failed setup step (error).
	Error *SetupError `json:"error,omitempty"`
}

// Monotonic reads CLOCK_MONOTONIC in nanoseconds.
func Monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// SetupError is a failed setup step, as it crosses the status pipe.
type SetupError struct {
	Layer Layer  `json:"layer"`
	Op    string `json:"op"`
	Path  string `json:"path,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Msg   string `json:"msg"`
}

func (e *SetupError) Error() string {
	s := string(e.Layer) + ": " + e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	return s + ": " + e.Msg
}
