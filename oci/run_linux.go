//go:build linux

package oci

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/runtime"
)

// ErrRuntimeMissing is matched (errors.Is) by LookRuntime's error for a
// runtime that is not installed; it also matches
// runtime.ErrBackendUnavailable, as the backend is not available then.
var ErrRuntimeMissing = errors.New("OCI runtime not installed")

// unavailableError says why the runtime cannot run a command here; it
// matches runtime.ErrBackendUnavailable, and ErrRuntimeMissing when the
// runtime is not installed.
type unavailableError struct {
	name, reason string
	missing      bool
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("hutch: backend oci: --oci-runtime %s: %s", e.name, e.reason)
}

func (e *unavailableError) Is(target error) bool {
	return (target == ErrRuntimeMissing && e.missing) || target == runtime.ErrBackendUnavailable
}

// LookRuntime returns the path of the runtime name, one of Runtimes.
func LookRuntime(name string) (string, error) {
	if !slices.Contains(Runtimes, name) {
		return "", fmt.Errorf("hutch: --oci-runtime %q: not an OCI runtime hutch drives (one of %v)", name, Runtimes)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", &unavailableError{name: name, reason: "not installed (not found on PATH)", missing: true}
	}
	return path, nil
}

// Stdio are the command's standard streams.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Run runs f's command through the OCI runtime at path (LookRuntime) in
// a bundle of its own, removed afterwards, and returns its Result: the
// command's exit status (128+N for signal N, as the runtime reports it),
// the layers f enforces and what it does not. SIGINT, SIGTERM and SIGHUP
// this process gets are passed on to the runtime, which passes them on
// to the command. An error means the command did not run.
//
// Run needs root, or a rootless form (Options.Rootless) and runc: crun
// refuses a hybrid cgroup host, which without root hutch cannot hide
// from it, and hutch has no rootless form for runsc. Where it cannot run,
// its error matches runtime.ErrBackendUnavailable, and nothing runs.
func Run(ctx context.Context, f *Form, path string, stdio Stdio) (*runtime.Result, error) {
	rt := filepath.Base(path) // the runtime, by its name
	if err := rootlessUnavailable(rt, f); err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	rand.Read(id)
	name := "hutch-" + hex.EncodeToString(id)
	bundle, err := os.MkdirTemp("", "hutch-oci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bundle)
	spec := *f.Spec
	linux := *spec.Linux
	// The runtime's cgroup is made below a group of hutch's, which holds
	// the configuration's limits in its place: the counters of the group
	// a limit was hit in (OOM kills, forks refused at the pids limit) are
	// that group's alone on cgroup v1, and the runtime removes its own
	// before it returns; hutch's keeps them, with what the command
	// consumed, and removes what the runtime leaves behind. A rootless
	// form has none: nothing is delegated to this user.
	var parent *cgroups.Group
	var layout string
	if !f.Rootless {
		parent, layout, err = parentGroup(specLimits(linux.Resources))
		if err != nil {
			return nil, err
		}
		defer parent.DestroyNested()
		cgPath, _ := parent.CgroupsPath()
		linux.CgroupsPath = cgPath + "/" + name
		linux.Resources = nil
	}
	spec.Linux = &linux
	g := *f
	g.Spec = &spec
	if err := g.Write(bundle); err != nil {
		return nil, err
	}
	if err := f.checkRuntime(rt); err != nil {
		return nil, err
	}
	// A rootless runtime keeps its state in a directory of this run's
	// (its default is under $XDG_RUNTIME_DIR, which such a user may lack).
	var state []string
	if f.Rootless {
		state = []string{"--root", filepath.Join(bundle, "state")}
	}
	cmd := exec.CommandContext(ctx, path, append(state, f.RuntimeCommand(rt, bundle, name)[1:]...)...)
	cmd.Stdin, cmd.Stdout = stdio.Stdin, stdio.Stdout
	cmd.Stderr = stdio.Stderr
	cmd.WaitDelay = 5 * time.Second
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	start := time.Now()
	startCmd := cmd.Start // a rootless form needs, and may make, no mount namespace
	if !f.Rootless {
		startCmd = func() error { return startIn(cmd, f.HostRoot, bundle, rt) }
	}
	if err := startCmd(); err != nil {
		return nil, fmt.Errorf("hutch: backend oci: %s: %w", path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout, grace, retry, reading <-chan time.Time
	var events *limitEvents
	if parent != nil {
		events = watchLimits(parent.Dirs(), name)
		defer events.close()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		reading = t.C
	}
	if f.Timeout > 0 {
		timeout = time.After(f.Timeout)
	}
	timedOut := false
	// sig is the signal the timeout sends, SIGTERM then SIGKILL; delivered
	// says the runtime took it. The runtime's kill goes to the command,
	// pid 1 of its namespace: SIGKILL ends every process in it.
	var sig syscall.Signal
	delivered := false
	kill := func() bool {
		return exec.Command(path, append(state, "kill", name, strings.TrimPrefix(unix.SignalName(sig), "SIG"))...).Run() == nil
	}
	var waitErr error
wait:
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
		case <-timeout:
			timedOut, sig = true, syscall.SIGTERM
			delivered = kill()
			d := f.Grace
			if d <= 0 {
				d = runtime.DefaultWaitDelay
			}
			grace = time.After(d)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			retry = t.C
		case <-grace:
			sig = syscall.SIGKILL
			delivered = kill()
		case <-reading:
			events.read()
		case <-retry:
			// A kill that found no container is sent again: the runtime
			// may make it after the timeout (runsc on a loaded host took
			// over half a second), and it must not then run to its end.
			if !delivered {
				delivered = kill()
			}
		case waitErr = <-done:
			break wait
		}
	}
	r := &runtime.Result{
		Wall: time.Since(start),
		// The bundle's plan is the namespaces level's (Export), the
		// runtime making the namespaces.
		Level:          runtime.LevelNamespaces,
		Layers:         f.Layers,
		Unenforced:     runtimeUnexpressed(rt, f),
		Backend:        runtime.BackendOCI,
		Network:        f.Network,
		SeccompProfile: f.SeccompName,
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee) && ee.ExitCode() >= 0:
		r.ExitCode = ee.ExitCode()
		if r.ExitCode > 128 && r.ExitCode < 128+65 {
			r.Signal = syscall.Signal(r.ExitCode - 128)
		}
	default:
		return r, fmt.Errorf("hutch: backend oci: %s: %w", path, waitErr)
	}
	if parent != nil {
		events.read() // there still if the runtime failed to remove it
		events.close()
		if u, err := parent.Usage(); err == nil {
			u.OOMKills, u.PidsLimitHits = max(u.OOMKills, events.oomKills), max(u.PidsLimitHits, events.pidsHits)
			r.Usage = &u
		}
		if slices.Contains(r.Layers, runtime.LayerCgroup) {
			r.Cgroup = layout
		}
	}
	if r.Usage != nil && r.Usage.OOMKills > 0 {
		// As hutch's own backend says it.
		r.Reason = "memory limit of " + units.FormatSize(*f.Spec.Linux.Resources.Memory.Limit) + " exceeded (OOM kill)"
	}
	if timedOut {
		r.Killed, r.KillReason, r.Reason = true, runtime.KilledTimeout, "timeout of "+f.Timeout.String()
		if r.ExitCode == 0 {
			// The runtime says success for a command the timeout ended
			// (or could not reach): a timeout never reads as a success.
			// The status is that of the last signal sent.
			r.ExitCode, r.Signal = 128+int(sig), sig
		}
	}
	// Whatever the runtime left behind (it removes a container that
	// ran; one that failed to start may remain).
	exec.Command(path, append(state, "delete", "--force", name)...).Run()
	return r, nil
}

