//go:build linux

package cgroups

// Tests against this host's real cgroups, checked from the host side
// through the cgroup filesystem and /proc. They need root on a v1 or
// hybrid host (on a v2 host, root runs the placement-independent ones) and
// skip otherwise.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// liveManager returns a Manager on this host, or skips.
func liveManager(t testing.TB) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	m, err := NewManager()
	if err != nil {
		t.Fatalf("NewManager as root: %v", err)
	}
	return m
}

// v1Manager returns a Manager on a v1 or hybrid host, or skips.
func v1Manager(t testing.TB) *Manager {
	t.Helper()
	m := liveManager(t)
	if m.Layout() != V1 && m.Layout() != Hybrid {
		t.Skipf("layout %v: these checks read v1 files", m.Layout())
	}
	return m
}

func create(t testing.TB, m *Manager, l Limits) *Group {
	t.Helper()
	g, err := m.Create(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Destroy(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return g
}

// readTrim reads a cgroup file from the host side.
func readTrim(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// startGated starts argv under sh, held until release is called: the
// process is added to g first, so the command runs under its limits from
// its first instruction (as the sandbox init does, which waits for its
// config before running anything).
func startGated(t *testing.T, g *Group, stdout io.Writer, argv ...string) (cmd *exec.Cmd, release func()) {
	t.Helper()
	cmd = exec.Command("/bin/sh", append([]string{"-c", `read _ && exec "$@"`, "sh"}, argv...)...)
	cmd.Stdout, cmd.Stderr = stdout, stdout
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return cmd, func() {
		io.WriteString(in, "\n")
		in.Close()
	}
}

// procGone reports whether pid has ended: no /proc entry, or a zombie
// waiting for a parent outside the test to reap it.
func procGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func inGroup(t *testing.T, pid int, g *Group) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "/"+g.Name()+"\n")
}

func TestLiveLayout(t *testing.T) {
	l, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := readMounts()
	_, memV1 := mt.v1["memory"]
	if st, err := os.Stat("/sys/fs/cgroup/unified"); err == nil && st.IsDir() && memV1 && mt.v2 != nil {
		if l != Hybrid {
			t.Errorf("this host has v1 memory and a cgroup2 mount, Detect() = %v", l)
		}
	}
	t.Logf("Detect() = %v", l)
}

func TestLiveV1Limits(t *testing.T) {
	m := v1Manager(t)
	t.Logf("layout %v, controllers %v, parents %v", m.Layout(), m.Controllers(), m.dirs)
	g := create(t, m, Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 1.5, IOWeight: 200})
	for _, d := range g.Dirs() {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	mem, pids, cpu := g.ctl[ctlMemory], g.ctl[ctlPids], g.ctl[ctlCPU]
	checks := map[string]string{
		mem + "/memory.limit_in_bytes": "67108864",
		pids + "/pids.max":             "10",
		cpu + "/cpu.cfs_quota_us":      "150000",
		cpu + "/cpu.cfs_period_us":     "100000",
	}
	if _, err := os.Stat(mem + "/memory.memsw.limit_in_bytes"); err == nil {
		// No swap beyond the memory limit.
		checks[mem+"/memory.memsw.limit_in_bytes"] = "67108864"
	}
	if io := g.ctl[ctlIO]; io != "" {
		if _, err := os.Stat(io + "/blkio.bfq.weight"); err == nil {
			checks[io+"/blkio.bfq.weight"] = "200"
		}
	}
	for f, want := range checks {
		if got := readTrim(t, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	t.Logf("unenforced: %q", g.Unenforced())
	if _, ok := g.File(); ok {
		t.Error("a directory for CLONE_INTO_CGROUP on v1")
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
}

func TestLiveKillDestroy(t *testing.T) {
	m := v1Manager(t)
	t.Run("Create", func(t *testing.T) { liveKillDestroy(t, m, false) })
	// Without a freezer hierarchy: Kill signals what the group lists
	// until it is empty.
	t.Run("CreateInPidNS", func(t *testing.T) { liveKillDestroy(t, m, true) })
}

func liveKillDestroy(t *testing.T, m *Manager, inPidNS bool) {
	newGroup := m.Create
	if inPidNS {
		newGroup = m.CreateInPidNS
	}
	g, err := newGroup(Limits{MemoryBytes: 256 << 20, Pids: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Destroy() })
	// The host's freezer hierarchy has the group exactly when it was
	// made by Create.
	if fz := m.parents[ctlFreezer]; fz != "" {
		_, err := os.Stat(fz + "/" + g.Name())
		if made := err == nil; made == inPidNS {
			t.Errorf("freezer directory of the group made: %v (%v), made by CreateInPidNS: %v", made, err, inPidNS)
		}
	}
	// sh starts sleep in the background and reports its pid: the
	// grandchild is not the test's to reap, so it is gone (or a zombie of
	// whoever inherits it) only if the kill reached it through the group.
	out, w := io.Pipe()
	cmd, release := startGated(t, g, w, "/bin/sh", "-c", `sleep 100 & echo $!; wait`)
	release()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	sleepPid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	for _, pid := range []int{cmd.Process.Pid, sleepPid} {
		if !inGroup(t, pid, g) {
			t.Fatalf("pid %d not in the group", pid)
		}
	}
	if pids, _ := g.Pids(); len(pids) != 2 {
		t.Errorf("group lists %v, want sh and sleep", pids)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sh ended with %v, want SIGKILL", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !procGone(sleepPid) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %d still running after Kill", sleepPid)
		}
		time.Sleep(time.Millisecond)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Destroy: %v", d, err)
		}
	}
	// Idempotent.
	if err := g.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := g.Kill(); err != nil {
		t.Errorf("Kill after Destroy: %v", err)
	}
}

// TestLiveDestroyKills: Destroy alone ends what still runs in the group.
func TestLiveDestroyKills(t *testing.T) {
	m := v1Manager(t)
	g := create(t, m, Limits{})
	cmd, release := startGated(t, g, nil, "sleep", "100")
	release()
	start := time.Now()
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Destroy of a group with a live process: %v", time.Since(start))
	if err := cmd.Wait(); err == nil {
		t.Error("sleep exited normally")
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Destroy: %v", d, err)
		}
	}
}

