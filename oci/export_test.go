//go:build linux

package oci

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// TestExportDefaultPolicy: the OCI form of the default policy masks every
// default deny path, holds its limits and the default seccomp profile,
// gives no capability, and lists what it cannot express.
func TestExportDefaultPolicy(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	p := runtime.DefaultPolicy(ws)
	p.CPUs = 1.5
	p.FileSize = 1 << 20
	f, err := exportOf(p, []string{"true"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Spec
	for _, d := range runtime.DefaultDeny() {
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			d = filepath.Join(home, rest)
		} else if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		if !slices.Contains(f.Masked(), d) {
			t.Errorf("default deny path %s is not masked: %q", d, f.Masked())
		}
	}
	res := s.Linux.Resources
	if res == nil || res.Memory == nil || *res.Memory.Limit != p.Memory || *res.Memory.Swap != p.Memory || res.Pids == nil || *res.Pids.Limit != runtime.DefaultPids || res.CPU == nil || *res.CPU.Quota != 150000 || *res.CPU.Period != 100000 {
		t.Errorf("resources: %+v", res)
	}
	if !slices.ContainsFunc(s.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_FSIZE" && r.Hard == 1<<20 }) ||
		!slices.ContainsFunc(s.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_CORE" && r.Hard == 0 }) {
		t.Errorf("rlimits: %+v", s.Process.Rlimits)
	}
	if !reflect.DeepEqual(s.Linux.Seccomp, seccomp.BuiltinDefault.Profile()) || f.SeccompName != seccomp.DefaultName {
		t.Errorf("seccomp is not the default profile (%s)", f.SeccompName)
	}
	c := s.Process.Capabilities
	if c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) > 0 || !s.Process.NoNewPrivileges {
		t.Errorf("capabilities %+v, no new privileges %v", c, s.Process.NoNewPrivileges)
	}
	if !s.Root.Readonly || !f.HostRoot || s.Process.Cwd != ws || s.Hostname != "hutch" {
		t.Errorf("root %+v, cwd %s, hostname %s", s.Root, s.Process.Cwd, s.Hostname)
	}
	if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == ws && slices.Contains(m.Options, "rw") }) ||
		!slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/tmp" && m.Type == "tmpfs" }) {
		t.Errorf("no writable workspace or private /tmp: %+v", s.Mounts)
	}
	if !slices.Contains(s.Linux.MaskedPaths, "/proc/kcore") || !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
		t.Errorf("/proc's kernel interfaces: masked %q, read-only %q", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if len(f.Unexpressed) == 0 || !strings.HasPrefix(f.Unexpressed[0], "landlock:") {
		t.Errorf("unexpressed: %q", f.Unexpressed)
	}
}

// TestExportModes: what each policy choice makes of the form.
func TestExportModes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct {
		name        string
		mod         func(*runtime.Policy)
		netns       bool
		seccomp     bool
		unexpressed string
	}{
		{"default", func(*runtime.Policy) {}, true, true, "loopback:"},
		{"net host", func(p *runtime.Policy) { p.Network = runtime.NetworkHost }, false, true, "network host:"},
		{"net allow", func(p *runtime.Policy) {
			p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
		}, true, true, "network allow:"},
		{"no seccomp", func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerSeccomp} }, true, false, "seccomp: skipped"},
		{"allow a call", func(p *runtime.Policy) { p.SeccompAllow = []string{"ptrace"} }, true, true, "seccomp mode wall:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runtime.DefaultPolicy(t.TempDir())
			tc.mod(&p)
			f, err := exportOf(p, []string{"true"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			netns := slices.ContainsFunc(f.Spec.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace })
			if netns != tc.netns || netns != slices.Contains(f.Layers, runtime.LayerNetNS) {
				t.Errorf("network namespace %v, layers %v", netns, f.Layers)
			}
			if (f.Spec.Linux.Seccomp != nil) != tc.seccomp || tc.seccomp != slices.Contains(f.Layers, runtime.LayerSeccomp) {
				t.Errorf("seccomp %v, layers %v", f.Spec.Linux.Seccomp != nil, f.Layers)
			}
			if !slices.ContainsFunc(f.Unexpressed, func(s string) bool { return strings.HasPrefix(s, tc.unexpressed) }) {
				t.Errorf("no %q in %q", tc.unexpressed, f.Unexpressed)
			}
		})
	}
}

