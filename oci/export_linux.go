//go:build linux

package oci

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/runtime"
)

// Options are what Export takes besides the policy.
type Options struct {
	// Rootfs is a directory holding an image's root to run in; "" is the
	// host's own tree, read-only, as hutch runs commands (see
	// Form.HostRoot).
	Rootfs string
	// Dir is the command's working directory; "" is the workspace.
	Dir string
	// Rootless makes the form for a runtime run by a user other than
	// root (rootless runc): a user namespace of its own, mapping uid and
	// gid 0 inside to the caller's (the one mapping such a user may
	// write), no cgroup (no resources and no cgroupsPath: nothing is
	// delegated to the runtime to write, so it writes nothing), the
	// memory and pids limits as rlimits, as hutch's own backend sets them
	// without cgroups, and the host's tree, when it is the root, bound
	// read-only by the configuration's first mount (such a user cannot
	// make the mount namespace to bind it in beforehand).
	Rootless bool
}

// Form is the OCI form of a policy.
type Form struct {
	Spec *specs.Spec
	// HostRoot says the root is the host's tree: the bundle's rootfs
	// directory must hold / bound read-only (recursively) when the
	// runtime starts, which Run does in a mount namespace of its own.
	HostRoot bool
	// EmptyRoot says the root is a listed view's (runtime.ReadsListed):
	// the bundle's rootfs is an empty directory holding RootLinks, the
	// host's trees bound into it by the configuration's mounts; the
	// runtime makes their mount points there and the root read-only.
	EmptyRoot bool
	// RootLinks are the links Write makes in an empty root (the host's
	// /bin -> usr/bin and the like).
	RootLinks []mounts.Link
	// Files are the bundle's files Write makes for the plan's File steps
	// (the sandbox's /etc/hosts), named relative to the bundle as mount
	// sources are: Path a name in the bundle, not in the view.
	Files []mounts.FileContent
	// Rootless is Options.Rootless: a user namespace mapping only the
	// caller's ids, no cgroup; Run runs it as a user other than root.
	Rootless bool
	// Layers are hutch's layers the configuration enforces.
	Layers []runtime.Layer
	// SeccompName names the filter as Result.SeccompProfile does.
	SeccompName string
	// Network is the policy's network mode.
	Network runtime.NetworkMode
	// Timeout ends the command after this long (Run: SIGTERM, then
	// SIGKILL Grace later, runtime.DefaultWaitDelay when 0); 0: never.
	Timeout, Grace time.Duration
	// Unexpressed says, one line each, what of the policy the OCI form
	// does not enforce or enforces differently.
	Unexpressed []string
}

// SpecVersion is the runtime-spec version the configuration declares:
// the oldest whose fields it uses, so that the runtimes of stable
// distributions take it (crun 1.8 refuses a version it does not know,
// such as the 1.3.0 of the specs-go package).
const SpecVersion = "1.0.2"

// RootfsDir is the bundle's root directory, as config.json names it.
const RootfsDir = "rootfs"

