//go:build linux

package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/spawn"
)

// TestKillLandsDuringSetup: a timeout or a cancel that lands while the
// sandbox is being set up (held there by a hook until the kill has taken
// effect, so the landing point is certain) is reported as such: an
// *ExitError matching the kill's error, with a Result saying killed.
func TestKillLandsDuringSetup(t *testing.T) {
	timed, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	timed.policy.Timeout = time.Millisecond
	plain, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { testHookStart = nil }()
	for _, stage := range []string{"init", "send"} {
		for _, kind := range []string{"timeout", "cancel"} {
			t.Run(stage+"/"+kind, func(t *testing.T) {
				sb, want, reason := timed, error(ErrTimeout), KilledTimeout
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if kind == "cancel" {
					sb, want, reason = plain, context.Canceled, KilledCanceled
				}
				testHookStart = func(s string, c *Cmd) {
					if s != stage {
						return
					}
					if kind == "cancel" {
						cancel()
					}
					// Hold Start until the kill happened, and the init
					// (if there is one yet) is dead.
					for {
						c.mu.Lock()
						killed, in := c.killed, c.in
						c.mu.Unlock()
						if killed {
							if in != nil {
								<-in.proc.Done()
							}
							return
						}
						time.Sleep(time.Millisecond)
					}
				}
				c := sb.Command(ctx, "sleep", "60")
				err := c.Start()
				testHookStart = nil
				var ee *ExitError
				if !errors.As(err, &ee) || !errors.Is(err, want) {
					t.Fatalf("Start: %v (%T), want an *ExitError matching %v", err, err, want)
				}
				r := c.Result
				if r == nil || ee.Result != r || !r.Killed || r.KillReason != reason || r.Signal != syscall.SIGKILL || r.Error != "" {
					t.Errorf("Result = %+v, want killed for %q", r, reason)
				}
				if c.in != nil && alive(c.in.proc.Pid) {
					t.Errorf("host: init %d alive after Start returned", c.in.proc.Pid)
				}
			})
		}
	}
}

// alive reports whether pid runs on the host: it exists and is not a
// zombie (an init whose spawn server died is reaped by whatever adopts it,
// at its own pace).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// hutchGroups returns the host's cgroup directories of hutch's groups
// holding pid, read from /proc/<pid>/cgroup on the host: one per v1
// hierarchy, or the v2 one.
func hutchGroups(t *testing.T, pid int) []string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/hutch-") {
			continue
		}
		mnt := "/sys/fs/cgroup"
		switch {
		case parts[1] == "":
			if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
				mnt = "/sys/fs/cgroup/unified"
			}
		default:
			// v1: mounted at the first controller's name (cpu,cpuacct
			// has links under both names).
			mnt += "/" + strings.TrimPrefix(strings.Split(parts[1], ",")[0], "name=")
		}
		dirs = append(dirs, mnt+parts[2])
	}
	return dirs
}

// TestWaitRemovesCgroup: once Wait returns, the command's cgroup is on
// its way out without anything else of hutch's to call (it goes in the
// background, off the caller's path), once Close returns it is gone from
// every hierarchy on the host, and so are the pooled inits' groups.
func TestWaitRemovesCgroup(t *testing.T) {
	sb := pooledSandbox(t, 2)
	if sb.cgroups == nil {
		t.Skip("no cgroups for this user here")
	}
	// The last command's teardown is slow: Close must wait for it.
	slow := make(chan struct{}, 1)
	testHookEnding = func() {
		select {
		case <-slow:
			time.Sleep(300 * time.Millisecond)
		default:
		}
	}
	defer func() { testHookEnding = nil }()
	var ended []string
	for i := range 4 {
		inR, inW := io.Pipe()
		c := sb.Command(context.Background(), "cat")
		c.Stdin = inR
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		dirs := hutchGroups(t, c.in.proc.Pid)
		if len(dirs) == 0 {
			t.Fatalf("host: init %d is in no hutch cgroup", c.in.proc.Pid)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("host: the command's group: %v", err)
			}
		}
		inW.Close()
		if i == 3 {
			slow <- struct{}{}
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			// Gone by itself, without Close.
			deadline := time.Now().Add(10 * time.Second)
			for _, d := range dirs {
				for _, err := os.Stat(d); err == nil; _, err = os.Stat(d) {
					if time.Now().After(deadline) {
						t.Fatalf("host: %s still there 10s after Wait", d)
					}
					time.Sleep(time.Millisecond)
				}
			}
		} else {
			ended = append(ended, dirs...)
		}
	}
	waitPool(t, sb, 2)
	sb.pool.mu.Lock()
	var dirs []string
	for _, in := range sb.pool.ready {
		dirs = append(dirs, hutchGroups(t, in.proc.Pid)...)
	}
	sb.pool.mu.Unlock()
	if len(dirs) == 0 {
		t.Fatal("host: pooled inits in no hutch cgroup")
	}
	sb.Close()
	for _, d := range append(dirs, ended...) {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("host: %s still there after Close", d)
		}
	}
}