// rootlessUnavailable says why the runtime named cannot run f here as
// this user, or nil if it can: as root any form runs; otherwise only a
// rootless one, under runc.
func rootlessUnavailable(runtimeName string, f *Form) error {
	uid := os.Geteuid()
	switch {
	case uid == 0:
		return nil
	case !f.Rootless:
		return &unavailableError{name: runtimeName, reason: fmt.Sprintf("uid %d: needs root for this form (Options.Rootless makes one for a rootless runtime)", uid)}
	case runtimeName == "runsc":
		return &unavailableError{name: runtimeName, reason: fmt.Sprintf("uid %d: needs root: hutch has no rootless form for runsc (runsc 20221219 --rootless --ignore-cgroups failed here: \"cannot create gofer process: gofer: fork/exec /proc/self/exe: operation not permitted\"; rootless runc runs one)", uid)}
	case runtimeName == "crun" && hybridCgroup2():
		return &unavailableError{name: runtimeName, reason: fmt.Sprintf("uid %d: needs root on this hybrid cgroup host: crun refuses it (\"cgroups in hybrid mode not supported, drop all controllers from cgroupv2\", even with --cgroup-manager=disabled), and only root can hide the cgroup2 mount in its mount namespace (rootless runc runs)", uid)}
	}
	return nil
}

