//go:build linux

package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// TestStartFailureResult: whatever stops Start, Cmd.Result exists
// afterwards and says so; a kill that lands before the command started is
// reported as the kill it is (an *ExitError matching the context's error),
// not as a setup failure.
func TestStartFailureResult(t *testing.T) {
	sb, _ := newSandbox(t)
	closed, _ := newSandbox(t)
	closed.Close()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	tests := []struct {
		name   string
		cmd    func() *runtime.Cmd
		is     error              // what errors.Is matches
		reason runtime.KillReason // "" when the command was not killed
	}{
		{"canceled context", func() *runtime.Cmd { return sb.Command(canceled, "true") }, context.Canceled, runtime.KilledCanceled},
		{"expired deadline", func() *runtime.Cmd { return sb.Command(expired, "true") }, context.DeadlineExceeded, runtime.KilledTimeout},
		{"not found", func() *runtime.Cmd { return sb.Command(context.Background(), "hutch-no-such-command") }, runtime.ErrNotFound, ""},
		{"refused env", func() *runtime.Cmd {
			c := sb.Command(context.Background(), "true")
			c.Env = []string{"LD_PRELOAD=/tmp/x.so"}
			return c
		}, nil, ""},
		{"closed sandbox", func() *runtime.Cmd { return closed.Command(context.Background(), "true") }, runtime.ErrClosed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cmd()
			err := c.Start()
			if err == nil {
				t.Fatal("Start: nil")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Start: %v, want errors.Is %v", err, tt.is)
			}
			r := c.Result
			if r == nil {
				t.Fatalf("Start: %v and no Result", err)
			}
			if r.Success() || r.ExitCode != -1 || r.Level == "" {
				t.Errorf("Result = %+v, want a failure at a level", r)
			}
			if tt.reason == "" {
				if r.Killed || r.Error == "" || r.Signal != 0 {
					t.Errorf("Result = %+v, want not killed and the error", r)
				}
				return
			}
			ee := wantExit(t, c, err)
			if !ee.Killed || ee.KillReason != tt.reason || ee.Signal != syscall.SIGKILL || ee.Reason != string(tt.reason) {
				t.Errorf("Result = %+v, want killed for %q", ee.Result, tt.reason)
			}
		})
	}
}

// TestTimeoutDuringSetup: a Policy.Timeout shorter than the sandbox's
// setup (1ms, the least the policy takes) kills the command wherever it
// lands, and every run reports a timeout with a Result.
func TestTimeoutDuringSetup(t *testing.T) {
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = time.Millisecond })
	for range 10 {
		c := sb.Command(context.Background(), "sleep", "60")
		err := c.Run()
		if !errors.Is(err, runtime.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run: %v (%T), want a timeout", err, err)
		}
		if c.Result == nil {
			t.Fatalf("Run: %v and no Result", err)
		}
		ee := wantExit(t, c, err)
		if !ee.Killed || ee.KillReason != runtime.KilledTimeout || ee.Signal != syscall.SIGKILL {
			t.Errorf("Result = %+v, want killed by the timeout", ee.Result)
		}
	}
}

// TestClosedSandboxRunsNothing: after Close, Start fails with ErrClosed
// and nothing runs (the host sees no file the command would have made);
// Close is idempotent, and safe while commands are being started.
func TestClosedSandboxRunsNothing(t *testing.T) {
	sb, ws := newSandbox(t, func(p *runtime.Policy) { p.Prewarm = 2 })
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	c := sb.Command(context.Background(), "touch", "ran")
	if err := c.Run(); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Run on a closed Sandbox: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("host: a closed Sandbox ran the command")
	}
	if n := sb.Prewarmed(); n != 0 {
		t.Errorf("Prewarmed() = %d after Close", n)
	}

	// Close racing Starts: each command either ran to the end (its file
	// exists) or was refused with ErrClosed (its file does not).
	sb, ws = newSandbox(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = sb.Command(context.Background(), "touch", "f"+strings.Repeat("x", i)).Run()
		})
	}
	wg.Go(func() { _ = sb.Close() })
	wg.Go(func() { _ = sb.Close() })
	wg.Wait()
	for i, err := range errs {
		_, serr := os.Stat(filepath.Join(ws, "f"+strings.Repeat("x", i)))
		switch {
		case err == nil && serr != nil:
			t.Errorf("command %d: ran without error, and the host has no file: %v", i, serr)
		case err != nil && !errors.Is(err, runtime.ErrClosed):
			t.Errorf("command %d: %v, want nil or ErrClosed", i, err)
		case err != nil && serr == nil:
			t.Errorf("command %d: refused (%v), yet the host has its file", i, err)
		}
	}
}