func python3(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}

func TestLiveOOM(t *testing.T) {
	m := v1Manager(t)
	const limit = 64 << 20
	g := create(t, m, Limits{MemoryBytes: limit})
	var out strings.Builder
	cmd, release := startGated(t, g, &out, python3(t), "-c", "b = bytearray(1 << 30); print('survived')")
	release()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("python ended with %v (output %q), want SIGKILL by the OOM killer", err, out.String())
	}
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("usage: %+v", u)
	if u.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", u.OOMKills)
	}
	if u.PeakMemoryBytes < limit*3/4 || u.PeakMemoryBytes > limit {
		t.Errorf("PeakMemoryBytes = %d, want about the limit %d", u.PeakMemoryBytes, limit)
	}
}

func TestLiveForkBomb(t *testing.T) {
	m := v1Manager(t)
	const limit = 10
	g := create(t, m, Limits{Pids: limit})
	var out strings.Builder
	cmd, release := startGated(t, g, &out, "/bin/sh", "-c", `for i in $(seq 100); do sleep 3 & done; wait`)
	release()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	peak := uint64(0)
	cur := g.ctl[ctlPids] + "/pids.current"
poll:
	for {
		select {
		case <-done:
			break poll
		default:
		}
		if n, err := readUint(cur); err == nil {
			peak = max(peak, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pids.current peak seen %d, usage %+v, shell said %q...", peak, u, firstLine(out.String()))
	if peak > limit || u.PidsPeak > limit {
		t.Errorf("pids went to %d (kernel peak %d), limit %d", peak, u.PidsPeak, limit)
	}
	if peak < limit-1 {
		t.Errorf("pids peaked at %d: the bomb never reached the limit %d", peak, limit)
	}
	if u.PidsLimitHits == 0 {
		t.Error("no fork was refused")
	}
	if !strings.Contains(out.String(), "fork") {
		t.Errorf("the shell reported no failed fork: %q", out.String())
	}
}

// TestLiveCPUQuota: a spinner under CPUs 0.5 is throttled by the kernel
// (cpu.stat's nr_throttled) and uses about half a core. On a machine busy
// with other jobs it would otherwise get less than its quota, never be
// throttled, and prove nothing about the limit; so its group and that
// group's parent get the largest CPU weight v1 has (cpu.shares 262144),
// since each competes with every busy task of its parent as one task of
// weight 1024, whatever the nice of the spinner inside (seen: 0.25 cores,
// never throttled, at a load of 10 on two cores with nice -20 alone).
func TestLiveCPUQuota(t *testing.T) {
	m := v1Manager(t)
	g := create(t, m, Limits{CPUs: 0.5})
	// The group's parent (hutch's directory of groups) competes with the
	// busy tasks of its own parent in the same way: raised too, for the
	// test (seen: 0.11 cores with the group's weight alone raised).
	for _, dir := range []string{filepath.Dir(g.ctl[ctlCPU]), g.ctl[ctlCPU]} {
		shares := filepath.Join(dir, "cpu.shares")
		old, err := os.ReadFile(shares)
		if err == nil {
			err = os.WriteFile(shares, []byte("262144"), 0o644)
		}
		if err != nil {
			t.Logf("%s: %v (the spinner may get less than its quota on a busy machine)", shares, err)
			continue
		}
		t.Cleanup(func() { os.WriteFile(shares, old, 0o644) })
	}
	cmd, release := startGated(t, g, nil, "/bin/sh", "-c", `while :; do :; done`)
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, -20); err != nil {
		t.Logf("nice -20: %v", err)
	}
	start := time.Now()
	release()
	time.Sleep(1200 * time.Millisecond)
	u, err := g.Usage()
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	used := (u.CPUUser + u.CPUSystem).Seconds() / wall.Seconds()
	stat := readTrim(t, g.ctl[ctlCPU]+"/cpu.stat")
	t.Logf("%.3f cores over %v (user %v, system %v); cpu.stat: %q", used, wall, u.CPUUser, u.CPUSystem, stat)
	if used > 0.8 {
		t.Errorf("a spinner under CPUs 0.5 used %.2f cores", used)
	}
	if strings.Contains(stat, "nr_throttled 0\n") && used < 0.45 {
		t.Errorf("the spinner got %.2f cores and was never throttled: its quota was not reached, the limit went unexercised", used)
	}
}

// TestLiveSweep plants a group owned by a dead pid (with a process in it)
// and one owned by a live process, as a crashed and a running host would
// leave them.
func TestLiveSweep(t *testing.T) {
	m := v1Manager(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "100")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	liveStart, err := procStart("/proc", live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stale := m.group(fmt.Sprintf("hutch-%d-%d-%d-1", dead.Process.Pid, m.h.start, m.h.pidns), nil, false)
	kept := m.group(fmt.Sprintf("hutch-%d-%d-%d-1", live.Process.Pid, liveStart, m.h.pidns), nil, false)
	t.Cleanup(func() { kept.Destroy(); stale.Destroy() })
	for _, g := range []*Group{stale, kept} {
		for _, d := range g.dirs {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	victim, release := startGated(t, stale, nil, "sleep", "100")
	release()

	removed, err := m.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if removed < 1 {
		t.Errorf("Sweep removed %d groups", removed)
	}
	for _, d := range stale.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("stale %s still there: %v", d, err)
		}
	}
	for _, d := range kept.dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("live owner's %s removed: %v", d, err)
		}
	}
	if err := victim.Wait(); err == nil {
		t.Error("the process in the stale group was not killed")
	}
}

func TestLiveCycles(t *testing.T) {
	m := liveManager(t)
	l := Limits{MemoryBytes: 128 << 20, Pids: 64, CPUs: 1}
	start := time.Now()
	const n = 200
	for range n {
		g, err := m.Create(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d Create+Destroy: %v each", n, time.Since(start)/n)
	for _, p := range m.dirs {
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), m.prefix) {
				t.Errorf("left behind: %s", filepath.Join(p, e.Name()))
			}
		}
	}
}

