package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	goruntime "runtime"
	"syscall"
	"time"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
)

// KillReason says why hutch killed a command.
type KillReason string

// Why hutch ended a command: Policy.Timeout, the Cmd's context, the
// output limit, and the rest below.
const (
	KilledTimeout     KillReason = "timeout"
	KilledCanceled    KillReason = "context canceled"
	KilledOutputLimit KillReason = "output limit"
	// KilledSandboxDied: the sandbox's init died before the command ended
	// (killed from outside hutch, or its spawn server died), which kills
	// everything in the sandbox. hutch did not end the command, but it
	// did not end on its own either; Reason says how the init died.
	KilledSandboxDied KillReason = "sandbox died"
	// KilledStopped is a stop the caller asked for (Cmd.Stop, or
	// Cmd.Signal with SIGKILL; hutch run passing on SIGINT or SIGTERM).
	KilledStopped KillReason = "stopped"
)

// DefaultWaitDelay is the grace a command gets when Cmd.WaitDelay is
// zero: between the graceful stop (SIGTERM) that the context, the
// timeout or Stop starts and the SIGKILL of its sandbox, and for its
// output to be copied once it has ended.
const DefaultWaitDelay = 5 * time.Second

// checkWaitDelay refuses a negative Cmd.WaitDelay.
func checkWaitDelay(d time.Duration) error {
	if d < 0 {
		return &PolicyError{Field: "Cmd.WaitDelay", Value: d.String(), Reason: "negative (zero means DefaultWaitDelay)"}
	}
	return nil
}

// ctxKillReason is the kill reason for ctx's end.
func ctxKillReason(ctx context.Context) KillReason {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return KilledTimeout
	}
	return KilledCanceled
}

// ErrWaitDelay is matched (errors.Is) by Wait's error when the command
// had ended but its output could not be copied within Cmd.WaitDelay,
// because a Stdout or Stderr writer of the host blocked: Wait stopped
// waiting for it (the output after that point is lost), as os/exec's
// ErrWaitDelay says. Result is set all the same.
var ErrWaitDelay = errors.New("hutch: WaitDelay expired before the command's output was copied")