// TestCloseWithdrawsSpare: a Sandbox asks the spawn server to keep a spare
// of its kind of init, the latest open Sandbox's kind winning; closing one
// hands that back to the Sandbox opened before it. Seen on the host: a
// Sandbox sharing the host's network has the server keep a spare in the
// server's own network namespace, and once it closes no such spare is
// left, whatever other Sandboxes are open. Closing the last leaves the
// server cloning none when its command's init ends.
func TestCloseWithdrawsSpare(t *testing.T) {
	before := spawn.Default().Prepared()
	sbA, _ := newSandbox(t)
	kindA := spawn.Default().Prepared()
	if kindA.Cloneflags == 0 {
		t.Skip("no namespaces for this user here: no spare to keep")
	}
	sbB, _ := newSandbox(t, func(p *runtime.Policy) { p.Network = runtime.NetworkHost })
	if kindB := spawn.Default().Prepared(); kindB == kindA {
		t.Fatalf("a Sandbox sharing the host's network asks for the same kind of spare as one without: %+v", kindB)
	}
	if err := sbB.Command(context.Background(), "true").Run(); err != nil {
		t.Fatal(err)
	}
	server := spawn.Default().ServerPid()
	if !waitSpare(server, true) {
		t.Fatal("host: no spare in the server's network namespace while a Sandbox sharing the host's network is open")
	}
	if err := sbB.Close(); err != nil {
		t.Fatal(err)
	}
	if got := spawn.Default().Prepared(); got != kindA {
		t.Errorf("after the latest Sandbox closed: %+v, want the one before's %+v", got, kindA)
	}
	if !waitSpare(server, false) {
		t.Error("host: the server keeps a spare in its own network namespace after the Sandbox that wanted it closed")
	}
	if err := sbA.Command(context.Background(), "true").Run(); err != nil {
		t.Fatal(err)
	}
	if err := sbA.Close(); err != nil {
		t.Fatal(err)
	}
	if got := spawn.Default().Prepared(); got != before {
		t.Errorf("after both closed: %+v, want what it was before them, %+v", got, before)
	}
	if before.Cloneflags != 0 {
		return // a Sandbox another test left open still wants spares
	}
	time.Sleep(100 * time.Millisecond)
	if p := spareOf(server); p != "" {
		t.Errorf("host: the spawn server cloned spare %s after the last Sandbox closed", p)
	}
}

// TestCloseAfterStart: a Sandbox closed right after its one command
// started, as hutch run closes its own, leaves the command running to
// its end, and the spawn server clones no spare when the command's init
// ends (one hutch would only kill as it exits).
func TestCloseAfterStart(t *testing.T) {
	if spawn.Default().Prepared().Cloneflags != 0 {
		t.Skip("a Sandbox another test left open wants spares")
	}
	sb, ws := newSandbox(t)
	if spawn.Default().Prepared().Cloneflags == 0 {
		t.Skip("no namespaces for this user here: no spare to keep")
	}
	out := filepath.Join(ws, "out")
	c := sb.Command(context.Background(), "sh", "-c", "sleep 0.3; echo done > "+out)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("the command, its Sandbox closed after Start: %v", err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "done\n" {
		t.Errorf("host: what the command wrote after its Sandbox closed: %q, %v", b, err)
	}
	server := spawn.Default().ServerPid()
	time.Sleep(100 * time.Millisecond)
	if p := spareOf(server); p != "" {
		t.Errorf("host: the spawn server cloned spare %s when the closed Sandbox's init ended", p)
	}
}

// TestPooledKeepsNoSpare: a Sandbox with a pool has the spawn server keep
// no spare init: its pool holds its inits made ahead, and a spare would be
// cloned as each of its commands' inits ends, just as a command issued
// right after it starts. Seen on the host: no hutch-spare among the
// server's children once its commands' inits have ended.
func TestPooledKeepsNoSpare(t *testing.T) {
	if spawn.Default().Prepared().Cloneflags != 0 {
		t.Skip("a Sandbox another test left open wants spares")
	}
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Prewarm = 1 })
	if got := spawn.Default().Prepared(); got.Cloneflags != 0 {
		t.Errorf("a Sandbox with a pool asks the spawn server for spares: %+v", got)
	}
	for range 3 {
		c := sb.Command(context.Background(), "true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(c.Result.Layers, runtime.LayerPidNS) {
			t.Skip("no namespaces for this user here: no spare to keep")
		}
	}
	// On the host, from each command's end to the pool's refill (which
	// would take a spare cloned as the command's init ended): no spare.
	server := spawn.Default().ServerPid()
	for range 5 {
		if err := sb.Command(context.Background(), "true").Run(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
			if p := spareOf(server); p != "" {
				t.Fatalf("host: the spawn server cloned spare %s for a Sandbox with a pool", p)
			}
		}
	}
	if n := serverInits(server); n < 1 {
		t.Errorf("host: %d inits in the spawn server, want the pooled one", n)
	}
}