// TestNewManagerUnprivileged runs as a non-root uid (see the README of the
// package's tests: setpriv --reuid=65534): without delegation NewManager
// must say cgroups are unavailable, and why.
func TestNewManagerUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as a non-root uid")
	}
	m, err := NewManager()
	if err == nil {
		// A delegated v2 subtree (systemd Delegate=yes) is fine too.
		t.Logf("delegated: layout %v, parent %v", m.Layout(), m.dirs)
		return
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want one matching ErrUnavailable", err)
	}
	t.Logf("NewManager as uid %d: %v", os.Geteuid(), err)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestLiveJoinThread passes the group's tasks files to another process
// (as the host would to the sandbox init), which moves its locked thread in
// as the init does and starts a command from it: the command is in the group
// in every hierarchy.
func TestLiveJoinThread(t *testing.T) {
	m := v1Manager(t)
	g := create(t, m, Limits{MemoryBytes: 128 << 20, Pids: 50, CPUs: 1})
	files, err := g.OpenTasks()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJoinThreadHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "HUTCH_CGROUPS_JOIN_FDS="+strconv.Itoa(len(files)))
	cmd.ExtraFiles = files
	// In new user and cgroup namespaces, as the sandbox init is: the
	// write is checked against the opener's credentials, and v1 does not
	// confine moves to the cgroup namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	_, child, ok := strings.Cut(string(out), "child:\n")
	if !ok {
		t.Fatalf("helper said:\n%s", out)
	}
	// Paths are shown relative to the helper's cgroup namespace root,
	// e.g. "4:memory:/../../hutch/<name>".
	for _, d := range g.Dirs() {
		h := filepath.Base(filepath.Dir(filepath.Dir(d))) // /sys/fs/cgroup/<h>/hutch/<name>
		in := false
		for _, l := range strings.Split(child, "\n") {
			f := strings.SplitN(l, ":", 3)
			in = in || (len(f) == 3 && f[1] == h && strings.HasSuffix(f[2], "/"+parentName+"/"+g.Name()))
		}
		if !in {
			t.Errorf("the command is not in %s: its /proc/self/cgroup:\n%s", d, child)
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "JoinThread") {
			t.Log(l)
		}
	}
}