// Result describes one finished command.
type Result struct {
	// ExitCode is the command's exit status, or -1 if a signal ended it.
	ExitCode int `json:"exit_code"`
	// Signal is the signal that ended the command, or 0.
	Signal syscall.Signal `json:"signal,omitempty"`
	// Wall is the time from Start to the end of Wait; Startup the part of
	// it before the command was exec'd (the sandbox's setup).
	Wall    time.Duration `json:"wall_ns"`
	Startup time.Duration `json:"startup_ns"`
	// Killed is set when the command did not end on its own, for
	// KillReason: hutch killed the sandbox, the command ended after the
	// graceful stop reached it (then Signal and ExitCode are what the
	// command made of it: SIGTERM, or the status its handler chose), or
	// its sandbox died (KilledSandboxDied). A command hutch killed before
	// it had started (Start returned the kill as an *ExitError) reports
	// SIGKILL: a timeout is a timeout wherever it lands.
	Killed     bool       `json:"killed"`
	KillReason KillReason `json:"kill_reason,omitempty"`
	// Truncated is set when output went past the output limit.
	Truncated bool `json:"truncated,omitempty"`
	// Prewarmed is set when the command ran in an init the Sandbox's pool
	// had built ahead of time (Policy.Prewarm), not in one built for it.
	Prewarmed bool `json:"prewarmed,omitempty"`
	// Layers are the isolation layers enforced for this run; Skipped are
	// layers the policy allowed to degrade that could not be set up.
	Layers  []Layer   `json:"layers"`
	Skipped []Skipped `json:"skipped,omitempty"`
	// Phases say where the startup went: "spawn" (the spawn request, the
	// clone and the init's start), "config" (the plan reaching the init,
	// made by the host while the clone runs), "keyring-uts-loopback",
	// "filesystem", "confine" (limits, privileges, seccomp),
	// "wait-command" (idle time of a pooled init) and "exec". Start times
	// are CLOCK_MONOTONIC.
	Phases []Phase `json:"phases,omitempty"`
	// SeccompProfile names the system-call filter enforced, when the
	// seccomp layer is among Layers.
	SeccompProfile string `json:"seccomp_profile,omitempty"`
	// Level is the isolation level (rung of the fallback ladder) the
	// command ran at; Unenforced says, one line each, what that level
	// does not enforce that LevelNamespaces would.
	Level      Level    `json:"level"`
	Unenforced []string `json:"unenforced,omitempty"`
	// Backend is what enforced the level (Policy.Backend; Level.Backend).
	Backend Backend `json:"backend,omitempty"`
	// Nested says the command could build sandboxes of its own
	// (Policy.AllowNested): create namespaces, setns and chroot, which
	// reach more of the kernel than the default filter lets a command
	// reach. The seccomp layer was enforced all the same, by a filter
	// SeccompProfile names with "+nested". A choice of the caller's, like
	// Network "host", not a layer the host failed to set up: neither
	// Skipped nor Unenforced lists it.
	Nested bool `json:"nested,omitempty"`
	// Unsandboxed says the command ran with no isolation at all
	// (Policy.Unsandboxed, the disabled mode).
	Unsandboxed bool `json:"unsandboxed,omitempty"`
	// Network is the network mode the command ran with: "host" means it
	// shared the host's network, with no isolation at all.
	Network NetworkMode `json:"network"`
	// NetworkEvents are the command's connection attempts through the
	// egress proxy (Network "allow"), allowed and refused.
	NetworkEvents []netns.Event `json:"network_events,omitempty"`
	// Published are the Sandbox's published ports (Policy.Publish), host
	// ports chosen filled in; Ingress the connections forwarded through
	// them to this command.
	Published []Publish            `json:"published,omitempty"`
	Ingress   []netns.IngressEvent `json:"ingress,omitempty"`
	// UnixSocketWall says how the unix-sockets layer was enforced when it
	// is among Layers: "landlock" (the ruleset guards socket files, Linux
	// 7.1+, Landlock ABI 9) or "seccomp-notify" (the sandbox's init checks
	// and performs every connect(2); unix datagram sockets are refused).
	UnixSocketWall string `json:"unix_socket_wall,omitempty"`
	// Repositories are the git repositories in the writable trees the
	// command created or replaced, or redirected to another
	// configuration: the host's git run there reads what the command
	// wrote as configuration and hooks, and runs what they name. Run git
	// there with hostgit.Command (hutch git). Repositories present when the
	// command started are read-only to it (see Policy.AllowGitWrite).
	Repositories []RepositoryChange `json:"repositories,omitempty"`
	// TreesWalked says why the deny names and repositories in the
	// writable trees were found by walking them in full for this command
	// instead of from the watch kept on them (Linux): the kernel's
	// inotify queue overflowed, or the trees have more directories than
	// the watches hutch may take of the host user's. The view is as
	// fresh either way; only the cost differs.
	TreesWalked string `json:"trees_walked,omitempty"`
	// LandlockABI is the kernel's Landlock ABI version the landlock layer
	// was enforced with, when it is among Layers.
	LandlockABI int `json:"landlock_abi,omitempty"`
	// Cgroup is the host's cgroup layout (v1, v2, hybrid) when the cgroup
	// layer is among Layers; Usage is what the command consumed, read from
	// its cgroup.
	Cgroup string `json:"cgroup,omitempty"`
	Usage  *Usage `json:"usage,omitempty"`
	// Leaks are the secrets found in the command's output (Policy.Leaks),
	// at most 256 (LeaksDropped counts the rest); LeakAction is what was
	// done about them. Never the secrets themselves.
	Leaks        []Leak     `json:"leaks,omitempty"`
	LeaksDropped int        `json:"leaks_dropped,omitempty"`
	LeakAction   LeakAction `json:"leak_action,omitempty"`
	// Denials are what the command was refused while it ran, each with
	// the rule that refused it and how to allow it, counted by kind: at
	// most 64 kinds, DenialsDropped counts the refusals of kinds beyond
	// (Policy.Denials).
	Denials        []Denial `json:"denials,omitempty"`
	DenialsDropped int      `json:"denials_dropped,omitempty"`
	// Reason says in words why the command ended as it did when hutch or
	// the kernel ended it: "timeout", or "memory limit of 128 MiB exceeded
	// (OOM kill)".
	Reason string `json:"reason,omitempty"`
	// Error is why Start failed, when it did: the command never ran
	// (ExitCode -1). The error Start returned says the same, for errors.Is.
	Error string `json:"error,omitempty"`
}