// TestSandboxDeathReported: when the command's init is killed from
// outside hutch, or the spawn server that made it dies, the Result says
// the sandbox died and how (not a plain SIGKILL nobody sent), and Wait's
// error matches ErrSandboxDied. The kills are real, from the host.
func TestSandboxDeathReported(t *testing.T) {
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	tests := []struct {
		name   string
		victim func(c *Cmd) int
		is     error
		reason string
	}{
		{"init killed", func(c *Cmd) int { return c.in.proc.Pid }, nil, "killed by SIGKILL from outside hutch"},
		{"spawn server killed", func(*Cmd) int { return spawn.Default().ServerPid() }, spawn.ErrServerDied, "server died"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sb.Command(context.Background(), "sleep", "60")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(tt.victim(c), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := c.Wait()
			var ee *ExitError
			if !errors.As(err, &ee) || !errors.Is(err, ErrSandboxDied) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Wait: %v (%T), want an *ExitError matching ErrSandboxDied", err, err)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait: %v matches a context error", err)
			}
			r := c.Result
			if !r.Killed || r.KillReason != KilledSandboxDied || r.Signal != syscall.SIGKILL || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("Result = %+v, want killed: %q saying %q", r, KilledSandboxDied, tt.reason)
			}
			if alive(c.in.proc.Pid) {
				t.Errorf("host: init %d alive after Wait", c.in.proc.Pid)
			}
		})
	}

	// A command that kills itself is not a sandbox death.
	c := sb.Command(context.Background(), "sh", "-c", "kill -KILL $$")
	err = c.Run()
	if errors.Is(err, ErrSandboxDied) || c.Result.Killed || c.Result.Signal != syscall.SIGKILL {
		t.Errorf("self-killed command: %v, %+v", err, c.Result)
	}
}