// parentGroup makes the group with limits l a runtime's cgroup is made
// in, and says the host's cgroup layout; the group must have one path
// in every hierarchy, as a configuration names one.
func parentGroup(l cgroups.Limits) (*cgroups.Group, string, error) {
	m, err := cgroups.NewManager()
	if err != nil {
		return nil, "", fmt.Errorf("hutch: backend oci: the runtime's cgroup: %w", err)
	}
	g, err := m.Create(l)
	if err != nil {
		return nil, "", fmt.Errorf("hutch: backend oci: the runtime's cgroup: %w", err)
	}
	if _, ok := g.CgroupsPath(); !ok {
		g.Destroy()
		return nil, "", fmt.Errorf("hutch: backend oci: the runtime's cgroup: group %s is not at one path in every cgroup hierarchy (%q), as linux.cgroupsPath names one", g.Name(), g.Dirs())
	}
	return g, m.Layout().String(), nil
}

// specLimits are the limits of a configuration's resources (as
// resources writes them), for a group of hutch's to hold.
func specLimits(r *specs.LinuxResources) cgroups.Limits {
	var l cgroups.Limits
	if r == nil {
		return l
	}
	if r.Memory != nil && r.Memory.Limit != nil {
		l.MemoryBytes = *r.Memory.Limit
		if r.Memory.Swap != nil && *r.Memory.Swap > *r.Memory.Limit {
			l.SwapBytes = *r.Memory.Swap - *r.Memory.Limit
		}
	}
	if r.Pids != nil && r.Pids.Limit != nil {
		l.Pids = *r.Pids.Limit
	}
	if r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil && *r.CPU.Period > 0 {
		l.CPUs = float64(*r.CPU.Quota) / float64(*r.CPU.Period)
	}
	return l
}

// RuntimeCommand is the command line that runs the bundle in dir as
// container id under the runtime named (one of Runtimes): the runtime,
// the flags of its own the form needs (RuntimeFlags), run --bundle. It
// is what Run runs, and what the export prints for each runtime.
func (f *Form) RuntimeCommand(runtimeName, dir, id string) []string {
	return append(append([]string{runtimeName}, f.RuntimeFlags(runtimeName)...), "run", "--bundle", dir, id)
}

// RuntimeFlags are the runtime's own flags the form needs beyond its
// configuration (config.json names them too, in the annotations
// AnnotationRuntimeFlags+name). runsc takes the network and the seccomp
// filter from its flags, not only from the configuration: without
// --network=none it runs its network stack in the namespace it was
// started in (and refuses the host's), and without --oci-seccomp it
// runs the command with no filter at all, and says nothing.
func (f *Form) RuntimeFlags(runtimeName string) []string {
	return globalFlags(runtimeName, f)
}

// AnnotationRuntimeFlags, followed by a runtime's name, is the
// configuration's annotation holding Form.RuntimeFlags for it, space
// separated (runsc's: "--network=none --oci-seccomp"); absent for a
// runtime that needs none.
const AnnotationRuntimeFlags = "dev.hutch.runtime-flags."

// RunscMinPids is the lowest pids limit a bundle runs with under runsc:
// there the limit holds the sandbox's host cgroup, where the gVisor
// kernel's own threads count, not the command's processes (gVisor
// tasks). Measured with Debian's runsc 20221219 on 2 CPUs: a trivial
// command peaked at 51 to 53 threads; --pids 40 failed its start
// ("urpc method containerManager.StartRoot failed: EOF"), 20 earlier
// still. The Go runtime's threads grow with the CPUs, so 8 more per CPU
// beyond two (not measured on more CPUs than two).
func RunscMinPids() int64 { return 64 + 8*int64(max(goruntime.NumCPU()-2, 0)) }

