//go:build linux

package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// refusedCLI runs hutch with args, a command that would leave a trace on
// the host if it ran, and checks from the host that it was refused with
// exit 125 and a message holding each of want, within limit, and that
// the command never ran.
func refusedCLI(t *testing.T, limit time.Duration, args []string, want ...string) {
	t.Helper()
	trace := filepath.Join(dir(t, "trace-"), "ran")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, hutchBin, append(args, "--", "sh", "-c", "echo RAN; touch "+trace+" 2>/dev/null; true")...)
	start := time.Now()
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Errorf("hutch %q: still running after %v", args, time.Since(start).Round(time.Millisecond))
		return
	case !errors.As(err, &ee) || ee.ExitCode() != 125:
		t.Errorf("hutch %q: %v, want exit 125:\n%s", args, err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("hutch %q: the error does not say %q:\n%s", args, w, out)
		}
	}
	if strings.Contains(string(out), "RAN") {
		t.Errorf("hutch %q: the command ran:\n%s", args, out)
	}
	if _, err := os.Stat(trace); err == nil {
		t.Errorf("hutch %q: host: the command left %s", args, trace)
	}
}

// TestKernelTreeWorkspaceRefused: /sys, /proc, /dev and paths in them (by
// name or through a symlink) are refused as the workspace as they are as
// writable paths, and so is /tmp, which holds the sandbox's private HOME;
// through the CLI (naming --workspace) and the library (naming
// Workspace), before anything starts.
func TestKernelTreeWorkspaceRefused(t *testing.T) {
	link := filepath.Join(dir(t, "link-"), "shm")
	must(os.Symlink("/dev/shm", link))
	trees := []string{"/sys", "/sys/fs/cgroup", "/proc", "/proc/self", "/proc/self/cwd", "/dev", "/dev/shm", link, "/tmp"}
	for _, k := range trees {
		refusedCLI(t, 30*time.Second, []string{"run", "--workspace", k}, "--workspace "+k+": ")
		refusedCLI(t, 30*time.Second, []string{"run", "--workspace", dir(t, "ws-"), "--write", k}, "--write "+k+": ")
	}
	before := spawn.Default().Spawned()
	for _, k := range trees {
		sb, err := runtime.New(runtime.DefaultPolicy(k))
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Workspace" {
			t.Errorf("New(Workspace %s) = %v, want a PolicyError for Workspace", k, err)
		}
		if sb != nil {
			sb.Close()
		}
	}
	if after := spawn.Default().Spawned(); after != before {
		t.Errorf("refused workspaces reached the spawn server: %d spawn requests", after-before)
	}
}

