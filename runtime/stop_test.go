//go:build linux

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// hostPidsWithArg lists the host's pids whose command line holds arg.
func hostPidsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains("\x00"+string(b), "\x00"+arg+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// uniqueSleep is a sleep argument no other process on the host has, so
// that hostPidsWithArg finds this test's command and nothing else.
func uniqueSleep() string {
	return fmt.Sprintf("1%d.%d", os.Getpid()%10000, time.Now().UnixNano()%1000000)
}

// waitFile polls for a file the command writes in the workspace.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("host: %s never appeared", path)
}

// waitWithin runs Wait, failing t if it has not returned after d (a
// functional bound: "returns" rather than "never").
func waitWithin(t *testing.T, c *runtime.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Wait has not returned after %v", d)
		return nil
	}
}

// trapTerm is a script that, on SIGTERM, leaves a file in the workspace
// and exits 3, and says on the host that its trap is set. Its loop's
// sleep is in its process group and stops with it.
const trapTerm = `trap 'echo term > got-term; exit 3' TERM; : > ready; while :; do sleep 0.1; done`

// TestCancelIsGraceful: the context or Policy.Timeout stops the command
// with SIGTERM first: the command's handler runs (the host finds what it
// wrote) and its status is reported, as killed for the reason, with an
// error that says why.
func TestCancelIsGraceful(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
		reason  runtime.KillReason
		want    error
	}{
		{"context canceled", 0, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, runtime.KilledCanceled, context.Canceled},
		{"context deadline", 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Second)
		}, runtime.KilledTimeout, context.DeadlineExceeded},
		{"policy timeout", 2 * time.Second, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, runtime.KilledTimeout, runtime.ErrTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb, ws := newSandbox(t, func(p *runtime.Policy) { p.Timeout = tt.timeout })
			ctx, cancel := tt.ctx()
			defer cancel()
			c := sb.Command(ctx, "sh", "-c", trapTerm)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, filepath.Join(ws, "ready"))
			if tt.reason == runtime.KilledCanceled {
				cancel()
			}
			ee := wantExit(t, c, waitWithin(t, c, 30*time.Second))
			if b, err := os.ReadFile(filepath.Join(ws, "got-term")); err != nil || string(b) != "term\n" {
				t.Errorf("host: the command's TERM handler left %q, %v", b, err)
			}
			if !ee.Killed || ee.KillReason != tt.reason || ee.ExitCode != 3 || ee.Signal != 0 {
				t.Errorf("Result = %+v, want killed for %q with the handler's status 3", ee.Result, tt.reason)
			}
			if !errors.Is(ee, tt.want) {
				t.Errorf("err = %v, does not match %v", ee, tt.want)
			}
		})
	}
}

// TestCancelGraceEndsInKill: a command that does not end on the graceful
// stop is SIGKILLed with the whole sandbox once WaitDelay has passed,
// also when Cancel does nothing; a Cancel that fails kills at once. The
// host sees the command alive during the grace and nothing of it after.
func TestCancelGraceEndsInKill(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cancel func(c *runtime.Cmd) func() error
		grace  bool // the command must outlive the cancel for a while
	}{
		{"default cancel, TERM ignored", nil, true},
		{"cancel does nothing", func(*runtime.Cmd) func() error { return func() error { return nil } }, true},
		{"cancel fails", func(*runtime.Cmd) func() error {
			return func() error { return errors.New("cannot") }
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb, ws := newSandbox(t)
			arg := uniqueSleep()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// TERM ignored in the shell, and so in the sleep it becomes.
			c := sb.Command(ctx, "sh", "-c", "trap '' TERM; : > ready; exec sleep "+arg)
			c.WaitDelay = 3 * time.Second
			if tt.cancel != nil {
				c.Cancel = tt.cancel(c)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, filepath.Join(ws, "ready"))
			for end := time.Now().Add(10 * time.Second); len(hostPidsWithArg(arg)) == 0 && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			if len(hostPidsWithArg(arg)) == 0 {
				t.Fatal("host: the command's sleep never showed up")
			}
			cancel()
			if tt.grace {
				time.Sleep(500 * time.Millisecond)
				if len(hostPidsWithArg(arg)) == 0 {
					t.Error("host: the command was gone within 0.5s of the cancel: no grace")
				}
			}
			ee := wantExit(t, c, waitWithin(t, c, 30*time.Second))
			if !ee.Killed || ee.KillReason != runtime.KilledCanceled || ee.Signal != syscall.SIGKILL {
				t.Errorf("Result = %+v, want SIGKILL, killed for %q", ee.Result, runtime.KilledCanceled)
			}
			if pids := hostPidsWithArg(arg); len(pids) != 0 {
				t.Errorf("host: the command survived its sandbox: %v", pids)
			}
		})
	}
}