// TestExportRefuses: the policy's errors are runtime.New's, and the
// disabled mode has no OCI form.
func TestExportRefuses(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name string
		p    runtime.Policy
		args []string
		want string
	}{
		{"no command", runtime.DefaultPolicy(ws), nil, "no command"},
		{"no workspace", runtime.DefaultPolicy(""), []string{"true"}, "Workspace"},
		{"disabled", runtime.Policy{Workspace: ws, Backend: runtime.BackendNone}, []string{"true"}, "disabled mode"},
		{"published port", runtime.Policy{Workspace: ws, Publish: []runtime.Publish{{HostIP: "127.0.0.1", Port: 8000}}}, []string{"true"}, "Publish has no OCI form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exportOf(tc.p, tc.args, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestExportMasksAndReadOnly: an existing masked directory gets a mode-0000
// tmpfs, an existing masked file the bundle's mode-0000 file, a missing
// one a maskedPath; a --read-only path is bound read-only from its host
// source. Write puts the mask file in the bundle, unreadable.
func TestExportMasksAndReadOnly(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Not under /tmp, which the view replaces with a private tmpfs: a
	// home there is not the host's in the view, and has nothing to mask.
	home, err := os.MkdirTemp("/var/tmp", "hutch-oci-home-")
	must(err)
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := t.TempDir()
	t.Setenv("HOME", home)
	must(os.Mkdir(filepath.Join(home, ".ssh"), 0o700))
	must(os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x"), 0o600))
	must(os.Mkdir(filepath.Join(ws, "keep"), 0o755))
	p := runtime.DefaultPolicy(ws)
	p.ReadOnly = []string{filepath.Join(ws, "keep")}
	f, err := exportOf(p, []string{"true"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mount := func(dest string) (specs.Mount, bool) {
		i := slices.IndexFunc(f.Spec.Mounts, func(m specs.Mount) bool { return m.Destination == dest })
		if i < 0 {
			return specs.Mount{}, false
		}
		return f.Spec.Mounts[i], true
	}
	for _, tc := range []struct {
		path    string
		typ     string
		source  string
		options string
	}{
		{filepath.Join(home, ".ssh"), "tmpfs", "tmpfs", "mode=000"},
		{filepath.Join(home, ".netrc"), "bind", MaskFile, "ro"},
		{filepath.Join(ws, "keep"), "bind", filepath.Join(ws, "keep"), "ro"},
	} {
		m, ok := mount(tc.path)
		if !ok || m.Type != tc.typ || m.Source != tc.source || !slices.Contains(m.Options, tc.options) {
			t.Errorf("%s: mount %+v (found %v), want %s from %s with %s", tc.path, m, ok, tc.typ, tc.source, tc.options)
		}
	}
	missing := filepath.Join(home, ".aws")
	if _, ok := mount(missing); ok || !slices.Contains(f.Spec.Linux.MaskedPaths, missing) || !slices.Contains(f.Masked(), missing) {
		t.Errorf("missing %s: not a maskedPath only: %q", missing, f.Spec.Linux.MaskedPaths)
	}
	if slices.Contains(f.Masked(), filepath.Join(ws, "keep")) {
		t.Errorf("a read-only path is listed as masked: %q", f.Masked())
	}
	bundle := t.TempDir()
	must(f.Write(bundle))
	if fi, err := os.Stat(filepath.Join(bundle, MaskFile)); err != nil || fi.Mode().Perm() != 0 || fi.Size() != 0 {
		t.Errorf("bundle's mask file: %v, %v", fi, err)
	}
	// The sandbox's /etc/hosts, naming its hostname: a file of the
	// bundle's, bound read-only, as hutch's own inits make one.
	if host, err := os.ReadFile("/etc/hosts"); err == nil && !bytes.Contains(host, []byte("hutch")) && regularReadableByAll("/etc/hosts") {
		m, ok := mount("/etc/hosts")
		if !ok || m.Type != "bind" || !slices.Contains(m.Options, "ro") || filepath.IsAbs(m.Source) {
			t.Fatalf("/etc/hosts: mount %+v (found %v); want a read-only bind of a file of the bundle's", m, ok)
		}
		b, err := os.ReadFile(filepath.Join(bundle, m.Source))
		fi, _ := os.Stat(filepath.Join(bundle, m.Source))
		if err != nil || !bytes.HasPrefix(b, host) || !bytes.HasSuffix(b, []byte("\n127.0.1.1\thutch\n")) || fi.Mode().Perm() != 0o444 {
			t.Errorf("bundle's %s: %q (%v); want the host's /etc/hosts, then 127.0.1.1 hutch, mode 0444", m.Source, b, err)
		}
	}
}

// TestExportPlanSteps: a read-only path is bound from its host file,
// found through the plan's binds (a source elsewhere, as a worktree's
// git directory), and is a readonlyPath where it has none (in a tmpfs,
// under a mask, missing); a mask is a mount over the host file it hides
// and a maskedPath where there is none.
func TestExportPlanSteps(t *testing.T) {
	h := t.TempDir()
	for _, d := range []string{"srv/w/a/b", "srv/w/secret", "repo/wt/hooks", "usr"} {
		if err := os.MkdirAll(filepath.Join(h, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h, "srv/w/.env"), []byte("K=V"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := mounts.Plan{Mounts: []mounts.Mount{
		{Kind: mounts.HostRoot, Source: "/", Target: "/"},
		{Kind: mounts.BindRW, Source: filepath.Join(h, "srv/w"), Target: "/w"},
		{Kind: mounts.BindRW, Source: filepath.Join(h, "repo/wt"), Target: "/w/.git"},
		{Kind: mounts.Tmpfs, Target: "/scratch", Mode: 0o1777},
		{Kind: mounts.Mask, Target: "/w/secret"},
		{Kind: mounts.Mask, Target: "/w/.env"},
		{Kind: mounts.Mask, Target: "/w/missing"},
		{Kind: mounts.ReadOnly, Target: "/w/a/b"},
		{Kind: mounts.ReadOnly, Target: "/w/.git/hooks"},
		{Kind: mounts.ReadOnly, Target: filepath.Join(h, "usr")},
		{Kind: mounts.ReadOnly, Target: "/scratch/x"},
		{Kind: mounts.ReadOnly, Target: "/w/secret/x"},
		{Kind: mounts.ReadOnly, Target: "/w/gone"},
	}}
	f := &Form{Spec: &specs.Spec{Linux: &specs.Linux{}}}
	if err := f.addMounts(plan, runtime.Policy{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, typ, source, option string
	}{
		{"/w/a/b", "bind", filepath.Join(h, "srv/w/a/b"), "ro"},
		{"/w/.git/hooks", "bind", filepath.Join(h, "repo/wt/hooks"), "ro"},
		{filepath.Join(h, "usr"), "bind", filepath.Join(h, "usr"), "ro"},
		{"/w/secret", "tmpfs", "tmpfs", "mode=000"},
		{"/w/.env", "bind", MaskFile, "ro"},
	} {
		i := slices.IndexFunc(f.Spec.Mounts, func(m specs.Mount) bool { return m.Destination == tc.target })
		if i < 0 {
			t.Errorf("%s: no mount in %+v", tc.target, f.Spec.Mounts)
			continue
		}
		if m := f.Spec.Mounts[i]; m.Type != tc.typ || m.Source != tc.source || !slices.Contains(m.Options, tc.option) {
			t.Errorf("%s: mount %+v, want %s from %s with %s", tc.target, m, tc.typ, tc.source, tc.option)
		}
	}
	for _, p := range []string{"/scratch/x", "/w/secret/x", "/w/gone"} {
		if !slices.Contains(f.Spec.Linux.ReadonlyPaths, p) || slices.ContainsFunc(f.Spec.Mounts, func(m specs.Mount) bool { return m.Destination == p }) {
			t.Errorf("%s: want a readonlyPath only: %q", p, f.Spec.Linux.ReadonlyPaths)
		}
	}
	if !slices.Equal(f.Spec.Linux.MaskedPaths, []string{"/w/missing"}) {
		t.Errorf("maskedPaths %q, want the missing mask only", f.Spec.Linux.MaskedPaths)
	}
}

// checkedForOCI is p checked for an OCI runtime, as hutch oci export
// checks it: unless it names a backend.
func checkedForOCI(p runtime.Policy) (*runtime.Resolved, error) {
	if p.Backend == "" {
		p.Backend = runtime.BackendOCI
	}
	return runtime.Check(p)
}

// mustCheck is checkedForOCI's Resolved, or fails t.
func mustCheck(t *testing.T, p runtime.Policy) *runtime.Resolved {
	t.Helper()
	r, err := checkedForOCI(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// exportOf is Export of p checked for an OCI runtime: Check's error, or
// Export's.
func exportOf(p runtime.Policy, args []string, o Options) (*Form, error) {
	r, err := checkedForOCI(p)
	if err != nil {
		return nil, err
	}
	return Export(r, args, o)
}

// podOf is Pod of p checked for an OCI runtime: Check's error, or Pod's.
func podOf(p runtime.Policy, args []string, o PodOptions) (*Manifest, error) {
	r, err := checkedForOCI(p)
	if err != nil {
		return nil, err
	}
	return Pod(r, args, o)
}

// TestExportListed: a listed policy's form is an empty rootfs that Write
// fills with the host's top-level links, the listed trees bound read-only
// into it and nothing else of the host's tree; it takes no image.
func TestExportListed(t *testing.T) {
	ws := t.TempDir()
	p := runtime.DefaultPolicy(ws)
	p.Reads = runtime.ReadsListed
	f, err := Export(mustCheck(t, p), []string{"true"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.EmptyRoot || f.HostRoot || !f.Spec.Root.Readonly {
		t.Errorf("EmptyRoot %v, HostRoot %v, read-only root %v; want an empty read-only root", f.EmptyRoot, f.HostRoot, f.Spec.Root.Readonly)
	}
	binds := map[string][]string{}
	for _, m := range f.Spec.Mounts {
		if m.Type == "bind" {
			binds[m.Destination] = m.Options
		}
	}
	if !slices.Contains(binds["/usr"], "ro") || !slices.Contains(binds["/etc"], "ro") || !slices.Contains(binds[ws], "rw") {
		t.Errorf("binds %v: want /usr and /etc read-only, the workspace read-write", binds)
	}
	for d := range binds {
		if d == "/" || d == "/root" || d == "/home" || d == "/var" || d == "/opt" {
			t.Errorf("the host's %s is bound into a listed view", d)
		}
	}
	bundle := t.TempDir()
	if err := f.Write(bundle); err != nil {
		t.Fatal(err)
	}
	for _, l := range f.RootLinks {
		if got, err := os.Readlink(filepath.Join(bundle, RootfsDir, l.Path)); err != nil || got != l.Target {
			t.Errorf("rootfs%s -> %q (%v), want %q", l.Path, got, err, l.Target)
		}
	}
	if fi, err := os.Lstat("/bin"); err == nil && fi.Mode()&os.ModeSymlink != 0 && len(f.RootLinks) == 0 {
		t.Errorf("the host's /bin is a link, and the form makes none")
	}
	if err := f.Write(bundle); err != nil {
		t.Errorf("a bundle written again: %v", err)
	}
	if _, err := Export(mustCheck(t, p), []string{"true"}, Options{Rootfs: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "takes no image") {
		t.Errorf("a listed view with an image: %v, want a refusal", err)
	}
}

// TestExportRuntimeFlags: what a runtime needs beyond the configuration
// is in it, as an annotation, and in the command line the export names:
// runsc's --oci-seccomp with a filter (without it runsc runs none), its
// network flag always; runc and crun need none. A pids limit runsc would
// not start with is refused for runsc alone, naming Pids.
func TestExportRuntimeFlags(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name  string
		mod   func(p *runtime.Policy)
		runsc string
	}{
		{"default", func(*runtime.Policy) {}, "--network=none --oci-seccomp"},
		{"net host", func(p *runtime.Policy) { p.Network = runtime.NetworkHost }, "--network=host --oci-seccomp"},
		{"no seccomp", func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerSeccomp} }, "--network=none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runtime.DefaultPolicy(ws)
			tc.mod(&p)
			f, err := exportOf(p, []string{"true"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			a := f.Spec.Annotations
			if a[AnnotationRuntimeFlags+"runsc"] != tc.runsc {
				t.Errorf("runsc's annotation %q, want %q", a[AnnotationRuntimeFlags+"runsc"], tc.runsc)
			}
			for _, rt := range []string{"runc", "crun"} {
				if v, ok := a[AnnotationRuntimeFlags+rt]; ok {
					t.Errorf("%s's annotation %q", rt, v)
				}
			}
			want := append(append([]string{"runsc"}, strings.Fields(tc.runsc)...), "run", "--bundle", "/b", "id")
			if got := f.RuntimeCommand("runsc", "/b", "id"); !slices.Equal(got, want) {
				t.Errorf("runsc's command line %q, want %q", got, want)
			}
		})
	}
	p := runtime.DefaultPolicy(ws)
	p.Pids = 20
	f, err := exportOf(p, []string{"true"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pe *runtime.PolicyError
	if err := f.checkRuntime("runsc"); !errors.As(err, &pe) || pe.Field != "Pids" || pe.Value != "20" {
		t.Errorf("runsc with pids 20: %v", err)
	}
	for _, rt := range []string{"runc", "crun"} {
		if err := f.checkRuntime(rt); err != nil {
			t.Errorf("%s with pids 20: %v", rt, err)
		}
	}
	if notes := f.RuntimeNotes("runsc"); !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "pids limit 20: below") }) {
		t.Errorf("runsc's notes %q", notes)
	}
}

// TestExportRootless: the rootless form maps only the caller's uid and
// gid (to 0, as rootless runc requires a mapping of root), in a user
// namespace of its own; writes no cgroup (no resources: the runtime has
// no delegated cgroup to write them in) and holds the memory and pids
// limits as rlimits instead, saying so; binds the host's root itself,
// read-only throughout, under every mount of the plan.
func TestExportRootless(t *testing.T) {
	p := runtime.DefaultPolicy(t.TempDir())
	p.Memory, p.Pids = 256<<20, 100
	f, err := exportOf(p, []string{"true"}, Options{Rootless: true})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Spec
	want := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Getuid()), Size: 1}}
	if s.Linux.Namespaces[0].Type != specs.UserNamespace || !reflect.DeepEqual(s.Linux.UIDMappings, want) || len(s.Linux.GIDMappings) != 1 || s.Linux.GIDMappings[0].ContainerID != 0 ||
		s.Process.User.UID != 0 || s.Process.User.GID != 0 {
		t.Errorf("user namespace: %+v, uid mappings %+v, gid mappings %+v, user %+v", s.Linux.Namespaces, s.Linux.UIDMappings, s.Linux.GIDMappings, s.Process.User)
	}
	if s.Linux.Resources != nil || s.Linux.CgroupsPath != "" {
		t.Errorf("cgroup writes in a rootless form: %+v %q", s.Linux.Resources, s.Linux.CgroupsPath)
	}
	rl := map[string]uint64{}
	for _, r := range s.Process.Rlimits {
		rl[r.Type] = r.Hard
	}
	if rl["RLIMIT_DATA"] != 256<<20 || rl["RLIMIT_NPROC"] != 100 {
		t.Errorf("rlimits %+v", s.Process.Rlimits)
	}
	if m := s.Mounts[0]; m.Destination != "/" || m.Source != "/" || !slices.Contains(m.Options, "rro") || !slices.Contains(m.Options, "rbind") {
		t.Errorf("first mount %+v, not the host's root read-only", m)
	}
	if !slices.Contains(f.Layers, runtime.LayerUserNS) || slices.Contains(f.Layers, runtime.LayerCgroup) {
		t.Errorf("layers %v", f.Layers)
	}
	for _, line := range []string{"memory (rootless, no cgroup)", "pids (rootless, no cgroup)", "user namespace: the runtime's own"} {
		if !slices.ContainsFunc(f.Unexpressed, func(u string) bool { return strings.HasPrefix(u, line) }) {
			t.Errorf("no line %q in %q", line, f.Unexpressed)
		}
	}
}

// regularReadableByAll reports whether p is a regular file anyone may
// read: an /etc/hosts the view shows with the hostname added.
func regularReadableByAll(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0
}