// TestBadNumbersRefused: every numeric flag refuses what is not a number,
// negative, out of range or too small to mean anything, naming the flag;
// nothing starts, so nothing degrades (--pids 50 --cpus NaN once ran with
// rlimits only and left a fork bomb's processes on the host).
func TestBadNumbersRefused(t *testing.T) {
	ws := dir(t, "ws-")
	cases := [][]string{
		{"--cpus", "NaN"}, {"--cpus", "Inf"}, {"--cpus", "-Inf"}, {"--cpus", "-1"},
		{"--cpus", "0.0001"}, {"--cpus", "1e300"}, {"--cpus", "4097"},
		{"--pids", "-1"}, {"--pids", "1"}, {"--pids", "4194305"}, {"--pids", "99999999999"}, {"--pids", "x"},
		{"--memory", "-1"}, {"--memory", "1"}, {"--memory", "1MiB"}, {"--memory", "9223372036854775807"},
		{"--memory", "NaN"}, {"--memory", "1.5XiB"}, {"--memory", "99999999999P"},
		{"--tmp-size", "-1"}, {"--tmp-size", "1"}, {"--tmp-size", "9223372036854775807"}, {"--tmp-size", "Inf"},
		{"--output-limit", "-1"}, {"--output-limit", "9223372036854775807"}, {"--output-limit", "NaN"},
		{"--timeout", "-1s"}, {"--timeout", "1ns"}, {"--timeout", "NaN"},
	}
	for _, c := range cases {
		args := append([]string{"run", "--workspace", ws, "--pids", "50"}, c...)
		refusedCLI(t, 30*time.Second, args, c[0]+" "+c[1]+": ")
	}
	// The case of the report, with a fork bomb as the command: refused, no
	// process of it on the host.
	arg := uniqueSleep()
	res := runCLIArgs(t, "run", "--workspace", ws, "--pids", "50", "--cpus", "NaN", "--timeout", "5s", "--",
		"sh", "-c", "b() { sleep "+arg+" & b | b & }; b; sleep "+arg)
	if res.code != 125 || !strings.Contains(res.stderr, "--cpus") {
		t.Errorf("--cpus NaN: %s", res)
	}
	if pids := procsWithArg(arg); len(pids) > 0 {
		t.Errorf("host: --cpus NaN left %d processes", len(pids))
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// TestSeccompProfileNotRegularRefused: --seccomp takes only a regular file
// of sensible size; /dev/zero, a FIFO with no writer, a directory and a
// huge (sparse) file are refused at once, naming the flag.
func TestSeccompProfileNotRegularRefused(t *testing.T) {
	ws := dir(t, "ws-")
	d := dir(t, "prof-")
	fifo := filepath.Join(d, "fifo")
	must(syscall.Mkfifo(fifo, 0o644))
	huge := filepath.Join(d, "huge.json")
	must(os.WriteFile(huge, []byte("{}"), 0o644))
	must(os.Truncate(huge, 1<<30))
	for _, p := range []struct{ path, why string }{
		{"/dev/zero", "not a regular file"},
		{fifo, "not a regular file"},
		{d, "not a regular file"},
		{huge, "more than"},
	} {
		refusedCLI(t, 5*time.Second, []string{"run", "--workspace", ws, "--seccomp", p.path}, "--seccomp", p.why)
	}
}

// TestDirOutsideWritableRefused: a command's working directory must lie in
// the workspace or a writable path, symlinks resolved; outside them it is
// refused naming Cmd.Dir and where it pointed, and nothing runs. Inside,
// the command starts there (the host reads what it wrote).
func TestDirOutsideWritableRefused(t *testing.T) {
	ws := dir(t, "ws-")
	extra := dir(t, "extra-")
	must(os.MkdirAll(filepath.Join(ws, "sub", "deep"), 0o755))
	must(os.Symlink("/etc", filepath.Join(ws, "etc")))
	must(os.Symlink("sub/deep", filepath.Join(ws, "in")))
	must(os.Symlink(filepath.Dir(ws), filepath.Join(ws, "up")))
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Writable = []string{extra} })
	defer sb.Close()
	ctx := context.Background()

	refused := []struct{ dir, where string }{
		{"/etc", "/etc"},
		{"/", "/"},
		{"../..", filepath.Dir(filepath.Dir(ws))},
		{"etc", "/etc"},
		{"etc/ssl", "/etc/ssl"},
		{"up", filepath.Dir(ws)},
		{"/proc/self/cwd", "/proc"},
	}
	before := spawn.Default().Spawned()
	for _, r := range refused {
		c := sb.Command(ctx, "sh", "-c", "pwd > "+filepath.Join(ws, "ran"))
		c.Dir = r.dir
		err := c.Run()
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Cmd.Dir" || !strings.Contains(pe.Reason, r.where) {
			t.Errorf("Dir %q: %v, want a PolicyError for Cmd.Dir saying %s", r.dir, err, r.where)
		}
	}
	if after := spawn.Default().Spawned(); after != before {
		t.Errorf("refused directories reached the spawn server: %d spawn requests", after-before)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("host: a command with a refused Dir ran")
	}

	accepted := []struct{ dir, want string }{
		{"", ws},
		{"sub", filepath.Join(ws, "sub")},
		{"in", filepath.Join(ws, "sub", "deep")},
		{filepath.Join(ws, "sub", "deep"), filepath.Join(ws, "sub", "deep")},
		{extra, extra},
	}
	for i, a := range accepted {
		out := filepath.Join(ws, "pwd-"+string(rune('a'+i)))
		c := sb.Command(ctx, "sh", "-c", "pwd > "+out)
		c.Dir = a.dir
		if err := c.Run(); err != nil {
			t.Errorf("Dir %q: %v", a.dir, err)
			continue
		}
		if b, err := os.ReadFile(out); err != nil || string(b) != a.want+"\n" {
			t.Errorf("Dir %q: host reads %q, %v; want %q", a.dir, b, err, a.want)
		}
	}
}

// TestUnreachablePathSaysPermissionDenied: a workspace or --write path the
// user may not reach is refused as such, not as one that does not exist
// (the remedies differ). As root the CLI runs as an unprivileged uid, for
// which a root-only directory is out of reach; otherwise the directory is
// made unsearchable.
func TestUnreachablePathSaysPermissionDenied(t *testing.T) {
	locked := dir(t, "locked-")
	ws := dir(t, "ws-")
	for _, d := range []string{"ws", "w"} {
		must(os.Mkdir(filepath.Join(locked, d), 0o755))
	}
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		must(os.Chmod(locked, 0o700))
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	} else {
		must(os.Chmod(locked, 0))
		t.Cleanup(func() { os.Chmod(locked, 0o755) })
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--workspace", filepath.Join(locked, "ws")}, "--workspace"},
		{[]string{"--workspace", ws, "--write", filepath.Join(locked, "w")}, "--write"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c := exec.CommandContext(ctx, hutchBin, append(append([]string{"run"}, tc.args...), "--", "true")...)
		c.Dir = "/"
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := c.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 {
			t.Errorf("hutch %q: %v, want exit 125:\n%s", tc.args, err, out)
		}
		if !strings.Contains(string(out), "permission denied") || !strings.Contains(string(out), tc.flag) || strings.Contains(string(out), "does not exist") {
			t.Errorf("hutch %q: want a refusal of %s for permission denied:\n%s", tc.args, tc.flag, out)
		}
	}
}