// TestSignalAndStop: Signal reaches the running command's process group
// (its handler runs, and it runs on); Stop ends it gracefully and the
// Result says the caller stopped it; both refuse what they cannot do.
func TestSignalAndStop(t *testing.T) {
	sb, ws := newSandbox(t)
	c := sb.Command(context.Background(), "sh", "-c", `trap 'echo usr1 >> got-usr1' USR1; `+trapTerm)
	if err := c.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal before Start: no error")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ws, "ready"))
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ws, "got-usr1"))
	if err := c.Signal(syscall.SIGSTOP); err == nil {
		t.Error("Signal(SIGSTOP): no error (it would stop the sandbox's init)")
	}
	if _, err := os.Stat(filepath.Join(ws, "got-term")); err == nil {
		t.Fatal("host: the command stopped before Stop")
	}
	if err := c.Stop(nil); err != nil {
		t.Fatal(err)
	}
	ee := wantExit(t, c, waitWithin(t, c, 30*time.Second))
	if _, err := os.Stat(filepath.Join(ws, "got-term")); err != nil {
		t.Errorf("host: the TERM handler did not run: %v", err)
	}
	if !ee.Killed || ee.KillReason != runtime.KilledStopped || ee.ExitCode != 3 {
		t.Errorf("Result = %+v, want killed for %q, status 3", ee.Result, runtime.KilledStopped)
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Wait = %v, want os.ErrProcessDone", err)
	}
	if err := c.Stop(nil); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Stop after Wait = %v, want os.ErrProcessDone", err)
	}

	// Signal(SIGKILL) ends everything in the sandbox at once, and the
	// Result says the caller did it, not that the sandbox died.
	arg := uniqueSleep()
	c = sb.Command(context.Background(), "sleep", arg)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ee = wantExit(t, c, waitWithin(t, c, 30*time.Second))
	if !ee.Killed || ee.KillReason != runtime.KilledStopped || ee.Signal != syscall.SIGKILL || errors.Is(ee, runtime.ErrSandboxDied) {
		t.Errorf("after Signal(SIGKILL): Result = %+v, %v; want SIGKILL, killed for %q", ee.Result, ee, runtime.KilledStopped)
	}
	if pids := hostPidsWithArg(arg); len(pids) != 0 {
		t.Errorf("host: the command outlived Signal(SIGKILL): %v", pids)
	}

	// A negative WaitDelay is refused before anything runs, with a
	// Result as for every refused Start.
	c = sb.Command(context.Background(), "true")
	c.WaitDelay = -time.Second
	var pe *runtime.PolicyError
	if err := c.Start(); !errors.As(err, &pe) || pe.Field != "Cmd.WaitDelay" || c.Result == nil || c.Result.ExitCode != -1 {
		t.Errorf("negative WaitDelay: %v, Result %+v", err, c.Result)
	}
}

// stuckWriter blocks every Write until released.
type stuckWriter struct{ release chan struct{} }

func (w stuckWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, io.ErrClosedPipe
}

// TestWaitStuckWriter: a host Stdout that blocks for good does not keep
// Wait from returning once the command has ended (by itself, or by the
// timeout): Wait returns within WaitDelay, with ErrWaitDelay, and the
// Result is set.
func TestWaitStuckWriter(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		script  string
		killed  bool
	}{
		{"command ends", 0, "echo hello", false},
		{"timeout", time.Second, "while :; do echo hello; done", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = tt.timeout })
			w := stuckWriter{make(chan struct{})}
			defer close(w.release)
			c := sb.Command(context.Background(), "sh", "-c", tt.script)
			c.Stdout = w
			c.WaitDelay = time.Second
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			err := waitWithin(t, c, 30*time.Second)
			if !errors.Is(err, runtime.ErrWaitDelay) {
				t.Errorf("err = %v, want ErrWaitDelay", err)
			}
			if c.Result == nil || c.Result.Killed != tt.killed {
				t.Fatalf("Result = %+v, want Killed %v", c.Result, tt.killed)
			}
			if tt.killed && !errors.Is(err, runtime.ErrTimeout) {
				t.Errorf("err = %v, want it to match ErrTimeout too", err)
			}
		})
	}
}

// failingWriter fails every Write.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// failingReader yields some input, then fails.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestWaitReturnsIOErrors: a command that succeeded while copying its
// stdio failed is not a success: Wait returns the writer's or reader's
// error. A command that stops reading its stdin early is no error.
func TestWaitReturnsIOErrors(t *testing.T) {
	errWrite, errRead := errors.New("disk full"), errors.New("connection reset")
	for _, tt := range []struct {
		name   string
		script string
		setup  func(c *runtime.Cmd)
		want   error
	}{
		{"stdout fails", "echo hello", func(c *runtime.Cmd) { c.Stdout = failingWriter{errWrite} }, errWrite},
		{"stderr fails", "echo hello >&2", func(c *runtime.Cmd) { c.Stderr = failingWriter{errWrite} }, errWrite},
		{"stdin fails", "cat >/dev/null", func(c *runtime.Cmd) {
			c.Stdin = &failingReader{data: []byte("some input\n"), err: errRead}
		}, errRead},
		{"stdin not read", "true", func(c *runtime.Cmd) {
			c.Stdin = bytes.NewReader(make([]byte, 4<<20))
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb, _ := newSandbox(t)
			c := sb.Command(context.Background(), "sh", "-c", tt.script)
			tt.setup(c)
			err := c.Run()
			if c.Result == nil || !c.Result.Success() {
				t.Fatalf("Result = %+v, want the command's success", c.Result)
			}
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
