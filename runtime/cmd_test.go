//go:build linux

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// newSandbox makes a Sandbox on a fresh workspace with policy edits.
func newSandbox(t *testing.T, edit ...func(*runtime.Policy)) (*runtime.Sandbox, string) {
	t.Helper()
	ws := t.TempDir()
	p := runtime.DefaultPolicy(ws)
	for _, f := range edit {
		f(&p)
	}
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Closed when the test ends (Close is idempotent): an open Sandbox
	// keeps the spawn server making spares for the tests after it.
	t.Cleanup(func() { sb.Close() })
	return sb, sb.Policy().Workspace
}

// wantExit fails t unless err is an *ExitError whose Result is c.Result.
func wantExit(t *testing.T, c *runtime.Cmd, err error) *runtime.ExitError {
	t.Helper()
	var ee *runtime.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v (%T), want *runtime.ExitError", err, err)
	}
	if ee.Result != c.Result {
		t.Errorf("ExitError.Result is not Cmd.Result")
	}
	return ee
}

func TestRunSuccess(t *testing.T) {
	sb, ws := newSandbox(t)
	c := sb.Command(context.Background(), "true")
	if err := c.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := c.Result
	if r == nil || !r.Success() || r.ExitCode != 0 || r.Signal != 0 || r.Killed || r.KillReason != "" || r.Truncated {
		t.Fatalf("Result = %+v, want a clean exit 0", r)
	}
	if r.Wall <= 0 || r.Wall > 10*time.Second {
		t.Errorf("Wall = %v", r.Wall)
	}
	if got := r.String(); got != "exit status 0" {
		t.Errorf("String() = %q", got)
	}
	if c.Dir != ws {
		t.Errorf("Dir = %q, want the workspace %q", c.Dir, ws)
	}
}