// Phase is one timed step of a command's startup.
type Phase = nsinit.Phase

// Usage is what a command consumed, from its cgroup.
type Usage = cgroups.Usage

// ErrUnsupportedPlatform is what New returns where hutch has no sandbox
// backend (it has Linux namespaces and macOS Seatbelt): an agent that links
// hutch still builds there, and learns at once that nothing can be
// sandboxed, rather than running commands unconfined. It wraps
// errors.ErrUnsupported.
var ErrUnsupportedPlatform = fmt.Errorf("hutch: no sandbox backend on %s (Linux and macOS only): %w", goruntime.GOOS, errors.ErrUnsupported)

// ErrNotFound is matched (errors.Is) by the error Start returns when the
// command is not in the sandbox's PATH, or not at the path it was given
// as. It is hutch's, not os/exec's: the lookup happens inside the sandbox,
// whose PATH and filesystem view are not the host's. An error that matches
// it also matches its errno: syscall.ENOENT, hence fs.ErrNotExist.
var ErrNotFound = errors.New("executable file not found in the sandbox")

// ErrCannotExec is matched (errors.Is) by the error Start returns when the
// command was found but could not be executed: not executable
// (syscall.EACCES, fs.ErrPermission), a directory, not in a format the
// kernel runs (syscall.ENOEXEC). An error that matches it also matches
// its errno.
var ErrCannotExec = errors.New("file cannot be executed in the sandbox")

// ErrClosed is returned by Start on a Sandbox that was closed: nothing
// is started.
var ErrClosed = errors.New("sandbox closed")

// ErrSandboxDied is matched (errors.Is) by the error of a command whose
// sandbox init died before the command ended: killed from outside hutch
// (which kills everything in its sandbox), or gone with its spawn server.
// Its Result has KillReason KilledSandboxDied and Reason says more.
var ErrSandboxDied = errors.New("the sandbox's init died")

// ErrTimeout is matched (errors.Is) by the *ExitError of a command that
// Policy.Timeout killed. Like context.DeadlineExceeded it has a Timeout
// method that returns true, and it matches context.DeadlineExceeded too:
// code that handles deadlines in general handles it. A deadline of the
// command's context matches context.DeadlineExceeded, not ErrTimeout.
var ErrTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string { return "policy timeout exceeded" }
func (timeoutError) Timeout() bool { return true }

