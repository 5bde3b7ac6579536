//go:build linux

package cgroups

// The cgroup v2 logic, checked against a fake cgroup2 tree in a temporary
// directory: this machine is hybrid, so v2 cannot run here for real. The
// fake stands in for the kernel where it matters: mkdir creates the
// interface files, and controller files only for controllers the parent's
// cgroup.subtree_control enables; cgroup.procs writes move a pid; enabling
// controllers in a non-root group that holds processes is EBUSY (the
// no-internal-processes rule); writes to files that do not exist fail.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

const fakePidNS = 4026531836

type fakeV2 struct {
	t    *testing.T
	root string
	proc string
	// nsRoot makes the mount's top an ordinary group (a container's
	// cgroup namespace root) subject to the no-internal-processes rule.
	nsRoot bool
	// noSwap leaves out memory.swap.max (no swap accounting); noIOWeight
	// leaves out io.weight, so only io.bfq.weight exists.
	noSwap, noIOWeight bool
	denied             map[string]bool // paths access() refuses
	writes             []string        // "relative/path=value", in order
}

func newFakeV2(t *testing.T, controllers string) *fakeV2 {
	f := &fakeV2{t: t, root: t.TempDir(), proc: t.TempDir(), denied: map[string]bool{}}
	f.put("cgroup.controllers", controllers+"\n")
	f.put("cgroup.subtree_control", "")
	f.put("cgroup.procs", "")
	f.put("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
	return f
}

func (f *fakeV2) abs(rel string) string { return filepath.Join(f.root, rel) }

func (f *fakeV2) rel(p string) string {
	r, err := filepath.Rel(f.root, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fakeV2) put(rel, content string) {
	f.t.Helper()
	if err := os.WriteFile(f.abs(rel), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeV2) get(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(f.abs(rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// enabled lists the controllers a subtree_control file's writes enabled.
func enabledIn(subtree string) []string {
	var out []string
	for _, tok := range strings.Fields(subtree) {
		if n, ok := strings.CutPrefix(tok, "+"); ok {
			out = append(out, n)
		}
	}
	return out
}

func (f *fakeV2) mkdir(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	parent, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup.subtree_control"))
	ctls := enabledIn(string(parent))
	files := map[string]string{
		"cgroup.controllers":     strings.Join(ctls, " ") + "\n",
		"cgroup.subtree_control": "",
		"cgroup.procs":           "",
		"cgroup.kill":            "",
		"cgroup.freeze":          "0\n",
		"cgroup.events":          "populated 0\nfrozen 0\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	}
	for _, c := range ctls {
		switch c {
		case "memory":
			files["memory.max"] = "max\n"
			files["memory.peak"] = "0\n"
			files["memory.current"] = "0\n"
			files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
			if !f.noSwap {
				files["memory.swap.max"] = "max\n"
			}
		case "pids":
			files["pids.max"] = "max\n"
			files["pids.current"] = "0\n"
			files["pids.peak"] = "0\n"
			files["pids.events"] = "max 0\n"
		case "cpu":
			files["cpu.max"] = "max 100000\n"
			files["cpu.weight"] = "100\n"
		case "io":
			if !f.noIOWeight {
				files["io.weight"] = "default 100\n"
			}
			files["io.bfq.weight"] = "default 100\n"
		}
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(p, n), []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeV2) write(p, v string) error {
	f.writes = append(f.writes, f.rel(p)+"="+v)
	dir, base := filepath.Dir(p), filepath.Base(p)
	switch base {
	case "cgroup.subtree_control":
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if (dir != f.root || f.nsRoot) && strings.TrimSpace(string(procs)) != "" {
			return &fs.PathError{Op: "write", Path: p, Err: unix.EBUSY}
		}
		avail, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		for _, c := range enabledIn(v) {
			if !slices.Contains(strings.Fields(string(avail)), c) {
				return &fs.PathError{Op: "write", Path: p, Err: unix.ENOENT}
			}
		}
	case "cgroup.procs":
		// A move: out of wherever the pid was, into this group.
		if _, err := os.Stat(p); err != nil {
			return err
		}
		_ = filepath.WalkDir(f.root, func(q string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(q)
				pids := strings.Fields(string(b))
				if i := slices.Index(pids, v); i >= 0 {
					pids = slices.Delete(pids, i, i+1)
					_ = os.WriteFile(q, []byte(strings.Join(pids, "\n")), 0o644)
				}
			}
			return nil
		})
		b, _ := os.ReadFile(p)
		return os.WriteFile(p, append(b, v+"\n"...), 0o644)
	}
	return writeFile(p, v)
}

func (f *fakeV2) access(p string) error {
	if f.denied[p] {
		return unix.EACCES
	}
	return writable(p)
}

// fakeStat writes a /proc/<pid>/stat for pid, started at start.
func (f *fakeV2) fakeStat(pid int, start uint64) {
	f.t.Helper()
	d := filepath.Join(f.proc, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		f.t.Fatal(err)
	}
	// Field 2 may hold spaces and parentheses; field 22 is the start time.
	stat := fmt.Sprintf("%d (a) b (c) S%s %d 0 0\n", pid, strings.Repeat(" 0", 18), start)
	if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeV2) host(euid int, own string) *host {
	f.fakeStat(4242, 777)
	return &host{
		mounts: mountTable{v1: map[string]mountPoint{}, v2: &mountPoint{Path: f.root, Root: "/"}},
		own:    map[string]string{"": own},
		euid:   euid, pid: 4242, start: 777, pidns: fakePidNS, proc: f.proc,
		mkdir: f.mkdir, rmdir: os.RemoveAll, write: f.write, access: f.access,
	}
}

// writesSince returns the writes logged after the first n.
func (f *fakeV2) writesSince(n int) []string { return slices.Clone(f.writes[n:]) }

const allV2 = "cpuset cpu io memory hugetlb pids rdma misc"

// newFakeGroup is a group without limits of a root Manager on h.
func newFakeGroup(t *testing.T, h *host) *Group {
	t.Helper()
	m, err := newManager(h)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Create(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestV2RootManager(t *testing.T) {
	f := newFakeV2(t, allV2)
	m, err := newManager(f.host(0, "/system.slice/agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout() != V2 {
		t.Errorf("layout %v", m.Layout())
	}
	const want = "+memory +pids +cpu +io"
	if got := f.get("cgroup.subtree_control"); got != want {
		t.Errorf("root cgroup.subtree_control = %q, want %q", got, want)
	}
	if got := f.get("hutch/cgroup.subtree_control"); got != want {
		t.Errorf("hutch/cgroup.subtree_control = %q, want %q", got, want)
	}
	if got := m.Controllers(); !slices.Equal(got, []string{"memory", "pids", "cpu", "io"}) {
		t.Errorf("Controllers() = %v", got)
	}
	if !slices.Equal(m.dirs, []string{f.abs("hutch")}) {
		t.Errorf("parents %v", m.dirs)
	}
	// A second Manager (another host process) reuses hutch.
	if _, err := newManager(f.host(0, "/")); err != nil {
		t.Fatalf("second manager: %v", err)
	}
}

func TestV2CreateFiles(t *testing.T) {
	f := newFakeV2(t, allV2)
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.writes)
	g, err := m.Create(Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5, IOWeight: 200})
	if err != nil {
		t.Fatal(err)
	}
	rel := f.rel(g.Path())
	if !strings.HasPrefix(rel, "hutch/hutch-4242-777-4026531836-") {
		t.Errorf("group at %s", rel)
	}
	// Exactly these writes, in this order: nothing else is touched.
	want := []string{
		rel + "/memory.max=268435456",
		rel + "/memory.swap.max=0",
		rel + "/pids.max=64",
		rel + "/cpu.max=150000 100000",
		rel + "/io.weight=200",
	}
	if got := f.writesSince(n); !slices.Equal(got, want) {
		t.Errorf("writes:\n %q\nwant\n %q", got, want)
	}
	if u := g.Unenforced(); len(u) != 0 {
		t.Errorf("Unenforced() = %q", u)
	}
	dir, ok := g.File()
	if !ok {
		t.Fatal("no directory on v2")
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(g.Path(), &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino || a.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Errorf("File is not the group's directory")
	}
	if fl, err := unix.FcntlInt(dir.Fd(), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("directory not close-on-exec (%d, %v)", fl, err)
	}
	if got := g.Dirs(); !slices.Equal(got, []string{g.Path()}) {
		t.Errorf("Dirs() = %v", got)
	}

	if err := g.Add(31337); err != nil {
		t.Fatal(err)
	}
	if got := f.get(rel + "/cgroup.procs"); got != "31337\n" {
		t.Errorf("cgroup.procs = %q", got)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := f.get(rel + "/cgroup.kill"); got != "1" {
		t.Errorf("cgroup.kill = %q", got)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
		t.Errorf("group still there after Destroy: %v", err)
	}
	if _, ok := g.File(); ok {
		t.Error("directory still open after Destroy")
	}
	if err := g.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestV2LimitVariants(t *testing.T) {
	tests := []struct {
		name string
		l    Limits
		want []string // file=value, relative to the group
	}{
		{"none", Limits{}, nil},
		{"memory with swap", Limits{MemoryBytes: 1 << 30, SwapBytes: 512 << 20}, []string{"memory.max=1073741824", "memory.swap.max=536870912"}},
		{"swap alone", Limits{SwapBytes: 1 << 20}, []string{"memory.swap.max=1048576"}},
		{"tiny cpu share is the kernel's minimum quota", Limits{CPUs: 0.001}, []string{"cpu.max=1000 100000"}},
		{"many cpus", Limits{CPUs: 16}, []string{"cpu.max=1600000 100000"}},
		{"half a cpu", Limits{CPUs: 0.5}, []string{"cpu.max=50000 100000"}},
		{"pids", Limits{Pids: 1}, []string{"pids.max=1"}},
		{"io weight max", Limits{IOWeight: 10000}, []string{"io.weight=10000"}},
		{"file size is rlimit-only", Limits{FileSizeBytes: 1 << 20}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t, allV2)
			m, err := newManager(f.host(0, "/"))
			if err != nil {
				t.Fatal(err)
			}
			n := len(f.writes)
			g, err := m.Create(tt.l)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Destroy()
			var got []string
			for _, w := range f.writesSince(n) {
				got = append(got, strings.TrimPrefix(w, f.rel(g.Path())+"/"))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}

func TestV2Invalid(t *testing.T) {
	f := newFakeV2(t, allV2)
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Limits{{MemoryBytes: -1}, {Pids: -1}, {CPUs: -0.5}, {IOWeight: 10001}, {SwapBytes: -1}} {
		if g, err := m.Create(l); err == nil {
			g.Destroy()
			t.Errorf("Create(%+v) accepted", l)
		}
	}
	ents, _ := os.ReadDir(f.abs("hutch"))
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("hutch holds %s after refused Creates", e.Name())
		}
	}
}

func TestV2NoSwapAccounting(t *testing.T) {
	f := newFakeV2(t, allV2)
	f.noSwap = true
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Create(Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if u := g.Unenforced(); len(u) != 1 || !strings.HasPrefix(u[0], "swap:") {
		t.Errorf("Unenforced() = %q", u)
	}
	// Learned once: the next group does not try again.
	n := len(f.writes)
	g2, err := m.Create(Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Destroy()
	for _, w := range f.writesSince(n) {
		if strings.Contains(w, "memory.swap.max") {
			t.Errorf("second group tried %s", w)
		}
	}
	if u := g2.Unenforced(); len(u) != 1 {
		t.Errorf("second group Unenforced() = %q", u)
	}
}

func TestV2BFQWeight(t *testing.T) {
	f := newFakeV2(t, allV2)
	f.noIOWeight = true
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Create(Limits{IOWeight: 5000})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	rel := f.rel(g.Path())
	if got := f.get(rel + "/io.bfq.weight"); got != "1000" {
		t.Errorf("io.bfq.weight = %q, want the clamped 1000", got)
	}
	n := len(f.writes)
	g2, err := m.Create(Limits{IOWeight: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Destroy()
	if got, want := f.writesSince(n), []string{f.rel(g2.Path()) + "/io.bfq.weight=50"}; !slices.Equal(got, want) {
		t.Errorf("second group writes %q, want %q (the working file remembered)", got, want)
	}
}

func TestV2MissingControllers(t *testing.T) {
	f := newFakeV2(t, "memory pids")
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get("cgroup.subtree_control"); got != "+memory +pids" {
		t.Errorf("enabled %q", got)
	}
	if _, err := m.Create(Limits{CPUs: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("CPU limit without a cpu controller: %v", err)
	}
	g, err := m.Create(Limits{IOWeight: 100, MemoryBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if u := g.Unenforced(); len(u) != 1 || !strings.HasPrefix(u[0], "io weight") {
		t.Errorf("Unenforced() = %q", u)
	}
	if _, err := newManager(newFakeV2(t, "cpu io").host(0, "/")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no memory and no pids controller: %v", err)
	}
}

// TestV2Delegated: an unprivileged host in a systemd scope with
// Delegate=yes. Its own cgroup holds it (and a sibling process), so the
// processes are moved to a leaf before controllers can be enabled.
func TestV2Delegated(t *testing.T) {
	f := newFakeV2(t, allV2)
	f.put("cgroup.subtree_control", "+memory +pids +cpu")
	own := "/user.slice/user-1000.slice/user@1000.service/app.slice/agent.scope"
	if err := os.MkdirAll(f.abs(own), 0o755); err != nil {
		t.Fatal(err)
	}
	f.put(own+"/cgroup.controllers", "memory pids cpu\n")
	f.put(own+"/cgroup.subtree_control", "")
	f.put(own+"/cgroup.procs", "4242\n4300\n")
	// Nothing above the delegated scope is writable.
	f.denied[f.abs("cgroup.subtree_control")] = true

	m, err := newManager(f.host(1000, own))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(own + "/cgroup.procs"); strings.TrimSpace(got) != "" {
		t.Errorf("own cgroup still holds %q", got)
	}
	if got := strings.Fields(f.get(own + "/hutch-host/cgroup.procs")); !slices.Equal(got, []string{"4242", "4300"}) {
		t.Errorf("leaf holds %q", got)
	}
	if got := f.get(own + "/cgroup.subtree_control"); got != "+memory +pids +cpu" {
		t.Errorf("own subtree_control %q", got)
	}
	if got := f.get("cgroup.subtree_control"); got != "+memory +pids +cpu" {
		t.Errorf("root subtree_control changed to %q", got)
	}
	for _, w := range f.writes {
		if !strings.HasPrefix(w, strings.TrimPrefix(own, "/")) {
			t.Errorf("wrote outside the delegated subtree: %s", w)
		}
	}
	g, err := m.Create(Limits{MemoryBytes: 128 << 20, Pids: 32, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if !strings.HasPrefix(g.Path(), f.abs(own+"/hutch/hutch-4242-")) {
		t.Errorf("group at %s", g.Path())
	}
	rel := f.rel(g.Path())
	for file, want := range map[string]string{"memory.max": "134217728", "pids.max": "32", "cpu.max": "200000 100000", "memory.swap.max": "0"} {
		if got := f.get(rel + "/" + file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// The leaf never looks like a stale group.
	if n, err := m.Sweep(); n != 0 || err != nil {
		t.Errorf("Sweep() = %d, %v", n, err)
	}
}

func TestV2NotDelegated(t *testing.T) {
	f := newFakeV2(t, allV2)
	own := "/user.slice/user-1000.slice/session-3.scope"
	if err := os.MkdirAll(f.abs(own), 0o755); err != nil {
		t.Fatal(err)
	}
	f.put(own+"/cgroup.subtree_control", "")
	f.denied[f.abs(own+"/cgroup.subtree_control")] = true
	_, err := newManager(f.host(1000, own))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "Delegate=yes") {
		t.Errorf("error does not say what to do: %v", err)
	}
	t.Log(err)
	if len(f.writes) != 0 {
		t.Errorf("wrote %q", f.writes)
	}
}

// TestV2ContainerRoot: root in a container with its own cgroup namespace:
// the mount's top is the container's cgroup, holding its processes.
func TestV2ContainerRoot(t *testing.T) {
	f := newFakeV2(t, "cpu io memory pids")
	f.nsRoot = true
	f.put("cgroup.procs", "1\n4242\n")
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(f.get("hutch-host/cgroup.procs")); !slices.Equal(got, []string{"1", "4242"}) {
		t.Errorf("leaf holds %q", got)
	}
	if m.dirs[0] != f.abs("hutch") {
		t.Errorf("parent %s", m.dirs[0])
	}
}

func TestV2Usage(t *testing.T) {
	f := newFakeV2(t, allV2)
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Create(Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	rel := f.rel(g.Path())
	f.put(rel+"/memory.peak", "67100672\n")
	f.put(rel+"/memory.events", "low 0\nhigh 0\nmax 41\noom 2\noom_kill 2\noom_group_kill 0\n")
	f.put(rel+"/cpu.stat", "usage_usec 1750000\nuser_usec 1500000\nsystem_usec 250000\nnr_periods 20\nnr_throttled 10\nthrottled_usec 900000\nnr_bursts 0\nburst_usec 0\n")
	f.put(rel+"/pids.peak", "10\n")
	f.put(rel+"/pids.current", "0\n")
	f.put(rel+"/pids.events", "max 87\n")
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{PeakMemoryBytes: 67100672, CPUUser: 1500 * time.Millisecond, CPUSystem: 250 * time.Millisecond,
		PidsPeak: 10, PidsLimitHits: 87, OOMKills: 2}
	if u != want {
		t.Errorf("Usage() = %+v, want %+v", u, want)
	}
	// Older kernels: no memory.peak (5.19), no pids.peak.
	os.Remove(f.abs(rel + "/memory.peak"))
	os.Remove(f.abs(rel + "/pids.peak"))
	f.put(rel+"/pids.current", "3\n")
	u, err = g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakMemoryBytes != 0 || u.PidsPeak != 3 || u.OOMKills != 2 {
		t.Errorf("Usage() without peaks = %+v", u)
	}
	// A garbled counter is an error, not a zero.
	f.put(rel+"/pids.current", "many\n")
	if _, err := g.Usage(); err == nil {
		t.Error("garbled pids.current accepted")
	}
}

func TestV2KillFallback(t *testing.T) {
	f := newFakeV2(t, allV2)
	g := newFakeGroup(t, f.host(0, "/"))
	defer g.Destroy()
	rel := f.rel(g.Path())
	// Before Linux 5.14 there is no cgroup.kill: freeze, kill, thaw.
	os.Remove(f.abs(rel + "/cgroup.kill"))
	f.put(rel+"/cgroup.events", "populated 0\nfrozen 1\n")
	n := len(f.writes)
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	want := []string{rel + "/cgroup.kill=1", rel + "/cgroup.freeze=1", rel + "/cgroup.freeze=0"}
	if got := f.writesSince(n); !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
}

func TestV2Sweep(t *testing.T) {
	f := newFakeV2(t, allV2)
	m, err := newManager(f.host(0, "/"))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := m.Create(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Destroy()
	f.fakeStat(500, 1234)
	f.fakeStat(501, 9999)
	// Process 502 lives in another pid namespace: its ns/pid (a file
	// here) has that namespace's inode.
	f.fakeStat(502, 1)
	nsFile := filepath.Join(f.proc, "502", "ns", "pid")
	if err := os.MkdirAll(filepath.Dir(nsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nsFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var ns unix.Stat_t
	if err := unix.Stat(nsFile, &ns); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{ // name -> swept
		fmt.Sprintf("hutch-999999-5-%d-1", fakePidNS): true,  // owner dead
		fmt.Sprintf("hutch-501-1-%d-7", fakePidNS):    true,  // pid reused by a later process
		fmt.Sprintf("hutch-501-1-%d-8", fakePidNS):    true,  // the same owner's other group
		fmt.Sprintf("hutch-500-1234-%d-3", fakePidNS): false, // owner alive
		fmt.Sprintf("hutch-7-5-%d-1", ns.Ino):         false, // another pid namespace, with a process
		"hutch-999998-5-1-1":                          true,  // another pid namespace, ended
		"hutch-host":                                  false,
		"other-tool":                                  false,
	}
	for n := range names {
		if err := f.mkdir(f.abs("hutch/" + n)); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := m.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if removed != 4 {
		t.Errorf("removed %d, want 4", removed)
	}
	for n, swept := range names {
		_, err := os.Stat(f.abs("hutch/" + n))
		if gone := os.IsNotExist(err); gone != swept {
			t.Errorf("%s: gone=%v, want %v", n, gone, swept)
		}
	}
	if _, err := os.Stat(mine.Path()); err != nil {
		t.Errorf("Sweep removed this Manager's own group: %v", err)
	}
}

func TestParseName(t *testing.T) {
	for name, want := range map[string]*owner{
		"hutch-12-345-4026531836-6":   {pid: 12, start: 345, pidns: 4026531836},
		"hutch-12-345-4026531836":     nil,
		"hutch-12-345-4026531836-6-7": nil,
		"hutch-0-345-4026531836-6":    nil,
		"hutch-x-345-4026531836-6":    nil,
		"hutch-host":                  nil,
		"hutch":                       nil,
		"system.slice":                nil,
	} {
		got, ok := parseName(name)
		if (want == nil) != !ok || (ok && got != *want) {
			t.Errorf("parseName(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	f := newFakeV2(t, allV2)
	g := newFakeGroup(t, f.host(0, "/"))
	defer g.Destroy()
	if o, ok := parseName(g.Name()); !ok || o != (owner{pid: 4242, start: 777, pidns: fakePidNS}) {
		t.Errorf("own group name %q parses as %+v, %v", g.Name(), o, ok)
	}
}

// TestV2MatchesContainerd writes the same limits with containerd's cgroup2
// manager into a plain directory and compares the files: the formats are
// the ones containerd and runc use in production.
func TestV2MatchesContainerd(t *testing.T) {
	for _, l := range []Limits{
		{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1.5},
		{MemoryBytes: 1 << 30, SwapBytes: 512 << 20, Pids: 1, CPUs: 0.5},
	} {
		f := newFakeV2(t, allV2)
		m, err := newManager(f.host(0, "/"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := m.Create(l)
		if err != nil {
			t.Fatal(err)
		}
		mem, swap := l.MemoryBytes, l.SwapBytes
		quota, period := l.cpuQuota(), uint64(cpuPeriod)
		ref := t.TempDir()
		if err := os.WriteFile(filepath.Join(ref, "cgroup.subtree_control"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = cgroup2.NewManager(ref, "/ref", &cgroup2.Resources{
			Memory: &cgroup2.Memory{Max: &mem, Swap: &swap},
			Pids:   &cgroup2.Pids{Max: l.Pids},
			CPU:    &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{"memory.max", "memory.swap.max", "pids.max", "cpu.max"} {
			// The library creates files with mode 0 (on a real cgroupfs
			// they exist already): readable only to root as they are.
			if err := os.Chmod(filepath.Join(ref, "ref", file), 0o644); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(ref, "ref", file))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.get(f.rel(g.Path()) + "/" + file); got != string(want) {
				t.Errorf("%+v: %s = %q, containerd writes %q", l, file, got, want)
			}
		}
		g.Destroy()
	}
}