// TestPoolDropsDeadInit: a pooled init killed from the host while it waits
// is no longer counted by Prewarmed nor handed out; the next command runs
// in a live init.
func TestPoolDropsDeadInit(t *testing.T) {
	sb := pooledSandbox(t, 1)
	sb.pool.mu.Lock()
	victim := sb.pool.ready[0]
	sb.pool.mu.Unlock()
	if err := syscall.Kill(victim.proc.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.proc.Done()
	pooled := func() bool {
		sb.pool.mu.Lock()
		defer sb.pool.mu.Unlock()
		for _, in := range sb.pool.ready {
			if in == victim {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for pooled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if pooled() {
		t.Error("the dead init stays in the pool")
	}
	if n := sb.Prewarmed(); n > 1 {
		t.Errorf("Prewarmed() = %d, pool of 1", n)
	}
	c := sb.Command(context.Background(), "true")
	if err := c.Run(); err != nil {
		t.Fatalf("after a pooled init's death: %v", err)
	}
	if c.in == victim || c.in.proc.Pid == victim.proc.Pid {
		t.Error("the command was handed the dead init")
	}
}

// TestLimitsUnenforced: every limit asked for that does not hold is listed:
// what the rlimit fallback cannot bound, and with cgroups what the
// command's group could not enforce.
func TestLimitsUnenforced(t *testing.T) {
	swap := "swap: the kernel does not account swap (no memory.swap.max)"
	tests := []struct {
		name    string
		policy  Policy
		cgroups bool
		group   []string
		want    []string // prefixes of the lines, in order
	}{
		{"fallback, all", Policy{Memory: 1 << 30, Pids: 64, CPUs: 1}, false, nil, []string{"memory:", "pids:", "cpus:"}},
		{"fallback, cpus", Policy{CPUs: 0.5}, false, nil, []string{"cpus:"}},
		{"fallback, none asked", Policy{}, false, nil, nil},
		{"cgroups, all held", Policy{Memory: 1 << 30, Pids: 64, CPUs: 1}, true, nil, nil},
		{"cgroups, swap not held", Policy{Memory: 1 << 30}, true, []string{swap}, []string{swap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := &Sandbox{policy: tt.policy, machine: machine{uid: 1000}}
			if tt.cgroups {
				m, err := cgroupManager()
				if err != nil {
					t.Skipf("no cgroups here: %v", err)
				}
				sb.cgroups = m
			}
			got := sb.limitsUnenforced(tt.group)
			if len(got) != len(tt.want) {
				t.Fatalf("limitsUnenforced = %q, want lines starting %q", got, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("line %d = %q, want %q...", i, got[i], w)
				}
			}
		})
	}

	// A Result of this host lists what its Sandbox's groups cannot hold.
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	sb.cgroupUnenforced = []string{swap}
	c := sb.Command(context.Background(), "hutch-no-such-command")
	if err := c.Run(); err == nil || c.Result == nil {
		t.Fatalf("Run: %v, Result %+v", err, c.Result)
	}
	if sb.cgroups != nil && !slices.Contains(c.Result.Unenforced, swap) {
		t.Errorf("Unenforced = %q, want %q", c.Result.Unenforced, swap)
	}
}

// goroutinesIn counts this process's goroutines whose stack has fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestHandoffServedForTheSandboxLife: the unix wall's notifications are
// answered in the host (the init hands its listener over), by one
// goroutine per running sandbox, and nothing of it is left once the
// commands are gone: no goroutine, no thread parked on a dead filter.
func TestHandoffServedForTheSandboxLife(t *testing.T) {
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.unixWall == nil {
		t.Skip("Landlock guards unix sockets here: no wall to hand over")
	}
	const wall = "netns.(*UnixWall).serve"
	// Earlier tests' sandboxes may still be winding down.
	deadline := time.Now().Add(10 * time.Second)
	for goroutinesIn(wall) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := goroutinesIn(wall)
	c := sb.Command(context.Background(), "sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for goroutinesIn(wall) != before+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := goroutinesIn(wall); n != before+1 {
		t.Errorf("%d wall goroutines while one sandbox runs, want %d", n, before+1)
	}
	_ = c.Signal(syscall.SIGKILL)
	_ = c.Wait()
	for range 5 {
		if err := sb.Command(context.Background(), "true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for (goroutinesIn(wall) != before || goroutinesIn("serveHandoff") != 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, h := goroutinesIn(wall), goroutinesIn("serveHandoff"); n != before || h != 0 {
		t.Errorf("after the commands: %d wall goroutines (want %d) and %d handoff readers (want 0)", n, before, h)
	}
}

// TestStopRightAfterSend: a Stop that lands once the command was handed
// to its init, before Start heard that it started (a caller's ^C just as
// the command starts), reaches the command: it ends by the signal, as
// stopped, instead of the signal being refused or the run cancelled.
func TestStopRightAfterSend(t *testing.T) {
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer func() { testHookStart = nil }()
	var stopErr error
	testHookStart = func(stage string, c *Cmd) {
		if stage == "sent" {
			stopErr = c.Stop(syscall.SIGTERM)
		}
	}
	c := sb.Command(context.Background(), "sleep", "60")
	c.WaitDelay = 30 * time.Second // a SIGKILL would not say the SIGTERM arrived
	start := time.Now()
	err = c.Run()
	testHookStart = nil
	if stopErr != nil {
		t.Fatalf("Stop after the command was sent: %v", stopErr)
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run: %v", err)
	}
	if r := c.Result; r.Signal != syscall.SIGTERM || !r.Killed || r.KillReason != KilledStopped {
		t.Errorf("Result: signal %v, killed %v, reason %q; want SIGTERM, killed, %q", r.Signal, r.Killed, r.KillReason, KilledStopped)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the command ran %v: the signal did not reach it", d)
	}
}

// TestPlanFailsAfterClone: the init is cloned while its plan is made; a
// plan that then fails ends that init (the host sees it gone when Start
// returns) and removes its cgroup, and Start returns the plan's error.
func TestPlanFailsAfterClone(t *testing.T) {
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The spawn server up, and the command that started it over, its
	// teardown included (Close waits for it).
	warm, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Command(context.Background(), "true").Run(); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	before := serverChildPids(t)
	// This process's groups live at the plan: on v1 the init joins its
	// group only later, so they are found by name, next to a probe's.
	var parents []string
	var prefix string
	if sb.cgroups != nil {
		g, err := sb.cgroups.Create(sb.limits)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range g.Dirs() {
			parents = append(parents, filepath.Dir(d))
		}
		prefix = strings.TrimRight(g.Name(), "0123456789")
		if err := g.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	ownGroups := func() []string {
		var dirs []string
		for _, p := range parents {
			ents, _ := os.ReadDir(p)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), prefix) {
					dirs = append(dirs, filepath.Join(p, e.Name()))
				}
			}
		}
		return dirs
	}
	errPlan := errors.New("plan refused by the test")
	var initPid int
	var groups []string
	defer func(f func(*Sandbox, fresh, nsinit.Config) (*nsinit.Plan, *os.File, error)) { planInit = f }(planInit)
	planInit = func(*Sandbox, fresh, nsinit.Config) (*nsinit.Plan, *os.File, error) {
		// The clone runs beside the plan: wait for its init.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, pid := range serverChildPids(t) {
				if !slices.Contains(before, pid) {
					initPid = pid
				}
			}
			if initPid != 0 {
				groups = ownGroups()
				break
			}
		}
		return nil, nil, errPlan
	}
	err = sb.Command(context.Background(), "true").Start()
	if !errors.Is(err, errPlan) {
		t.Fatalf("Start: %v, want the plan's error", err)
	}
	if initPid == 0 {
		t.Fatal("host: no init was cloned while the plan was made")
	}
	if alive(initPid) {
		t.Errorf("host: init %d still alive after Start failed", initPid)
	}
	if sb.cgroups != nil && len(groups) == 0 {
		t.Errorf("host: no group of this process's while the plan was made")
	}
	for _, d := range groups {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("host: %s still there after Start failed", d)
		}
	}
}

// TestProbeGroupKept: the group New makes to prove the limits can be
// applied is the first command's, not one made and removed for nothing,
// and a Sandbox closed before any command removes it. Seen on the host's
// cgroup filesystems.
func TestProbeGroupKept(t *testing.T) {
	for _, run := range []bool{true, false} {
		sb, err := New(DefaultPolicy(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if sb.cgroups == nil {
			t.Skip("no cgroups for this user here")
		}
		probe := sb.probeGroup.Load()
		if probe == nil {
			t.Fatal("no probe group kept after New")
		}
		dirs := slices.Sorted(slices.Values(probe.Dirs()))
		for _, d := range dirs {
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("host: the probe group: %v", err)
			}
		}
		if run {
			inR, inW := io.Pipe()
			c := sb.Command(context.Background(), "cat")
			c.Stdin = inR
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(slices.Values(hutchGroups(t, c.in.proc.Pid))); !slices.Equal(got, dirs) {
				t.Errorf("host: the first init is in %q, want the probe group's %q", got, dirs)
			}
			inW.Close()
			if err := c.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("host: %s still there after Close (a command ran: %v)", d, run)
			}
		}
	}
}