func (timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Success reports whether the command exited with status 0.
func (r *Result) Success() bool { return r != nil && r.ExitCode == 0 && r.Signal == 0 }

// String says in one line how the command ended: its exit status or
// signal, and why it was killed when hutch killed it.
func (r *Result) String() string {
	var s string
	switch {
	case r.Signal != 0:
		s = "signal: " + signalName(r.Signal)
	default:
		s = fmt.Sprintf("exit status %d", r.ExitCode)
	}
	if r.Killed {
		s += " (killed: " + string(r.KillReason) + ")"
	}
	return s
}

// ExitError is returned by Run and Wait for a command that did not exit 0,
// or that hutch stopped (Result.Killed), and by Start when hutch killed
// the command before it had started. When hutch stopped the command for
// its context or Policy.Timeout, it wraps why: errors.Is matches
// context.Canceled, context.DeadlineExceeded (also the context's cause,
// if it has one) or ErrTimeout, as Result's KillReason says in words;
// when the sandbox died under it, ErrSandboxDied. It also wraps an error
// copying the command's stdio, ErrWaitDelay included.
type ExitError struct {
	*Result
	// Stderr holds captured standard error when Output was used and
	// Stderr was not otherwise collected.
	Stderr []byte

	// killErr is why hutch killed the command, or nil; ioErr what went
	// wrong copying its stdio, or nil.
	killErr error
	ioErr   error
}

// Error implements error.
func (e *ExitError) Error() string {
	if e.ioErr != nil {
		return e.Result.String() + "; " + e.ioErr.Error()
	}
	return e.Result.String()
}

// Unwrap returns why hutch killed the command and what went wrong copying
// its stdio, those of them that happened.
func (e *ExitError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.killErr, e.ioErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// contextError is ctx's error, joined with its cause when that says more.
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); err != nil && cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}

// SetupError is a sandbox layer that failed to come up for a command.
// errors.Is matches its errno (e.g. syscall.EPERM) and, for a command
// that could not be found or executed (Layer LayerExec), ErrNotFound or
// ErrCannotExec.
type SetupError struct {
	Layer Layer
	Op    string
	Path  string
	Err   error
}

// Error implements error.
func (e *SetupError) Error() string {
	s := "hutch: " + string(e.Layer) + ": " + e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *SetupError) Unwrap() error { return e.Err }

// newSetupError is a failed step reported as its message and errno (by
// the init, over its status pipe), as the caller sees it.
func newSetupError(layer Layer, op, path, msg string, errno syscall.Errno) *SetupError {
	se := &stepError{msg: msg, errno: errno}
	if layer == LayerExec && (op == nsinit.OpLookPath || op == nsinit.OpExec) {
		// As a shell tells 127 from 126: only a missing file is "not
		// found"; whatever else stops the exec is "cannot execute".
		se.kind = ErrCannotExec
		if errors.Is(errno, fs.ErrNotExist) {
			se.kind = ErrNotFound
		}
	}
	return &SetupError{Layer: layer, Op: op, Path: path, Err: se}
}

// stepError is the error of a failed step: its message, and for errors.Is
// its errno and, for the command's own lookup and exec, whether it was
// not found or could not be executed.
type stepError struct {
	msg   string
	errno syscall.Errno
	kind  error // ErrNotFound, ErrCannotExec or nil
}

func (e *stepError) Error() string { return e.msg }

func (e *stepError) Unwrap() []error {
	var errs []error
	if e.errno != 0 {
		errs = append(errs, e.errno)
	}
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	return errs
}

// LayerError says that a layer cannot be set up on this host at all.
type LayerError struct {
	Layer  Layer
	Reason string
	Remedy string
}

// Error implements error.
func (e *LayerError) Error() string {
	s := fmt.Sprintf("hutch: %s unavailable: %s", e.Layer, e.Reason)
	if e.Remedy != "" {
		s += " (" + e.Remedy + ")"
	}
	return s
}

// ExitStatus is the status a shell gives a command that ended as r and
// err (Cmd.Run's) say, as hutch run exits and the local API reports it:
// the exit code, 128+N for signal N, 127 when the program was not found,
// 126 when it could not be executed, and 125 when it did not run for
// another reason (a failure of hutch's own).
func ExitStatus(r *Result, err error) int {
	var ee *ExitError
	switch {
	case errors.Is(err, ErrNotFound):
		return 127
	case errors.Is(err, ErrCannotExec):
		return 126
	case r == nil, err != nil && !errors.As(err, &ee) && r.ExitCode == -1:
		return 125
	case r.Signal != 0:
		return 128 + int(r.Signal)
	}
	return r.ExitCode
}
