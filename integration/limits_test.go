//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// cgroupsEnforced reports whether this host gives hutch cgroups (root
// here; a delegated v2 subtree elsewhere). Without them the default policy
// degrades to rlimits and the tests check that instead.
func cgroupsEnforced(t *testing.T, ws string) bool {
	t.Helper()
	res := runCLI(t, ws, nil, "true")
	if res.result == nil {
		t.Fatalf("no result:\n%s", res)
	}
	return slices.Contains(res.result.Layers, runtime.LayerCgroup)
}

// TestForkBombBounded: a fork bomb stays under --pids and the host keeps
// spawning processes while it rages (how fast is the machine's load's
// business, not the test's). The host counts the bomb's processes
// itself, in its own process table.
func TestForkBombBounded(t *testing.T) {
	ws := dir(t, "ws-")
	const limit = 64
	c := exec.Command(hutchBin, "run", "--workspace", ws, "--pids", fmt.Sprint(limit), "--timeout", "4s", "--",
		"sh", "-c", "b() { b | b & }; b; sleep 10")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	most, spawned := 0, 0
	var slowest time.Duration
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n := len(descendants(c.Process.Pid))
		most = max(most, n)
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Errorf("host: cannot spawn during the bomb: %v", err)
		} else {
			spawned++
		}
		slowest = max(slowest, time.Since(start))
		time.Sleep(50 * time.Millisecond)
	}
	_ = c.Wait()
	// The CLI's own tree: spawn server and init on top of the bomb.
	if most > limit+4 {
		t.Errorf("host: the bomb reached %d processes, limit %d", most, limit)
	}
	// Not a bound on how long a spawn took: under an emulated CPU beside
	// other jobs one took 1.7 s. A host the bomb starved would manage
	// none or one in the 3 s.
	if spawned < 3 {
		t.Errorf("host: only %d spawns went through in 3 s of the bomb (slowest %v)", spawned, slowest)
	}
	if left := descendants(c.Process.Pid); len(left) > 0 {
		t.Errorf("host: bomb processes left: %v", left)
	}
	t.Logf("bomb peaked at %d processes on the host; %d host spawns, the slowest %v", most, spawned, slowest)
}

// TestMemoryLimit: 1 GiB asked for under a 128 MiB limit is refused: with
// cgroups the kernel OOM-kills it and the Result says so; with the rlimit
// fallback the allocation itself fails.
func TestMemoryLimit(t *testing.T) {
	ws := dir(t, "ws-")
	res := runCLI(t, ws, []string{"--memory", "128MiB"}, "python3", "-c", "b = bytearray(1 << 30); print('ALLOCATED')")
	if strings.Contains(res.stdout, "ALLOCATED") || res.code == 0 {
		t.Fatalf("1 GiB allocated under a 128 MiB limit:\n%s", res)
	}
	if res.result == nil {
		t.Fatalf("no result:\n%s", res)
	}
	if slices.Contains(res.result.Layers, runtime.LayerCgroup) {
		u := res.result.Usage
		if u == nil || u.OOMKills == 0 || res.result.Signal != syscall.SIGKILL {
			t.Errorf("not reported as an OOM kill: %+v", res.result)
		}
		if res.result.Reason != "memory limit of 128 MiB exceeded (OOM kill)" {
			t.Errorf("reason %q", res.result.Reason)
		}
		if !strings.Contains(res.stderr, "OOM kill") {
			t.Errorf("the CLI does not say OOM kill:\n%s", res)
		}
		if u != nil && u.PeakMemoryBytes > 130<<20 {
			t.Errorf("peak memory %d over the limit", u.PeakMemoryBytes)
		}
	} else if !slices.ContainsFunc(res.result.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerCgroup }) {
		t.Errorf("neither a cgroup nor a reported fallback: %+v", res.result)
	}
}