// serverInits counts the spawn server's children named hutch-init on the
// host: pooled inits and inits of commands not yet ended.
func serverInits(server int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", server, server))
	n := 0
	for _, pid := range strings.Fields(string(b)) {
		if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) == "hutch-init" {
			n++
		}
	}
	return n
}

// spareOf returns the pid of the spawn server's spare (its child named
// hutch-spare), or "".
func spareOf(server int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", server, server))
	for _, pid := range strings.Fields(string(b)) {
		if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) == "hutch-spare" {
			return pid
		}
	}
	return ""
}

// waitSpare waits up to 10 s until whether the server keeps a spare in
// its own network namespace (one cloned without CLONE_NEWNET) is want,
// read from the host's /proc.
func waitSpare(server int, want bool) bool {
	own, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", server))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		shared := false
		if p := spareOf(server); p != "" {
			ns, err := os.Readlink("/proc/" + p + "/ns/net")
			shared = err == nil && ns == own
		}
		if shared == want {
			return true
		}
	}
	return false
}

// TestNewFiles: a Sandbox made for the file operations asks the spawn
// server for nothing (no init, no spare, no server started, no pool), and
// its file server is this process's own child, started as
// spawn.InitArg0; a command started on it still runs, through the spawn
// server.
func TestNewFiles(t *testing.T) {
	c := spawn.Default()
	spawned, servers, prepared := c.Spawned(), c.ServersStarted(), c.Prepared()
	p := runtime.DefaultPolicy(t.TempDir())
	p.Prewarm = 1
	sb, err := runtime.NewFiles(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ws := sb.Policy().Workspace
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile("a.txt", runtime.ReadOptions{})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no file door at this level here")
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != "from the host\n" {
		t.Fatalf("ReadFile = %q", got.Data)
	}
	if c.Spawned() != spawned || c.ServersStarted() != servers || c.Prepared() != prepared || sb.Prewarmed() != 0 {
		t.Errorf("the spawn server was asked for something: spawned %d -> %d, servers %d -> %d, spare %+v -> %+v; pooled %d",
			spawned, c.Spawned(), servers, c.ServersStarted(), prepared, c.Prepared(), sb.Prewarmed())
	}
	// The file server is kept for the next operation: seen now.
	var server []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && string(cmdline) == spawn.InitArg0+"\x00" {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == fmt.Sprint(os.Getpid()) {
				server = append(server, e.Name())
			}
		}
	}
	if len(server) != 1 {
		t.Errorf("host: %d children of this process run as %s, want the file server: %q", len(server), spawn.InitArg0, server)
	}
	if err := sb.Command(context.Background(), "true").Run(); err != nil {
		t.Errorf("a command on a NewFiles Sandbox: %v", err)
	}
	if c.Spawned() != spawned+1 {
		t.Errorf("the command asked the spawn server for %d inits, want 1", c.Spawned()-spawned)
	}
}
