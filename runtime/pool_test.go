//go:build linux

package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchbox/hutch/spawn"
)

// pooledSandbox returns a Sandbox of the default policy (mod applied)
// keeping n inits, once its pool is full; the test's end closes it.
func pooledSandbox(t *testing.T, n int, mod ...func(*Policy)) *Sandbox {
	t.Helper()
	p := DefaultPolicy(t.TempDir())
	p.Prewarm = n
	for _, f := range mod {
		f(&p)
	}
	sb, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	waitPool(t, sb, n)
	return sb
}

// waitPool waits until the pool holds n ready inits.
func waitPool(t *testing.T, sb *Sandbox, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sb.pool.mu.Lock()
		k := len(sb.pool.ready)
		sb.pool.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pool never filled to %d", n)
}

// TestPoolHandsOutEachInitOnce: across sequential and concurrent commands,
// no init process serves two commands, and the pool is really used.
func TestPoolHandsOutEachInitOnce(t *testing.T) {
	p := DefaultPolicy(t.TempDir())
	p.Prewarm = 3
	sb, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var mu sync.Mutex
	seen := map[int]int{}
	pooled := 0
	run := func() {
		c := sb.Command(context.Background(), "true")
		if err := c.Run(); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		seen[c.in.proc.Pid]++
		if c.in.pooled {
			pooled++
		}
		mu.Unlock()
	}
	waitPool(t, sb, 3)
	for range 10 {
		run()
		waitPool(t, sb, 1)
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	for pid, n := range seen {
		if n != 1 {
			t.Errorf("init %d served %d commands", pid, n)
		}
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct inits for 40 commands", len(seen))
	}
	if pooled < 10 {
		t.Errorf("only %d of 40 commands used a pooled init", pooled)
	}
}

// TestPoolSeesItsOwnPolicy: two prewarmed Sandboxes with different
// writable paths; each pooled command can write exactly its own, as the
// host sees it.
func TestPoolSeesItsOwnPolicy(t *testing.T) {
	ws := t.TempDir()
	a, b := filepath.Join(ws, "a"), filepath.Join(ws, "b")
	outside := t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(writable string) *Sandbox {
		return pooledSandbox(t, 2, func(p *Policy) {
			p.Workspace = outside // another dir than the writable one
			p.Writable = []string{writable}
		})
	}
	sa, sbb := mk(a), mk(b)
	for _, c := range []struct {
		sb   *Sandbox
		name string
	}{{sa, "from-a"}, {sbb, "from-b"}} {
		cmd := c.sb.Command(context.Background(), "sh", "-c", "touch "+a+"/"+c.name+" "+b+"/"+c.name+" 2>/dev/null; true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		if !cmd.in.pooled {
			t.Errorf("%s: not a pooled init", c.name)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if !exists(a+"/from-a") || exists(b+"/from-a") {
		t.Errorf("sandbox a: a/from-a %v, b/from-a %v; want only the first", exists(a+"/from-a"), exists(b+"/from-a"))
	}
	if !exists(b+"/from-b") || exists(a+"/from-b") {
		t.Errorf("sandbox b: b/from-b %v, a/from-b %v; want only the first", exists(b+"/from-b"), exists(a+"/from-b"))
	}
}

// TestPoolStaleInitNotUsed: a .env file created in the workspace after
// the pool filled makes the pooled inits stale; the command gets a view
// with the new file masked.
func TestPoolStaleInitNotUsed(t *testing.T) {
	sb := pooledSandbox(t, 2)
	const secret = "POOL-STALE-SECRET-55"
	if err := os.WriteFile(filepath.Join(sb.Policy().Workspace, ".env"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	c := sb.Command(context.Background(), "cat", ".env")
	out, _ := c.CombinedOutput()
	if strings.Contains(string(out), secret) {
		t.Fatalf("a stale pooled init exposed the new .env: %q", out)
	}
	if c.in.pooled {
		t.Errorf("a stale pooled init was used")
	}
}

// TestPoolCloseKillsInits: Close ends every pooled init (host view).
func TestPoolCloseKillsInits(t *testing.T) {
	sb := pooledSandbox(t, 3)
	sb.pool.mu.Lock()
	var pids []int
	for _, in := range sb.pool.ready {
		pids = append(pids, in.proc.Pid)
	}
	sb.pool.mu.Unlock()
	sb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pooled init %d alive after Close", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// serverChildren counts the spawn server's children on the host: the
// sandbox inits alive, pooled or running a command.
func serverChildren(t *testing.T) int {
	t.Helper()
	return len(serverChildPids(t))
}

// serverChildPids lists the spawn server's inits on the host: its
// children named hutch-init, not the spare it keeps cloned ahead
// (hutch-spare).
func serverChildPids(t *testing.T) []int {
	t.Helper()
	pid := spawn.Default().ServerPid()
	if pid == 0 {
		t.Fatal("no spawn server")
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile("/proc/" + s + "/comm")
			if p, err := strconv.Atoi(s); err == nil && strings.TrimSpace(string(comm)) == "hutch-init" {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// TestPoolRefillsAfterTheCommand: a pooled command does not have a new
// init built beside it while it runs (the host sees no new process in
// the spawn server while the command runs), the pool refills once it has
// ended, and a command issued right after it waits for that refill
// instead of building a second init cold (Result.Prewarmed).
func TestPoolRefillsAfterTheCommand(t *testing.T) {
	defer func(d time.Duration) { refillAfter = d }(refillAfter)
	refillAfter = time.Hour // only the command's end refills here
	sb := pooledSandbox(t, 1)
	before := serverChildren(t)

	stdin, w := io.Pipe()
	c := sb.Command(context.Background(), "cat")
	c.Stdin = stdin
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := serverChildren(t); n != before {
		t.Errorf("host: %d sandbox inits while the pooled command runs, want %d (none built beside it)", n, before)
	}
	w.Close()
	if err := c.Wait(); err != nil || !c.Result.Prewarmed {
		t.Fatalf("pooled command: %v, %+v", err, c.Result)
	}

	// The refill started at Wait; the next command takes it, built or not.
	c = sb.Command(context.Background(), "true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !c.Result.Prewarmed {
		t.Error("a command right after another was started cold beside the refill, not from it")
	}
	waitPool(t, sb, 1)
}

// TestPoolGrowsWithBursts: a command right after another, which finds no
// init ready, has the pool keep one more (the host sees two inits waiting
// once the commands have ended, with Prewarm 1), up to twice Prewarm, and
// then both commands of a burst start from the pool; once no command has
// found the pool short for poolShrinkAfter, the extra init ends by itself,
// with no command to prompt it (the host sees one again).
func TestPoolGrowsWithBursts(t *testing.T) {
	defer func(d time.Duration) { poolShrinkAfter = d }(poolShrinkAfter)
	poolShrinkAfter = time.Hour
	sb := pooledSandbox(t, 1)
	base := serverChildren(t) // the pooled one, and other tests' none
	run := func() *Result {
		c := sb.Command(context.Background(), "true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		return c.Result
	}
	waitHost := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for serverChildren(t) != want {
			if time.Now().After(deadline) {
				t.Fatalf("host: %d sandbox inits waiting, want %d", serverChildren(t), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Bursts of two grow the pool to two: the second command comes right
	// after the first, before its refill is done, and finds none ready.
	// (On a loaded machine the refill can win and the burst grows
	// nothing: another is tried.)
	for burst := 0; poolTarget(sb) < 2; burst++ {
		if burst == 10 {
			t.Fatalf("after ten bursts the pool keeps %d, want 2", poolTarget(sb))
		}
		run()
		run()
		waitPool(t, sb, poolTarget(sb))
	}
	// No further, and the later bursts start both commands from it.
	for i := range 2 {
		first, second := run(), run()
		if !(first.Prewarmed && second.Prewarmed) {
			t.Errorf("burst %d after growth: prewarmed %v, %v; want both from the grown pool", i, first.Prewarmed, second.Prewarmed)
		}
		waitPool(t, sb, poolTarget(sb))
	}
	if n := poolTarget(sb); n != 2 {
		t.Fatalf("after bursts the pool keeps %d, want 2 (twice Prewarm)", n)
	}
	waitHost(base + 1)
	// One more burst, then calm: the extra init ends poolShrinkAfter
	// after the burst's last command, with no command after it. The
	// burst's second command arms the shrink when it takes one of the
	// extra inits; on a loaded machine the first one's refill can be
	// done before it starts, and then no command took an extra one, so
	// nothing is to shrink for yet: another burst is tried (make test
	// beside make test-vm saw the pool keep 2 after a single one).
	poolShrinkAfter = 200 * time.Millisecond
	shrunk := false
	for burst := 0; burst < 5 && !shrunk; burst++ {
		run()
		run()
		for deadline := time.Now().Add(3 * time.Second); !shrunk && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			shrunk = poolTarget(sb) == 1
		}
	}
	if !shrunk {
		t.Fatalf("after five bursts and calm the pool keeps %d, want 1", poolTarget(sb))
	}
	waitPool(t, sb, 1)
	waitHost(base)
	if n := sb.Prewarmed(); n != 1 {
		t.Errorf("after the burst %d inits ready, want 1", n)
	}
}

func poolTarget(sb *Sandbox) int {
	sb.pool.mu.Lock()
	defer sb.pool.mu.Unlock()
	return sb.pool.target
}