// Export compiles r, a policy checked by runtime.Check, into the OCI
// form of it running args: the same view, filter, environment and limits
// a command of a Sandbox of r would get at runtime.LevelNamespaces, the
// OCI runtime making the namespaces. Check a policy whose Backend is
// runtime.BackendOCI to have it checked for an OCI runtime on a host
// that could not run it at that level itself.
func Export(r *runtime.Resolved, args []string, o Options) (*Form, error) {
	if len(args) == 0 || args[0] == "" {
		return nil, fmt.Errorf("oci: no command given")
	}
	v, err := compile(r)
	if err != nil {
		return nil, err
	}
	pol := v.Policy
	if err := unforwarded(pol); err != nil {
		return nil, err
	}
	f := &Form{HostRoot: o.Rootfs == "", SeccompName: v.SeccompName, Network: pol.Network, Timeout: max(pol.Timeout, 0), Rootless: o.Rootless}
	if o.Rootless {
		// No cgroup: the limits are rlimits, as without cgroups at home.
		v.Rlimits = cgroups.Rlimits(v.Limits)
	}
	if len(v.Mounts.Mounts) > 0 && v.Mounts.Mounts[0].Kind == mounts.EmptyRoot {
		if o.Rootfs != "" {
			return nil, fmt.Errorf("oci: rootfs %q: a listed view (Reads listed) is a root of its own, made of the host's listed trees; it takes no image", o.Rootfs)
		}
		f.HostRoot, f.EmptyRoot = false, true
	}
	root := &specs.Root{Path: RootfsDir, Readonly: true}
	if o.Rootfs != "" {
		abs, err := filepath.Abs(o.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("oci: rootfs %q: %w", o.Rootfs, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("oci: rootfs %q: not a directory", o.Rootfs)
		}
		root.Path = abs
	}
	dir := o.Dir
	if dir == "" {
		dir = pol.Workspace
	}
	s := &specs.Spec{
		Version:  SpecVersion,
		Root:     root,
		Hostname: v.Hostname,
		Process: &specs.Process{
			Args: args,
			Env:  v.Env,
			Cwd:  dir,
			User: specs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
			// No capability in any set: a command of hutch's holds none.
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			NoNewPrivileges: true,
			Rlimits:         rlimits(v),
		},
		Linux: &specs.Linux{
			Resources: resources(v),
			Seccomp:   v.Seccomp,
		},
	}
	f.Spec = s
	f.Layers = []runtime.Layer{runtime.LayerMountNS, runtime.LayerPidNS}
	if o.Rootless {
		s.Process.User = specs.User{UID: 0, GID: 0}
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Getuid()), Size: 1}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Getgid()), Size: 1}}
		s.Linux.Resources = nil
		f.Layers = append([]runtime.Layer{runtime.LayerUserNS}, f.Layers...)
	}
	s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.CgroupNamespace}}
	if o.Rootless {
		s.Linux.Namespaces = append([]specs.LinuxNamespace{{Type: specs.UserNamespace}}, s.Linux.Namespaces...)
	}
	if pol.Network != runtime.NetworkHost {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
		f.Layers = append(f.Layers, runtime.LayerNetNS)
	}
	f.Layers = append(f.Layers, runtime.LayerIPCNS, runtime.LayerUTSNS, runtime.LayerCgroupNS, runtime.LayerFilesystem, runtime.LayerKeyring, runtime.LayerNoNewPrivs, runtime.LayerCapabilities)
	if v.Seccomp != nil {
		f.Layers = append(f.Layers, runtime.LayerSeccomp)
	}
	if s.Linux.Resources != nil {
		f.Layers = append(f.Layers, runtime.LayerCgroup)
	}
	f.Layers = append(f.Layers, runtime.LayerRlimits)
	if o.Rootless && f.HostRoot {
		// The host's /, read-only throughout (rro: mount_setattr's
		// recursive flag), under every mount of the plan.
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/", Type: "bind", Source: "/", Options: []string{"rbind", "rro", "nosuid", "nodev"}})
	}
	if err := f.addMounts(v.Mounts, pol); err != nil {
		return nil, err
	}
	f.Unexpressed = unexpressed(v, f)
	for _, rt := range Runtimes {
		if flags := f.RuntimeFlags(rt); len(flags) > 0 {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[AnnotationRuntimeFlags+rt] = strings.Join(flags, " ")
		}
	}
	return f, nil
}