// TestSharedMemoryBoundOrReported: 256 MiB of shared memory (a memfd,
// filled with write(2), so the process's own heap stays small) under a 64
// MiB limit. With cgroups the shared pages are charged to the command's
// group and the kernel OOM-kills it; without (the rlimit fallback, whose
// RLIMIT_DATA does not count shared memory) the Result must say that memory
// is not bounded there, never claim a limit that does not hold.
func TestSharedMemoryBoundOrReported(t *testing.T) {
	ws := dir(t, "ws-")
	hog := "import os\nfd = os.memfd_create('hog')\nchunk = b'x' * (1 << 20)\nfor _ in range(256):\n    os.write(fd, chunk)\nopen('filled', 'w').write('256')\n"
	res := runCLI(t, ws, []string{"--memory", "64MiB"}, "python3", "-c", hog)
	if res.result == nil {
		t.Fatalf("no result:\n%s", res)
	}
	_, err := os.Stat(filepath.Join(ws, "filled"))
	filled := err == nil
	if slices.Contains(res.result.Layers, runtime.LayerCgroup) {
		if filled || res.result.Reason != "memory limit of 64 MiB exceeded (OOM kill)" {
			t.Errorf("with cgroups, 256 MiB of shared memory under 64 MiB: filled=%v reason=%q\n%s", filled, res.result.Reason, res)
		}
		return
	}
	if !slices.ContainsFunc(res.result.Unenforced, func(s string) bool { return strings.HasPrefix(s, "memory:") && strings.Contains(s, "shared memory") }) {
		t.Errorf("rlimit fallback (shared memory filled: %v) and no word of it in Unenforced: %q", filled, res.result.Unenforced)
	}
}

// TestCPULimit: a spinner under --cpus 0.5 runs in a group whose quota,
// read from the host while it spins, is half a core, and gets at most
// about that by the cgroup's own CPU accounting. No lower bound on what it
// gets: on a host loaded by another job a spinner may get less than its
// quota, and the quota itself is what the host reads.
func TestCPULimit(t *testing.T) {
	ws := dir(t, "ws-")
	if !cgroupsEnforced(t, ws) {
		t.Skip("no cgroups for this user here: CPU rate limits need them (the Result reports the fallback)")
	}
	arg := uniqueSleep()
	quota := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		var got string
		waitFor(time.Minute, func() bool {
			select {
			case <-ended:
				return true
			default:
			}
			for _, pid := range procsWithArg(arg) {
				if got = cpuQuota(hutchGroups(pid)); got != "" {
					return true
				}
			}
			return false
		})
		quota <- got
	}()
	res := runCLI(t, ws, []string{"--cpus", "0.5"}, "sh", "-c", "timeout 2 sh -c 'while :; do :; done' "+arg+"; true")
	close(ended)
	if q := <-quota; q != "50000 100000" {
		t.Errorf("the spinner's group, read from the host: quota and period %q, want \"50000 100000\"", q)
	}
	if res.result == nil || res.result.Usage == nil {
		t.Fatalf("no usage:\n%s", res)
	}
	cpu := res.result.Usage.CPUUser + res.result.Usage.CPUSystem
	share := cpu.Seconds() / res.result.Wall.Seconds()
	t.Logf("%v of CPU in %v: %.2f cores", cpu, res.result.Wall, share)
	if share > 0.8 {
		t.Errorf("a 0.5-core limit gave %.2f cores", share)
	}
}

// cpuQuota returns the CPU quota and period ("quota period", in µs) of the
// first of the host's group directories that has a CPU controller: its v2
// cpu.max, or its v1 cpu.cfs_quota_us and cpu.cfs_period_us. "" if none.
func cpuQuota(dirs []string) string {
	for _, d := range dirs {
		if b, err := os.ReadFile(d + "/cpu.max"); err == nil {
			return strings.TrimSpace(string(b))
		}
		q, err1 := os.ReadFile(d + "/cpu.cfs_quota_us")
		p, err2 := os.ReadFile(d + "/cpu.cfs_period_us")
		if err1 == nil && err2 == nil {
			return strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
		}
	}
	return ""
}

// TestTmpCap: dd into /tmp stops at --tmp-size. The host measures the file
// through the command's /proc/<pid>/root while the command still runs.
func TestTmpCap(t *testing.T) {
	ws := dir(t, "ws-")
	arg := uniqueSleep()
	c := exec.Command(hutchBin, "run", "--workspace", ws, "--tmp-size", "8MiB", "--timeout", "20s", "--",
		"sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null; exec sleep "+arg)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	var pids []int
	if !waitFor(10*time.Second, func() bool { pids = procsWithArg(arg); return len(pids) == 1 }) {
		t.Fatalf("sleep never appeared")
	}
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/root/tmp/fill", pids[0]))
	if err != nil {
		t.Fatalf("host: %v", err)
	}
	if fi.Size() > 8<<20 || fi.Size() == 0 {
		t.Errorf("host: /tmp/fill is %d bytes under an 8 MiB cap", fi.Size())
	}
}