// TestJoinThreadHelper is the other process of TestLiveJoinThread.
func TestJoinThreadHelper(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("HUTCH_CGROUPS_JOIN_FDS"))
	if err != nil {
		t.Skip("helper process only")
	}
	runtime.LockOSThread() // never unlocked: the thread stays in the group
	fds := make([]int, n)
	for i := range fds {
		fds[i] = 3 + i
	}
	// An idle spell first, as between an agent's commands: Add's
	// cgroup.procs write would now wait for an RCU grace period.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	// What the sandbox init's C step does (nsinit's STEP_CGROUP_JOIN):
	// "0" written to each tasks file moves the writing thread.
	for _, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	out, err := exec.Command("cat", "/proc/self/cgroup").Output()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("JoinThread into %d hierarchies after 200 ms idle: %v\nchild:\n%s", n, took, out)
}

// TestLiveHoldUsage: the files HoldUsage keeps open are read afresh at
// each Usage (a pread from their start regenerates a cgroup file), so a
// held group's Usage is what opening each file says, after its processes
// changed every counter; Destroy closes them.
func TestLiveHoldUsage(t *testing.T) {
	m := liveManager(t)
	g := create(t, m, Limits{MemoryBytes: 256 << 20, Pids: 64})
	g.HoldUsage()
	if n := fdsInto(t, g); n == 0 {
		t.Fatal("HoldUsage opened none of the group's files")
	}
	before, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	// dd touches its 32 MiB buffer; the sleeps are processes more.
	cmd, release := startGated(t, g, io.Discard, "/bin/sh", "-c",
		"sleep 0.3 & sleep 0.3 & sleep 0.3 & dd if=/dev/zero of=/dev/null bs=32M count=8 2>/dev/null; wait")
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	opened, err := g.usage(&usageReader{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %+v, after %+v", before, after)
	if after != opened {
		t.Errorf("held files read %+v, opened ones %+v", after, opened)
	}
	if after.CPUUser+after.CPUSystem <= before.CPUUser+before.CPUSystem {
		t.Errorf("CPU time did not grow: %+v, then %+v", before, after)
	}
	if opened.PeakMemoryBytes > 0 && after.PeakMemoryBytes < 32<<20 {
		t.Errorf("PeakMemoryBytes = %d after dd's 32 MiB buffer", after.PeakMemoryBytes)
	}
	if after.PidsPeak < 4 && opened.PidsPeak >= 4 {
		t.Errorf("PidsPeak = %d, want the 4 processes at once", after.PidsPeak)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if n := fdsInto(t, g); n != 0 {
		t.Errorf("%d fds into the group left open after Destroy", n)
	}
}

// fdsInto counts this process's fds open on files of g's directories.
func fdsInto(t *testing.T, g *Group) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue
		}
		for _, d := range g.Dirs() {
			if strings.HasPrefix(target, d+"/") {
				n++
				break
			}
		}
	}
	return n
}