// addMounts turns hutch's mount plan into the configuration's mounts,
// masked and read-only paths, in the plan's order: the runtime applies
// maskedPaths and readonlyPaths after every mount, as the plan puts its
// masks and read-only rebinds last. Steps on paths that do not exist now
// are left out (they are optional in the plan): the runtime would create
// a missing mount point, or fail.
func (f *Form) addMounts(plan mounts.Plan, pol runtime.Policy) error {
	s := f.Spec
	add := func(m specs.Mount) { s.Mounts = append(s.Mounts, m) }
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	for i, m := range plan.Mounts {
		switch m.Kind {
		case mounts.HostRoot, mounts.EmptyRoot:
			// The root: Form.HostRoot, Form.EmptyRoot.
		case mounts.Symlink:
			f.RootLinks = append(f.RootLinks, mounts.Link{Path: m.Target, Target: m.Link})
		case mounts.Dev:
			add(specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "strictatime", "mode=755", "size=65536k"}})
			add(specs.Mount{Destination: m.Target + "/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}})
			add(specs.Mount{Destination: m.Target + "/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777"}})
		case mounts.Proc:
			add(specs.Mount{Destination: m.Target, Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}})
			for _, p := range nsinit.ProcReadOnly {
				s.Linux.ReadonlyPaths = append(s.Linux.ReadonlyPaths, filepath.Join(m.Target, p))
			}
			for _, p := range nsinit.ProcMasked {
				s.Linux.MaskedPaths = append(s.Linux.MaskedPaths, filepath.Join(m.Target, p))
			}
		case mounts.EmptyRO:
			// A missing target of a required step is created by the
			// runtime in a tmpfs of the plan's, or fails the start.
			if m.Optional && !exists(m.Target) {
				continue
			}
			add(specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=755", "size=4k"}})
		case mounts.Tmpfs, mounts.Dir:
			// A Dir is a directory in the private /tmp (HOME): OCI has no
			// step that makes one, so it is a tmpfs of its own there.
			opts := []string{"nosuid", "nodev", "mode=" + strconv.FormatUint(uint64(m.Mode), 8)}
			if pol.TmpSize > 0 {
				opts = append(opts, "size="+strconv.FormatInt(pol.TmpSize, 10))
			}
			add(specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: opts})
		case mounts.BindRW, mounts.BindRO, mounts.Pin:
			src := m.Source
			if m.Kind == mounts.Pin {
				src = m.Target
			}
			if !exists(src) {
				if m.Optional {
					continue
				}
				return fmt.Errorf("oci: %s: %s does not exist", m.Kind, src)
			}
			mode := "rw"
			if m.Kind == mounts.BindRO {
				mode = "ro"
			}
			add(specs.Mount{Destination: m.Target, Type: "bind", Source: src, Options: []string{"rbind", mode, "nosuid", "nodev"}})
		case mounts.ReadOnly:
			// A read-only bind of the path's host file onto it, not
			// readonlyPaths: runsc ignores readonlyPaths outside /proc.
			// A path with no host file now (missing, or in a tmpfs of
			// the plan's) is a readonlyPath, which runc and crun apply
			// if it exists when the command starts.
			before := placeBefore(plan, i, m.Target)
			if before.Reach != mounts.OnHost || !exists(before.HostPath) {
				s.Linux.ReadonlyPaths = append(s.Linux.ReadonlyPaths, m.Target)
				continue
			}
			add(specs.Mount{Destination: m.Target, Type: "bind", Source: before.HostPath, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		case mounts.Mask:
			// A mount, not maskedPaths (runsc ignores maskedPaths
			// outside /proc), and unreadable as hutch's masks are: a
			// mode-0000 tmpfs over a directory, the bundle's mode-0000
			// empty file over anything else. The command holds no
			// capability, so not even uid 0 may open them. A path with
			// no host file now is a maskedPath, which runc and crun
			// apply if it exists when the command starts.
			before := placeBefore(plan, i, m.Target)
			fi, err := os.Lstat(before.HostPath)
			if before.Reach != mounts.OnHost || err != nil {
				s.Linux.MaskedPaths = append(s.Linux.MaskedPaths, m.Target)
				continue
			}
			if fi.IsDir() {
				add(specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=000", "size=4k"}})
			} else {
				add(specs.Mount{Destination: m.Target, Type: "bind", Source: MaskFile, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
			}
		case mounts.File:
			// The bundle's file of that content, bound read-only over
			// the path if it is there now (the step is optional).
			before := placeBefore(plan, i, m.Target)
			if before.Reach != mounts.OnHost || !exists(before.HostPath) {
				continue
			}
			name := fmt.Sprintf("hutch-file-%d", len(f.Files))
			f.Files = append(f.Files, mounts.FileContent{Path: name, Content: m.Content})
			add(specs.Mount{Destination: m.Target, Type: "bind", Source: name, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
		default:
			return fmt.Errorf("oci: mount plan step %s has no OCI form", m)
		}
	}
	return nil
}

// Masked lists every path the configuration makes unreadable: its
// maskedPaths and the masks mounted over existing paths.
func (f *Form) Masked() []string {
	out := slices.Clone(f.Spec.Linux.MaskedPaths)
	for _, m := range f.Spec.Mounts {
		if m.Source == MaskFile || (m.Type == "tmpfs" && slices.Contains(m.Options, "mode=000")) {
			out = append(out, m.Destination)
		}
	}
	return out
}

// MaskFile is the bundle's mode-0000 empty file bound over masked
// files, named relative to the bundle as runtimes resolve a relative
// mount source.
const MaskFile = "hutch-mask"

// placeBefore is what target is in the view plan's steps before the
// i-th build: where a step of the plan finds its path on the host.
func placeBefore(plan mounts.Plan, i int, target string) mounts.Place {
	return mounts.Plan{Mounts: plan.Mounts[:i]}.Lookup(target)
}

// rlimitNames are the OCI names of the rlimits hutch sets.
var rlimitNames = map[int]string{
	unix.RLIMIT_CORE: "RLIMIT_CORE", unix.RLIMIT_NOFILE: "RLIMIT_NOFILE", unix.RLIMIT_FSIZE: "RLIMIT_FSIZE",
	unix.RLIMIT_DATA: "RLIMIT_DATA", unix.RLIMIT_NPROC: "RLIMIT_NPROC", unix.RLIMIT_AS: "RLIMIT_AS",
}

// rlimitName is resource's OCI name.
func rlimitName(resource int) string {
	if name, ok := rlimitNames[resource]; ok {
		return name
	}
	return "RLIMIT_" + strconv.Itoa(resource)
}

// rlimits are the per-process limits, by their OCI names.
func rlimits(v view) []specs.POSIXRlimit {
	var out []specs.POSIXRlimit
	for _, r := range v.Rlimits {
		name := rlimitName(r.Resource)
		// The runtime sets them once the command holds no capability:
		// above this process's hard limit it may not raise them.
		var cur unix.Rlimit
		if unix.Getrlimit(r.Resource, &cur) == nil {
			r.Soft, r.Hard = min(r.Soft, cur.Max), min(r.Hard, cur.Max)
		}
		out = append(out, specs.POSIXRlimit{Type: name, Soft: r.Soft, Hard: r.Hard})
	}
	return out
}

// resources are the cgroup limits: memory without swap on top, pids,
// CPUs as a quota per 100 ms period. nil when there are none.
func resources(v view) *specs.LinuxResources {
	l := v.Limits
	if l.MemoryBytes == 0 && l.Pids == 0 && l.CPUs == 0 {
		return nil
	}
	r := &specs.LinuxResources{}
	if l.MemoryBytes > 0 {
		m := l.MemoryBytes
		// Swap counts memory and swap together: equal, no swap on top.
		r.Memory = &specs.LinuxMemory{Limit: &m, Swap: &m}
	}
	if l.Pids > 0 {
		n := l.Pids
		r.Pids = &specs.LinuxPids{Limit: &n}
	}
	if l.CPUs > 0 {
		period := uint64(100000)
		quota := int64(math.Ceil(l.CPUs * float64(period)))
		r.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	return r
}

// Write writes the bundle: dir/config.json and, for the host's tree or
// an image given by path, the root directory it names.
func (f *Form) Write(dir string) error {
	b, err := json.MarshalIndent(f.Spec, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("oci: bundle %q: %w", dir, err)
	}
	if f.HostRoot || f.EmptyRoot {
		if err := os.MkdirAll(filepath.Join(dir, RootfsDir), 0o755); err != nil {
			return fmt.Errorf("oci: bundle %q: %w", dir, err)
		}
	}
	for _, l := range f.RootLinks {
		if err := writeLink(filepath.Join(dir, RootfsDir, l.Path), l.Target); err != nil {
			return fmt.Errorf("oci: bundle %q: %w", dir, err)
		}
	}
	if err := writeMaskFile(filepath.Join(dir, MaskFile)); err != nil {
		return fmt.Errorf("oci: bundle %q: %w", dir, err)
	}
	for _, file := range f.Files {
		if err := writeReadOnly(filepath.Join(dir, file.Path), file.Content); err != nil {
			return fmt.Errorf("oci: bundle %q: %w", dir, err)
		}
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(b, '\n'), 0o644)
}

// writeLink makes path a symlink to target, or leaves it if it is one
// already (a bundle written again).
func writeLink(path, target string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if have, err := os.Readlink(path); err == nil && have == target {
		return nil
	}
	return os.Symlink(target, path)
}

// writeMaskFile makes path an empty file of mode 0000 (whatever the
// umask; an existing one is truncated and its mode set).
func writeMaskFile(path string) error {
	if err := os.WriteFile(path, nil, 0); err != nil {
		return err
	}
	return os.Chmod(path, 0)
}

// writeReadOnly makes path a file of mode 0444 holding content (an
// existing one, of a bundle written again, is replaced).
func writeReadOnly(path, content string) error {
	_ = os.Remove(path)
	if err := os.WriteFile(path, []byte(content), 0o444); err != nil {
		return err
	}
	return os.Chmod(path, 0o444)
}

// unforwarded refuses a policy that publishes or reaches ports: hutch's
// host side forwards them, which a bundle run by another runtime has not.
// A caller's own value is never dropped in silence.
func unforwarded(pol runtime.Policy) error {
	switch {
	case len(pol.Publish) > 0:
		return fmt.Errorf("oci: Publish has no OCI form: hutch's host side forwards published ports, which a runtime's bundle has not")
	case len(pol.Reach) > 0:
		return fmt.Errorf("oci: Reach has no OCI form: hutch's host side forwards reached ports, which a runtime's bundle has not")
	}
	return nil
}