// TestNoCgroupsLeft: over 200 runs the groups of ended commands do not
// pile up (each goes in the background once its Wait returns), and once
// the Sandbox is closed no group of this process remains in any hierarchy.
func TestNoCgroupsLeft(t *testing.T) {
	ws := dir(t, "ws-")
	if !cgroupsEnforced(t, ws) {
		t.Skip("no cgroups for this user here")
	}
	sb := newSandbox(t, ws)
	defer sb.Close()
	ours := fmt.Sprintf("hutch-%d-", os.Getpid())
	most := 0
	for range 200 {
		if err := sb.Command(context.Background(), "true").Run(); err != nil {
			t.Fatal(err)
		}
		most = max(most, len(ourGroups(ours)))
	}
	// A group per hierarchy for each command still ending, and the
	// Sandbox's own probe: not one per command run.
	if most > 40 {
		t.Errorf("host: up to %d groups of ended commands at once over 200 runs", most)
	}
	sb.Close()
	if left := ourGroups(ours); len(left) > 0 {
		t.Errorf("host: %d groups left after Close returned, e.g. %s", len(left), left[0])
	}
}

// ourGroups lists cgroup directories whose name starts with prefix.
func ourGroups(prefix string) []string {
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/hutch/*", "/sys/fs/cgroup/hutch/*", "/sys/fs/cgroup/*/*/hutch/*"} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if strings.HasPrefix(filepath.Base(d), prefix) {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestStaleCgroupSwept: a group left by a crashed host (its owner pid is
// gone) is removed by New.
func TestStaleCgroupSwept(t *testing.T) {
	ws := dir(t, "ws-")
	if !cgroupsEnforced(t, ws) {
		t.Skip("no cgroups for this user here")
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		t.Fatal(err)
	}
	// A pid that ran and is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("hutch-%d-1-%d-1", dead.Process.Pid, st.Ino)
	var planted []string
	for _, parent := range []string{"/sys/fs/cgroup/pids/hutch", "/sys/fs/cgroup/memory/hutch", "/sys/fs/cgroup/hutch"} {
		if _, err := os.Stat(parent); err != nil {
			continue
		}
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, d)
	}
	if len(planted) == 0 {
		t.Skip("no hutch cgroup parent found")
	}
	t.Cleanup(func() {
		for _, d := range planted {
			os.Remove(d)
		}
	})
	if _, err := runtime.New(runtime.DefaultPolicy(ws)); err != nil {
		t.Fatal(err)
	}
	for _, d := range planted {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("host: stale group %s survived New", d)
		}
	}
}

// TestCgroupsRequired: where cgroups are unavailable, a policy with limits
// that does not allow degrading is refused by New, naming the layer, and
// nothing is started.
func TestCgroupsRequired(t *testing.T) {
	ws := dir(t, "ws-")
	if cgroupsEnforced(t, ws) {
		t.Skip("cgroups are available to this user: nothing to refuse")
	}
	before := spawn.Default().Spawned()
	p := runtime.DefaultPolicy(ws)
	p.AllowDegraded = nil
	_, err := runtime.New(p)
	var le *runtime.LayerError
	if !errors.As(err, &le) || le.Layer != runtime.LayerCgroup {
		t.Fatalf("want a cgroup LayerError, got %v", err)
	}
	if after := spawn.Default().Spawned(); after != before {
		t.Errorf("%d inits started for a refused policy", after-before)
	}
	// The degraded default names the fallback in its Result.
	res := runCLI(t, ws, nil, "true")
	if res.result == nil || !slices.ContainsFunc(res.result.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerCgroup }) ||
		!slices.Contains(res.result.Layers, runtime.LayerRlimits) {
		t.Errorf("the fallback is not reported: %+v", res.result)
	}
}

// TestDegradeSaidOnce: as an unprivileged user (the suite's own uid, or
// 65534 when it runs as root) the default policy's limits degrade to
// rlimits wherever cgroups are not delegated; the Result reports it, and
// with --verbose hutch says so on stderr exactly once (without, the
// command's stderr is its own: TestNoticesNotInStderr); with cgroups it
// says nothing.
func TestDegradeSaidOnce(t *testing.T) {
	for _, verbose := range []bool{true, false} {
		degradeSaid(t, verbose)
	}
}

func degradeSaid(t *testing.T, verbose bool) {
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	out := dir(t, "out-")
	must(os.Chmod(out, 0o777))
	rj := filepath.Join(out, "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"run", "--workspace", ws, "--result-json", rj}
	if verbose {
		args = append(args, "--verbose")
	}
	c := exec.CommandContext(ctx, hutchBin, append(args, "--", "true")...)
	if os.Getuid() == 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("hutch run true: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(rj)
	must(err)
	var res runtime.Result
	must(json.Unmarshal(b, &res))
	degraded := slices.ContainsFunc(res.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerCgroup })
	want := 0
	if degraded && verbose {
		want = 1
	}
	n := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "rlimit") {
			n++
		}
	}
	if n != want {
		t.Errorf("cgroup degraded %v, --verbose %v: %d lines of stderr say rlimits, want %d:\n%s", degraded, verbose, n, want, stderr.String())
	}
	if degraded && len(res.Unenforced) == 0 {
		t.Errorf("cgroup degraded, but the Result says nothing is unenforced: %+v", res)
	}
	if degraded && verbose && !strings.Contains(stderr.String(), "hutch: no cgroups here, limits are per-process rlimits") {
		t.Errorf("stderr does not say the limits degraded:\n%s", stderr.String())
	}
}

// TestStaleCgroupOfEndedPidNSSwept (issue 41): a group left by a host that
// was killed in a pid namespace of its own, which ended with it, is swept
// by the next New (from the initial pid namespace); one of a host whose
// pid namespace still has a process is left alone.
func TestStaleCgroupOfEndedPidNSSwept(t *testing.T) {
	ws := dir(t, "ws-")
	if !cgroupsEnforced(t, ws) {
		t.Skip("no cgroups for this user here")
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &self); err != nil || self.Ino != 0xEFFFFFFC {
		t.Skip("not in the initial pid namespace: another one's groups are left alone from here")
	}
	// inNewPidNS starts sleep as pid 1 of a pid namespace of its own and
	// returns it with that namespace's inode.
	inNewPidNS := func(arg string) (*exec.Cmd, uint64) {
		c := exec.Command("sleep", arg)
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
		if err := c.Start(); err != nil {
			t.Skipf("a pid namespace: %v", err)
		}
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", c.Process.Pid), &st); err != nil {
			t.Fatal(err)
		}
		return c, st.Ino
	}
	// The live one first: a namespace's inode is reused once it ends,
	// and the ended one's must not be the live one's.
	live, liveNS := inNewPidNS("300")
	defer func() { live.Process.Kill(); live.Wait() }()
	ended, endedNS := inNewPidNS("0.01")
	ended.Wait() // its namespace ends with it
	var planted, kept []string
	for _, parent := range []string{"/sys/fs/cgroup/pids/hutch", "/sys/fs/cgroup/memory/hutch", "/sys/fs/cgroup/hutch"} {
		if _, err := os.Stat(parent); err != nil {
			continue
		}
		for _, g := range []struct {
			ns   uint64
			list *[]string
		}{{endedNS, &planted}, {liveNS, &kept}} {
			d := filepath.Join(parent, fmt.Sprintf("hutch-1-1-%d-1", g.ns))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			*g.list = append(*g.list, d)
		}
	}
	if len(planted) == 0 {
		t.Skip("no hutch cgroup parent found")
	}
	t.Cleanup(func() {
		for _, d := range append(planted, kept...) {
			os.Remove(d)
		}
	})
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	for _, d := range planted {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("host: the group of a host whose pid namespace ended, %s, survived New", d)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("host: the group of a live pid namespace's host, %s, was swept", d)
		}
	}
}

// TestRlimitsBeforeExec: where the memory limit is the rlimit fallback
// (no cgroups for this user), every process of the command holds it, the
// ones the command forks at once included: judged on the host from each
// process's /proc/PID/limits. The limit was set on the command's process
// after its exec, and a command that forked first (a static busybox's
// shell forks within microseconds) left children without it, about one
// run in two.
func TestRlimitsBeforeExec(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox-static is not installed")
	}
	ws := dir(t, "ws-")
	for round := range 8 {
		arg := uniqueSleep()
		c := exec.Command(hutchBin, "run", "--workspace", ws, "--memory", "64MiB", "--timeout", "5m", "--result-json", filepath.Join(ws, "r.json"),
			"--", bb, "sh", "-c", bb+" sleep "+arg+" & "+bb+" sleep "+arg+" & wait")
		must(c.Start())
		var pids []int
		ok := waitFor(2*time.Minute, func() bool { pids = procsWithArg(arg); return len(pids) == 2 })
		limits := map[int]string{}
		for _, pid := range pids {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "Max data size") {
					limits[pid] = strings.Join(strings.Fields(l)[3:5], " ")
				}
			}
		}
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
		var res runtime.Result
		if b, err := os.ReadFile(filepath.Join(ws, "r.json")); err == nil {
			must(json.Unmarshal(b, &res))
		}
		if slices.Contains(res.Layers, runtime.LayerCgroup) {
			t.Skip("cgroups hold the memory limit for this user: no rlimit to judge")
		}
		if !ok {
			t.Fatalf("round %d: the command's two sleeps never ran", round)
		}
		for pid, l := range limits {
			if l != "67108864 67108864" {
				t.Errorf("round %d: a process the command forked (pid %d) holds a data limit of %q, not 64 MiB", round, pid, l)
			}
		}
	}
}