// checkRuntime refuses what the runtime named would fail on with an
// error of its own, or ignore, before anything starts.
func (f *Form) checkRuntime(runtimeName string) error {
	r := f.Spec.Linux.Resources
	if runtimeName == "runsc" && r != nil && r.Pids != nil && *r.Pids.Limit < RunscMinPids() {
		return &runtime.PolicyError{Field: "Pids", Value: strconv.FormatInt(*r.Pids.Limit, 10), Reason: fmt.Sprintf(
			"below %d under runsc, which would not start: the limit holds gVisor's host cgroup, where its own kernel's threads count (over 50 to start a command); the command's processes are gVisor tasks, bounded by --memory", RunscMinPids())}
	}
	return nil
}

// globalFlags are RuntimeFlags.
func globalFlags(runtimeName string, f *Form) []string {
	if runtimeName != "runsc" {
		return nil
	}
	flags := []string{"--network=none"}
	if f.Network == runtime.NetworkHost {
		flags[0] = "--network=host"
	}
	if f.Spec.Linux.Seccomp != nil {
		flags = append(flags, "--oci-seccomp")
	}
	return flags
}

// startIn starts cmd; with hostRoot, or for crun (see hideHybridCgroup2),
// in a mount namespace of its own, where with hostRoot bundle's rootfs
// holds the host's / bound read-only, recursively, without suid and
// device files, as hutch's own view's root is. The namespace is made on
// a thread of this process locked for it and never returned to the
// scheduler: a forked child inherits the thread's mount namespace, and
// the namespace and its mounts go away with the runtime and the thread.
func startIn(cmd *exec.Cmd, hostRoot bool, bundle, runtimeName string) error {
	if !hostRoot && runtimeName != "crun" {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare mount namespace: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make / private: %w", err)
			}
			if hostRoot {
				rootfs := filepath.Join(bundle, RootfsDir)
				if err := unix.Mount("/", rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
					return fmt.Errorf("bind / at %s: %w", rootfs, err)
				}
				attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
				if err := unix.MountSetattr(-1, rootfs, unix.AT_RECURSIVE, attr); err != nil {
					return fmt.Errorf("make %s read-only: %w", rootfs, err)
				}
			}
			if runtimeName == "crun" {
				if err := hideHybridCgroup2(); err != nil {
					return err
				}
			}
			return cmd.Start()
		}()
	}()
	return <-errc
}

// RuntimeNotes say, for the runtime named, what else it needs on this
// host to run the form's bundle as Run runs it, beyond its command line
// (RuntimeCommand) and a host root's bind (Form.HostRoot, said in
// Unexpressed): one line each, none when nothing.
func (f *Form) RuntimeNotes(runtimeName string) []string {
	var out []string
	if runtimeName == "crun" && hybridCgroup2() {
		out = append(out, "crun refuses this hybrid cgroup host (\"cgroups in hybrid mode not supported\"): unmount /sys/fs/cgroup/unified in its mount namespace first (umount -l), as hutch run --backend oci does")
	}
	var pe *runtime.PolicyError
	if err := f.checkRuntime(runtimeName); errors.As(err, &pe) {
		out = append(out, "pids limit "+pe.Value+": "+pe.Reason)
	}
	return out
}

// hybridCgroup2 says the host is hybrid with controllers in its cgroup2
// hierarchy, which crun refuses (see hideHybridCgroup2).
func hybridCgroup2() bool {
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// hideHybridCgroup2 unmounts, in the runtime's mount namespace, the
// cgroup2 hierarchy of a hybrid host (cgroup v1 controllers, plus a
// cgroup2 mount at /sys/fs/cgroup/unified) when that hierarchy has
// controllers: crun refuses such a host ("cgroups in hybrid mode not
// supported"), and without it crun sees a v1 host, where its limits go
// in the v1 controllers as they would anyway.
func hideHybridCgroup2() error {
	const unified = "/sys/fs/cgroup/unified"
	if !hybridCgroup2() {
		return nil
	}
	if err := unix.Unmount(unified, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s for crun on a hybrid cgroup host: %w", unified, err)
	}
	return nil
}