func TestExitCode(t *testing.T) {
	sb, _ := newSandbox(t)
	for _, code := range []int{1, 3, 42, 125, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			c := sb.Command(context.Background(), "sh", "-c", fmt.Sprintf("exit %d", code))
			err := c.Run()
			ee := wantExit(t, c, err)
			if ee.ExitCode != code || ee.Signal != 0 || ee.Killed || ee.Success() {
				t.Errorf("Result = %+v, want exit %d", ee.Result, code)
			}
			if want := fmt.Sprintf("exit status %d", code); err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

func TestSignal(t *testing.T) {
	sb, _ := newSandbox(t)
	tests := []struct {
		script string
		sig    syscall.Signal
	}{
		{"kill -TERM $$", syscall.SIGTERM},
		{"kill -KILL $$", syscall.SIGKILL},
		{"kill -USR1 $$", syscall.SIGUSR1},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			c := sb.Command(context.Background(), "sh", "-c", tt.script)
			err := c.Run()
			ee := wantExit(t, c, err)
			if ee.Signal != tt.sig || ee.ExitCode != -1 {
				t.Errorf("Signal, ExitCode = %v, %d; want %v, -1", ee.Signal, ee.ExitCode, tt.sig)
			}
			if ee.Killed || ee.KillReason != "" {
				t.Errorf("Killed = %v (%q) for a command that killed itself", ee.Killed, ee.KillReason)
			}
			if !strings.HasPrefix(err.Error(), "signal: SIG") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestOutput(t *testing.T) {
	sb, _ := newSandbox(t)
	ctx := context.Background()

	out, err := sb.Command(ctx, "sh", "-c", "echo out; echo err >&2").Output()
	if err != nil || string(out) != "out\n" {
		t.Errorf("Output = %q, %v; want %q, nil", out, err, "out\n")
	}

	c := sb.Command(ctx, "sh", "-c", "echo out; echo oops >&2; exit 2")
	out, err = c.Output()
	ee := wantExit(t, c, err)
	if string(out) != "out\n" || string(ee.Stderr) != "oops\n" || ee.ExitCode != 2 {
		t.Errorf("Output = %q, Stderr %q, exit %d; want %q, %q, 2", out, ee.Stderr, ee.ExitCode, "out\n", "oops\n")
	}

	// A Stderr the caller set is the caller's: ExitError.Stderr stays empty.
	var errb bytes.Buffer
	c = sb.Command(ctx, "sh", "-c", "echo oops >&2; exit 1")
	c.Stderr = &errb
	_, err = c.Output()
	if ee := wantExit(t, c, err); ee.Stderr != nil || errb.String() != "oops\n" {
		t.Errorf("ExitError.Stderr = %q, caller's Stderr = %q", ee.Stderr, errb.String())
	}

	c = sb.Command(ctx, "true")
	c.Stdout = &bytes.Buffer{}
	if _, err := c.Output(); err == nil {
		t.Error("Output with Stdout set: nil error")
	}

	out, err = sb.Command(ctx, "sh", "-c", "echo a; echo b >&2; echo c").CombinedOutput()
	if err != nil || string(out) != "a\nb\nc\n" {
		t.Errorf("CombinedOutput = %q, %v; want %q", out, err, "a\nb\nc\n")
	}
	c = sb.Command(ctx, "true")
	c.Stderr = &bytes.Buffer{}
	if _, err := c.CombinedOutput(); err == nil {
		t.Error("CombinedOutput with Stderr set: nil error")
	}

	// Separate writers for stdout and stderr.
	var o, e bytes.Buffer
	c = sb.Command(ctx, "sh", "-c", "echo to-out; echo to-err >&2")
	c.Stdout, c.Stderr = &o, &e
	if err := c.Run(); err != nil || o.String() != "to-out\n" || e.String() != "to-err\n" {
		t.Errorf("Run = %v; stdout %q, stderr %q", err, o.String(), e.String())
	}
}

func TestStdin(t *testing.T) {
	sb, _ := newSandbox(t)
	ctx := context.Background()

	in := strings.Repeat("line of input\n", 20000) // well past a pipe buffer
	c := sb.Command(ctx, "cat")
	c.Stdin = strings.NewReader(in)
	out, err := c.Output()
	if err != nil || string(out) != in {
		t.Fatalf("cat: %d bytes, %v; want %d bytes back", len(out), err, len(in))
	}

	c = sb.Command(ctx, "sh", "-c", "read a; read b; echo \"$b $a\"")
	c.Stdin = strings.NewReader("world\nhello\n")
	if out, err := c.Output(); err != nil || string(out) != "hello world\n" {
		t.Errorf("read = %q, %v", out, err)
	}

	// Without Stdin the command reads /dev/null: EOF at once.
	out, err = sb.Command(ctx, "sh", "-c", "cat; echo eof").Output()
	if err != nil || string(out) != "eof\n" {
		t.Errorf("no Stdin = %q, %v; want %q", out, err, "eof\n")
	}

	// A command that does not read its input still ends.
	c = sb.Command(ctx, "true")
	c.Stdin = strings.NewReader(in)
	if err := c.Run(); err != nil {
		t.Errorf("unread stdin: %v", err)
	}
}

// TestStdinNull: a command without Stdin has the host's /dev/null as its
// fd 0, read only, as the host's /proc shows it; the one /dev/null every
// such command is handed stays open for the next when one has ended.
func TestStdinNull(t *testing.T) {
	sb, _ := newSandbox(t)
	for i := range 3 {
		c := sb.Command(context.Background(), "sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pid := c.Pid()
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid))
		info, ierr := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/0", pid))
		c.Stop(nil)
		c.Wait()
		if err != nil || ierr != nil {
			t.Fatalf("command %d: fd 0: %v, %v", i, err, ierr)
		}
		if target != os.DevNull {
			t.Errorf("command %d: fd 0 is %q, want %s", i, target, os.DevNull)
		}
		var flags string
		for line := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags = strings.TrimSpace(v)
			}
		}
		if f, err := strconv.ParseUint(flags, 8, 32); err != nil || f&syscall.O_ACCMODE != syscall.O_RDONLY {
			t.Errorf("command %d: fd 0 flags %q, want read only", i, flags)
		}
	}
}

// TestUsageCPU: what a command and the processes it left behind spent
// is its Result's CPU time, whether it ended on its own or was killed with
// its sandbox: at least half of what the same work costs on the host, by
// the host's own accounting (fixed work, not a fixed time: a loaded host
// gives a spinner less CPU in the same time). On a v1 host the command has
// no freezer group of its own, as the host's /proc shows its groups: the
// init, pid 1 of the sandbox, kills everything in it at once.
func TestUsageCPU(t *testing.T) {
	const work = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`
	host := exec.Command("sh", "-c", work)
	if err := host.Run(); err != nil {
		t.Fatal(err)
	}
	want := (host.ProcessState.UserTime() + host.ProcessState.SystemTime()) / 2
	sb, _ := newSandbox(t)
	// The worker outlives the shell that started it (the init reaps it);
	// the command ends once the worker is done.
	c := sb.Command(context.Background(), "sh", "-c",
		`(sh -c '`+work+`; touch /tmp/done' &); while [ ! -e /tmp/done ]; do sleep 0.05; done`)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	groups, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	u := c.Result.Usage
	if u == nil {
		t.Skip("no cgroups here: the Result has no usage")
	}
	if cpu := u.CPUUser + u.CPUSystem; cpu < want || cpu > 2*c.Result.Wall {
		t.Errorf("CPU time %v in %v, for work that takes the host %v", cpu, c.Result.Wall, 2*want)
	}
	var own []string // the controllers of the lines that name the command's group
	for line := range strings.Lines(string(groups)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && f[1] != "" && strings.Contains(f[2], "/hutch-") {
			own = append(own, strings.Split(f[1], ",")...)
		}
	}
	t.Logf("the command's v1 groups: %q", own)
	if len(own) > 0 && (!slices.Contains(own, "memory") || !slices.Contains(own, "cpuacct")) {
		t.Errorf("no memory or cpuacct group for the command:\n%s", groups)
	}
	if slices.Contains(own, "freezer") {
		t.Errorf("the command is in a freezer group of its own:\n%s", groups)
	}

	// Killed for its output, the sandbox ends with its init: its CPU time
	// is still counted.
	sb, _ = newSandbox(t, func(p *runtime.Policy) { p.OutputLimit = 1 << 20 })
	c = sb.Command(context.Background(), "sh", "-c", work+"; exec yes")
	c.Stdout = io.Discard
	err = c.Run()
	if c.Result.KillReason != runtime.KilledOutputLimit {
		t.Fatalf("worker: %v (%s), want a kill for its output", err, c.Result.KillReason)
	}
	if u := c.Result.Usage; u == nil || u.CPUUser+u.CPUSystem < want {
		t.Errorf("killed after work that takes the host %v: usage %+v", 2*want, u)
	}
}

func TestOutputLimit(t *testing.T) {
	const limit = 1000
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.OutputLimit = limit })
	// 1 MiB of output, then a sleep so that the command cannot end on its
	// own before hutch kills it. The short sleep first lets Start return
	// before the limit is hit (see TestOutputLimitBeforeStartReturns).
	c := sb.Command(context.Background(), "sh", "-c", "sleep 0.2; head -c 1048576 /dev/zero; sleep 20")
	out, err := c.Output()
	ee := wantExit(t, c, err)
	if len(out) > limit {
		t.Errorf("captured %d bytes, limit %d", len(out), limit)
	}
	if len(out) != limit {
		t.Logf("captured %d bytes (limit %d)", len(out), limit)
	}
	if !ee.Truncated || !ee.Killed || ee.KillReason != runtime.KilledOutputLimit {
		t.Errorf("Result = %+v, want Truncated, Killed, %q", ee.Result, runtime.KilledOutputLimit)
	}
	if ee.Signal != syscall.SIGKILL || ee.ExitCode != -1 {
		t.Errorf("Signal, ExitCode = %v, %d; want SIGKILL, -1", ee.Signal, ee.ExitCode)
	}
	if ee.Wall > 10*time.Second {
		t.Errorf("Wall = %v: the command was not killed", ee.Wall)
	}
	if !strings.Contains(err.Error(), "killed: output limit") {
		t.Errorf("Error() = %q", err.Error())
	}

	// Both streams count against the one limit.
	c = sb.Command(context.Background(), "sh", "-c", "sleep 0.2; head -c 600 /dev/zero; head -c 600 /dev/zero >&2; sleep 20")
	out, err = c.CombinedOutput()
	ee = wantExit(t, c, err)
	if len(out) != limit || !ee.Truncated || ee.KillReason != runtime.KilledOutputLimit {
		t.Errorf("combined: %d bytes, Result %+v; want %d bytes, truncated, killed", len(out), ee.Result, limit)
	}

	// Output within the limit is untouched.
	out, err = sb.Command(context.Background(), "head", "-c", "999", "/dev/zero").Output()
	if err != nil || len(out) != 999 {
		t.Errorf("under the limit: %d bytes, %v", len(out), err)
	}
}

// TestOutputLimitBeforeStartReturns: a command that passes the output limit
// at once may do so before its init reports "started"; it still starts, and
// ends with a Result that says Truncated (Killed for the output limit, unless
// it finished on its own first).
func TestOutputLimitBeforeStartReturns(t *testing.T) {
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.OutputLimit = 1000 })
	for i := range 100 {
		c := sb.Command(context.Background(), "head", "-c", "1048576", "/dev/zero")
		out, err := c.Output()
		var ee *runtime.ExitError
		if err != nil && !errors.As(err, &ee) || c.Result == nil {
			t.Fatalf("run %d: err = %v, Result = %v; want a Result", i, err, c.Result)
		}
		if !c.Result.Truncated || len(out) != 1000 {
			t.Fatalf("run %d: %d bytes, Result = %+v, want Truncated at 1000", i, len(out), c.Result)
		}
		if err != nil && c.Result.KillReason != runtime.KilledOutputLimit {
			t.Fatalf("run %d: Result = %+v, want KilledOutputLimit", i, c.Result)
		}
	}
}

func TestNoOutputLimit(t *testing.T) {
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.OutputLimit = -1 })
	c := sb.Command(context.Background(), "head", "-c", "3000000", "/dev/zero")
	out, err := c.Output()
	if err != nil || len(out) != 3000000 || c.Result.Truncated {
		t.Errorf("unlimited: %d bytes, %v, %+v", len(out), err, c.Result)
	}
}

func TestTimeout(t *testing.T) {
	// The timeout counts the sandbox's setup: one that lands before the
	// command runs kills it at once (Startup 0), which says nothing of
	// the graceful stop; a machine busy enough to spend the whole second
	// on setup is given a longer timeout.
	started := false
	for _, timeout := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second} {
		sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = timeout })
		c := sb.Command(context.Background(), "sleep", "60")
		err := c.Run()
		ee := wantExit(t, c, err)
		if !ee.Killed || ee.KillReason != runtime.KilledTimeout {
			t.Fatalf("Result = %+v, want killed by the timeout", ee.Result)
		}
		if ee.Wall < timeout || ee.Wall > timeout+7*time.Second {
			t.Errorf("Wall = %v, want about %v", ee.Wall, timeout)
		}
		if ee.Startup == 0 {
			t.Logf("sleep had not started when its %v timeout came: again with a longer one", timeout)
			continue
		}
		// sleep ends on the graceful stop's SIGTERM.
		if ee.Signal != syscall.SIGTERM || ee.ExitCode != -1 {
			t.Errorf("Result = %+v, want ended by the timeout's SIGTERM", ee.Result)
		}
		started = true
		break
	}
	if !started {
		t.Error("sleep never started within its timeout")
	}

	// A command that ends in time is not killed. The timeout counts the
	// sandbox's setup too: a loaded machine can spend a second on it, so
	// the quick command gets a minute, not the second above.
	lenient, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = time.Minute })
	c := lenient.Command(context.Background(), "true")
	if err := c.Run(); err != nil || c.Result.Killed {
		t.Errorf("quick command: %v, %+v", err, c.Result)
	}
}

func TestTimeoutKillsEverything(t *testing.T) {
	// The timeout ends the command's whole tree, even a background child
	// that holds the output pipe open. (A timeout spent on the sandbox's
	// setup alone, on a busy machine, is given a longer one: see
	// TestTimeout.)
	for _, timeout := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second} {
		sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = timeout })
		c := sb.Command(context.Background(), "sh", "-c", "sleep 30 & echo started; wait")
		start := time.Now()
		out, err := c.Output()
		ee := wantExit(t, c, err)
		if d := time.Since(start); d > timeout+4*time.Second {
			t.Errorf("Output returned after %v", d)
		}
		if ee.KillReason != runtime.KilledTimeout {
			t.Fatalf("Result = %+v, out %q", ee.Result, out)
		}
		if ee.Startup == 0 {
			t.Logf("sh had not started when its %v timeout came: again with a longer one", timeout)
			continue
		}
		if string(out) != "started\n" {
			t.Errorf("out %q, want started", out)
		}
		return
	}
	t.Error("sh never started within its timeout")
}

func TestContext(t *testing.T) {
	sb, _ := newSandbox(t)

	ctx, cancel := context.WithCancel(context.Background())
	c := sb.Command(ctx, "sleep", "10")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	err := c.Wait()
	ee := wantExit(t, c, err)
	if !ee.Killed || ee.KillReason != runtime.KilledCanceled || ee.Signal != syscall.SIGTERM {
		t.Errorf("Result = %+v, want killed for %q", ee.Result, runtime.KilledCanceled)
	}
	if ee.Wall > 5*time.Second {
		t.Errorf("Wall = %v", ee.Wall)
	}

	// A context deadline counts as a timeout.
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c = sb.Command(ctx, "sleep", "10")
	ee = wantExit(t, c, c.Run())
	if !ee.Killed || ee.KillReason != runtime.KilledTimeout {
		t.Errorf("Result = %+v, want killed for %q", ee.Result, runtime.KilledTimeout)
	}
	if ee.Wall > 5*time.Second {
		t.Errorf("Wall = %v", ee.Wall)
	}
}

func TestLayers(t *testing.T) {
	sb, _ := newSandbox(t)
	c := sb.Command(context.Background(), "true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []runtime.Layer{
		runtime.LayerUserNS, runtime.LayerMountNS, runtime.LayerPidNS, runtime.LayerNetNS,
		runtime.LayerIPCNS, runtime.LayerUTSNS, runtime.LayerCgroupNS,
		runtime.LayerFilesystem, runtime.LayerCapabilities, runtime.LayerNoNewPrivs,
		runtime.LayerLoopback, runtime.LayerKeyring,
	} {
		if !slices.Contains(c.Result.Layers, l) {
			t.Errorf("Layers %v lack %s", c.Result.Layers, l)
		}
	}
	seen := map[runtime.Layer]bool{}
	for _, l := range c.Result.Layers {
		if seen[l] {
			t.Errorf("layer %s reported twice: %v", l, c.Result.Layers)
		}
		seen[l] = true
	}
	if len(c.Result.Skipped) != 0 {
		t.Errorf("Skipped = %v with nothing allowed to degrade", c.Result.Skipped)
	}
	// A failed command reports its layers too.
	c = sb.Command(context.Background(), "false")
	ee := wantExit(t, c, c.Run())
	if !slices.Contains(ee.Layers, runtime.LayerFilesystem) {
		t.Errorf("Layers of a failed command = %v", ee.Layers)
	}
}

// TestExecErrors: a command that cannot be found or run fails Start with
// a *SetupError that errors.Is matches to hutch's sentinel and its errno,
// as the CLI's 127 and 126 rely on.
func TestExecErrors(t *testing.T) {
	sb, ws := newSandbox(t)
	files := []struct {
		name string
		data string
		mode os.FileMode
	}{
		{"script", "#!/bin/sh\n", 0o644},         // not executable
		{"garbage", "no shebang\x00\x01", 0o755}, // executable, no format the kernel runs
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(ws, f.name), []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		want  error // ErrNotFound or ErrCannotExec
		errno syscall.Errno
		is    error // a further error the failure matches
	}{
		{"hutch-no-such-command", runtime.ErrNotFound, syscall.ENOENT, fs.ErrNotExist},
		{"/nonexistent/hutch-no-such-command", runtime.ErrNotFound, syscall.ENOENT, fs.ErrNotExist},
		{"./missing", runtime.ErrNotFound, syscall.ENOENT, fs.ErrNotExist},
		{"./script", runtime.ErrCannotExec, syscall.EACCES, fs.ErrPermission},
		{filepath.Join(ws, "script"), runtime.ErrCannotExec, syscall.EACCES, fs.ErrPermission},
		{"./dir", runtime.ErrCannotExec, syscall.EACCES, fs.ErrPermission},
		{"./garbage", runtime.ErrCannotExec, syscall.ENOEXEC, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sb.Command(context.Background(), tt.name)
			err := c.Start()
			var se *runtime.SetupError
			if !errors.As(err, &se) {
				t.Fatalf("Start: %v (%T), want *runtime.SetupError", err, err)
			}
			if se.Layer != runtime.LayerExec {
				t.Errorf("Layer = %q, want %q", se.Layer, runtime.LayerExec)
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.errno) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("Start: %v, want errors.Is %v, %v and %v", err, tt.want, tt.errno, tt.is)
			}
			other := runtime.ErrCannotExec
			if tt.want == runtime.ErrCannotExec {
				other = runtime.ErrNotFound
			}
			if errors.Is(err, other) {
				t.Errorf("Start: %v matches %v too", err, other)
			}
			if err := c.Wait(); err == nil {
				t.Error("Wait after a failed Start: nil")
			}
		})
	}
}

// TestKillErrors: the *ExitError of a command hutch killed for its context
// or Policy.Timeout says why to errors.Is, and is still the ExitError
// holding Cmd.Result.
func TestKillErrors(t *testing.T) {
	plain, _ := newSandbox(t)
	timed, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = time.Second })
	cause := errors.New("the agent gave up")
	all := []error{context.Canceled, context.DeadlineExceeded, runtime.ErrTimeout, cause}
	tests := []struct {
		name   string
		sb     *runtime.Sandbox
		ctx    func() (context.Context, func())
		reason runtime.KillReason
		is     []error // of all, the errors the ExitError matches
	}{
		{"cancel", plain, func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, runtime.KilledCanceled, []error{context.Canceled}},
		{"cancel with cause", plain, func() (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(time.Second, func() { cancel(cause) })
			return ctx, func() { cancel(nil) }
		}, runtime.KilledCanceled, []error{context.Canceled, cause}},
		{"deadline", plain, func() (context.Context, func()) {
			return context.WithTimeout(context.Background(), time.Second)
		}, runtime.KilledTimeout, []error{context.DeadlineExceeded}},
		{"policy timeout", timed, func() (context.Context, func()) {
			return context.Background(), func() {}
		}, runtime.KilledTimeout, []error{runtime.ErrTimeout, context.DeadlineExceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			c := tt.sb.Command(ctx, "sleep", "10")
			err := c.Run()
			ee := wantExit(t, c, err)
			if !ee.Killed || ee.KillReason != tt.reason {
				t.Errorf("Result = %+v, want killed for %q", ee.Result, tt.reason)
			}
			for _, target := range all {
				if got, want := errors.Is(err, target), slices.Contains(tt.is, target); got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, target, got, want)
				}
			}
		})
	}

	// A command that ends by itself wraps nothing, even with a timeout:
	// a minute's, since the timeout counts the sandbox's setup, which on
	// a loaded machine took more than timed's second (make test beside
	// make test-vm: "exit 1: signal: SIGKILL (killed: timeout)").
	lenient, _ := newSandbox(t, func(p *runtime.Policy) { p.Timeout = time.Minute })
	c := lenient.Command(context.Background(), "false")
	if err := c.Run(); errors.Unwrap(err) != nil || errors.Is(err, runtime.ErrTimeout) {
		t.Errorf("exit 1: %v wraps %v", err, errors.Unwrap(err))
	}

}

func TestErrTimeout(t *testing.T) {
	var te interface{ Timeout() bool }
	if !errors.Is(runtime.ErrTimeout, context.DeadlineExceeded) || !errors.As(runtime.ErrTimeout, &te) || !te.Timeout() {
		t.Errorf("ErrTimeout %v: not a deadline or no Timeout() true", runtime.ErrTimeout)
	}
	if errors.Is(context.DeadlineExceeded, runtime.ErrTimeout) {
		t.Error("context.DeadlineExceeded matches ErrTimeout")
	}
}

func TestStartWaitMisuse(t *testing.T) {
	sb, _ := newSandbox(t)
	c := sb.Command(context.Background(), "true")
	if err := c.Wait(); err == nil {
		t.Error("Wait before Start: nil")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err == nil {
		t.Error("second Start: nil")
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err == nil {
		t.Error("second Wait: nil")
	}
}

func TestConcurrent(t *testing.T) {
	sb, _ := newSandbox(t)
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([][]byte, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := sb.Command(context.Background(), "sh", "-c", "echo $0", strconv.Itoa(i))
			outs[i], errs[i] = c.Output()
		}()
	}
	wg.Wait()
	for i := range n {
		if want := strconv.Itoa(i) + "\n"; errs[i] != nil || string(outs[i]) != want {
			t.Errorf("command %d: %q, %v; want %q", i, outs[i], errs[i], want)
		}
	}
}

func TestEnvironment(t *testing.T) {
	const secret = "HUTCH_TEST_SECRET"
	t.Setenv(secret, "host-value-must-not-leak")
	sb, _ := newSandbox(t, func(p *runtime.Policy) {
		p.Env = []string{"FROM_POLICY=p", "OVERRIDDEN=policy"}
	})
	c := sb.Command(context.Background(), "sh", "-c",
		`printf '%s|%s|%s|%s|%s|%s\n' "$HOME" "$FROM_CMD" "$FROM_POLICY" "$OVERRIDDEN" "${HUTCH_TEST_SECRET-unset}" "$HUTCH_SANDBOX"`)
	c.Env = []string{"FROM_CMD=hello world", "OVERRIDDEN=cmd"}
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.Home + "|hello world|p|cmd|unset|1\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}

	out, err = sb.Command(context.Background(), "env").Output()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(secret)) {
		t.Errorf("host variable reached the command:\n%s", out)
	}
	// HOME is a fresh, writable, private directory.
	out, err = sb.Command(context.Background(), "sh", "-c", `cd && pwd && ls -A | wc -l && touch f`).Output()
	if err != nil || string(out) != runtime.Home+"\n0\n" {
		t.Errorf("home: %q, %v", out, err)
	}
}

// TestDir: the working directory may be anywhere in the workspace and the
// writable paths, symlinks included, and starts resolved. (Outside them it
// is refused: TestStartRefusesBadCommand.)
func TestDir(t *testing.T) {
	extra := t.TempDir()
	sb, ws := newSandbox(t, func(p *runtime.Policy) { p.Writable = []string{extra} })
	if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b", filepath.Join(ws, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(extra, filepath.Join(ws, "to-extra")); err != nil {
		t.Fatal(err)
	}
	extra, _ = filepath.EvalSymlinks(extra)
	tests := []struct{ dir, want string }{
		{"", ws},
		{"a/b", filepath.Join(ws, "a/b")},
		{"a/../a", filepath.Join(ws, "a")},
		{filepath.Join(ws, "a"), filepath.Join(ws, "a")},
		{"in", filepath.Join(ws, "a/b")},
		{"in/..", filepath.Join(ws, "a")},
		{extra, extra},
		{"to-extra", extra},
	}
	for _, tt := range tests {
		c := sb.Command(context.Background(), "pwd")
		c.Dir = tt.dir
		out, err := c.Output()
		if err != nil || string(out) != tt.want+"\n" {
			t.Errorf("Dir %q: %q, %v; want %q", tt.dir, out, err, tt.want)
		}
	}

	// A directory that does not exist fails setup.
	c := sb.Command(context.Background(), "pwd")
	c.Dir = "missing"
	err := c.Run()
	var se *runtime.SetupError
	if !errors.As(err, &se) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing Dir: %v, want *SetupError matching fs.ErrNotExist", err)
	}
}

func TestWorkspaceWritable(t *testing.T) {
	sb, ws := newSandbox(t)
	out, err := sb.Command(context.Background(), "sh", "-c", "echo data > new.txt && cat new.txt; { echo x > /etc/hutch-unit-test; } 2>/dev/null && echo WROTE-ETC; true").CombinedOutput()
	if err != nil || string(out) != "data\n" {
		t.Errorf("out %q, %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "data\n" {
		t.Errorf("host sees %q, %v", b, err)
	}
	if _, err := os.Stat("/etc/hutch-unit-test"); err == nil {
		os.Remove("/etc/hutch-unit-test")
		t.Error("the command wrote /etc on the host")
	}
}

func TestResultString(t *testing.T) {
	tests := []struct {
		r    runtime.Result
		want string
	}{
		{runtime.Result{}, "exit status 0"},
		{runtime.Result{ExitCode: 3}, "exit status 3"},
		{runtime.Result{ExitCode: -1, Signal: syscall.SIGTERM}, "signal: SIGTERM"},
		{runtime.Result{ExitCode: -1, Signal: syscall.SIGKILL, Killed: true, KillReason: runtime.KilledTimeout}, "signal: SIGKILL (killed: timeout)"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	var nilResult *runtime.Result
	if nilResult.Success() {
		t.Error("nil Result reports success")
	}
}

// TestUnixSocketLayerReported: every Result says whether the unix-sockets
// layer held and by which mechanism; a policy that skips it gets it listed
// as skipped, never silently absent.
func TestUnixSocketLayerReported(t *testing.T) {
	for _, skip := range []bool{false, true} {
		sb, _ := newSandbox(t, func(p *runtime.Policy) {
			if skip {
				p.SkipLayers = []runtime.Layer{runtime.LayerUnixSockets}
			}
		})
		c := sb.Command(context.Background(), "true")
		if err := c.Run(); err != nil {
			t.Fatalf("skip=%v: %v", skip, err)
		}
		r := c.Result
		enforced := slices.Contains(r.Layers, runtime.LayerUnixSockets)
		skipped := slices.ContainsFunc(r.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerUnixSockets })
		switch {
		case skip && (enforced || !skipped || r.UnixSocketWall != ""):
			t.Errorf("skipped by policy: layers %v, skipped %v, wall %q", r.Layers, r.Skipped, r.UnixSocketWall)
		case !skip && (!enforced || skipped || (r.UnixSocketWall != "landlock" && r.UnixSocketWall != "seccomp-notify")):
			t.Errorf("default policy: layers %v, skipped %v, wall %q", r.Layers, r.Skipped, r.UnixSocketWall)
		}
	}
}

// TestPid: Pid names the command as the host sees it (its command line,
// read from the host's /proc), 0 before Start and after Wait, in a pid
// namespace of its own and at level landlock, which has none.
func TestPid(t *testing.T) {
	for _, simulate := range []string{"", "no-userns"} {
		t.Run("simulate="+simulate, func(t *testing.T) {
			if simulate != "" {
				if landlock.ABI() < 1 {
					t.Skip("no Landlock: level landlock is out of reach")
				}
				t.Setenv("HUTCH_SIMULATE", simulate)
			}
			sb, _ := newSandbox(t, func(p *runtime.Policy) {
				if simulate != "" {
					p.MinLevel = runtime.LevelLandlock
				}
			})
			defer sb.Close()
			token := fmt.Sprintf("3600.%09d", time.Now().UnixNano()%1e9)
			c := sb.Command(context.Background(), "sleep", token)
			if pid := c.Pid(); pid != 0 {
				t.Errorf("Pid before Start = %d", pid)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pid := c.Pid()
			// The init hears of the exec once the new program's memory
			// is in place, a moment before the kernel fills in its
			// command line: it may read empty at first.
			var b []byte
			var err error
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if b, err = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || len(b) > 0 {
					break
				}
			}
			if err != nil || string(b) != "sleep\x00"+token+"\x00" {
				t.Errorf("Pid %d (simulate %q): the host's /proc says command line %q (%v), want sleep %s", pid, simulate, b, err, token)
			}
			if err := c.Stop(nil); err != nil {
				t.Fatal(err)
			}
			_ = c.Wait()
			if pid := c.Pid(); pid != 0 {
				t.Errorf("Pid after Wait = %d", pid)
			}
		})
	}
}

// TestUnsandboxedNeedsConsent: Policy.Unsandboxed alone is refused,
// naming the field; with AllowUnsandboxed the command runs as a plain
// process (it reaches a file outside every writable tree, on the host)
// and its Result says so.
func TestUnsandboxedNeedsConsent(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	p := runtime.DefaultPolicy(ws)
	p.Unsandboxed = true
	_, err := runtime.New(p)
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Unsandboxed" {
		t.Fatalf("New without consent: %v", err)
	}
	p.AllowUnsandboxed = true
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	target := filepath.Join(out, "written")
	c := sb.Command(context.Background(), "sh", "-c", "echo $PWD > "+target+"; exit 3")
	err = c.Run()
	var ee *runtime.ExitError
	if !errors.As(err, &ee) || c.Result.ExitCode != 3 || !c.Result.Unsandboxed || c.Result.Level != runtime.LevelUnsandboxed {
		t.Errorf("Run: %v, Result %+v", err, c.Result)
	}
	if b, err := os.ReadFile(target); err != nil || strings.TrimSpace(string(b)) != ws {
		t.Errorf("the host's file: %q, %v; want the workspace as the command's directory", b, err)
	}
	if _, err := sb.ReadFile("x", runtime.ReadOptions{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("the file door of an unsandboxed Sandbox: %v", err)
	}
}
