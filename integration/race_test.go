//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// TestMountTargetSymlinkSwap covers CVE-2021-30465: a path the policy
// makes writable (or masks) is swapped for a symlink to somewhere else
// after New validated it, by a previous command in the same workspace.
// hutch must refuse the symlink rather than bind through it; the host
// checks that nothing was written outside and nothing secret was read.
func TestMountTargetSymlinkSwap(t *testing.T) {
	ws := dir(t, "ws-")
	outside := dir(t, "outside-")
	must(os.MkdirAll(filepath.Join(ws, "build", "out"), 0o755))
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Writable = []string{"build/out"} })

	// A first command swaps the writable directory for a symlink. It cannot
	// remove build/out itself (a mount point: EBUSY), but it can move its
	// parent away and put a symlink where build/out was.
	swap := "mv build moved && mkdir build && ln -s " + outside + " build/out"
	if out, err := sb.Command(context.Background(), "sh", "-c", swap).CombinedOutput(); err != nil {
		t.Fatalf("swap: %v\n%s", err, out)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "build", "out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("host: the swap did not leave a symlink: %v", err)
	}
	// The next command would write through it if the bind followed it.
	err := sb.Command(context.Background(), "sh", "-c", "echo pwned > build/out/x").Run()
	var se *runtime.SetupError
	if !errors.As(err, &se) || se.Layer != runtime.LayerFilesystem {
		t.Errorf("want a filesystem SetupError for a symlinked mount target, got %v", err)
	}
	if !errors.Is(err, unix.ELOOP) {
		t.Errorf("want ELOOP, got %v", err)
	}
	// The CLI validates afresh on every run: there the symlink is seen at
	// validation, and refused there.
	res := sh(t, ws, "echo pwned > build/out/y", "--write", "build/out")
	if res.code != 125 || !strings.Contains(res.stderr, "--write build/out: ") {
		t.Errorf("CLI: want exit 125 naming --write build/out:\n%s", res)
	}
	for _, n := range []string{"x", "y"} {
		if _, err := os.Stat(filepath.Join(outside, n)); err == nil {
			t.Fatalf("host: a write went through the swapped symlink into %s", outside)
		}
	}
}

// TestMaskTargetSymlinkSwap: the workspace's .env is swapped for a
// symlink to a non-secret file; the mask must not land on the symlink's
// target nor be skipped silently in a way that exposes the secret.
func TestMaskTargetSymlinkSwap(t *testing.T) {
	ws := dir(t, "ws-")
	const secret = "HUTCH-IT-SWAP-SECRET-11aa"
	must(os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "sub", ".env"), []byte(secret), 0o644))
	sb := newSandbox(t, ws)
	// Move the secret away and leave a symlink in its place: the pin on
	// sub makes the rename fail, and a symlink at the masked path is
	// refused rather than followed.
	out, _ := sb.Command(context.Background(), "sh", "-c", "mv sub sub2; mv sub/.env sub/moved; ln -sf /etc/hostname sub/.env; cat sub/.env sub2/.env sub/moved").CombinedOutput()
	if strings.Contains(string(out), secret) {
		t.Fatalf("secret read after a swap attempt:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", ".env")); err != nil || string(b) != secret {
		t.Fatalf("host: the masked file was moved or changed: %q %v", b, err)
	}
}

// TestSessionKeyringIsolated: a key in the host's session keyring is not
// readable from the sandbox (its session keyring is a fresh one).
func TestSessionKeyringIsolated(t *testing.T) {
	ws := dir(t, "ws-")
	const payload = "HUTCH-IT-KEYRING-SECRET-c0de"
	// Join a fresh session keyring for this test process first, so the
	// test does not depend on the machine's login keyring. The keyring is
	// part of the calling thread's credentials: join, add and read on one
	// thread (never unlocked, so the thread ends with the test instead of
	// going back to the scheduler with a keyring of its own).
	goruntime.LockOSThread()
	if _, err := unix.KeyctlJoinSessionKeyring("hutch-it"); err != nil {
		t.Skipf("keyrings unavailable: %v", err)
	}
	id, err := unix.AddKey("user", "hutch-it-key", []byte(payload), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Skipf("add_key: %v", err)
	}
	// Control: the host itself can read it.
	buf := make([]byte, 128)
	if n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0); err != nil || string(buf[:n]) != payload {
		// Then there is nothing to compare the sandbox's view with.
		t.Skipf("the host cannot read its own key back here: %v", err)
	}
	script := fmt.Sprintf(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(128)
for kid in (%d, -3):
    n = libc.syscall(250, 11, kid, buf, 128)  # keyctl(KEYCTL_READ, id, buf, len)
    print(kid, n, buf.raw[:max(n, 0)], ctypes.get_errno())
n = libc.syscall(250, 1, "hutch-it".encode(), 0)  # KEYCTL_JOIN_SESSION_KEYRING by name
print("join", n, ctypes.get_errno())
n = libc.syscall(250, 11, %d, buf, 128)
print("after join", n, buf.raw[:max(n, 0)])
`, id, id)
	res := runCLI(t, ws, nil, "python3", "-c", script)
	if strings.Contains(res.stdout+res.stderr, payload) {
		t.Errorf("host session key readable in the sandbox:\n%s", res)
	}
	if res.code != 0 {
		t.Errorf("probe failed:\n%s", res)
	}
}

// TestRunSocketsHidden: sockets under /run (systemd, dbus, docker) are
// unreachable: /run is an empty directory in the sandbox.
func TestRunSocketsHidden(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root can bind a socket in /run")
	}
	ws := dir(t, "ws-")
	p := filepath.Join("/run", "hutch-it-"+filepath.Base(ws)+".sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	res := runCLI(t, ws, nil, "python3", "-c", "import socket; s=socket.socket(socket.AF_UNIX); s.connect('"+p+"'); print('CONNECTED')")
	select {
	case <-accepted:
		t.Errorf("host: the /run socket accepted a connection from the sandbox:\n%s", res)
	default:
	}
	if res.code == 0 {
		t.Errorf("connect to %s succeeded:\n%s", p, res)
	}
}

// TestConcurrentCommands: hundreds of commands at once from many
// goroutines, each with its own output and its own workspace file, checked
// on the host.
func TestConcurrentCommands(t *testing.T) {
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := sb.Command(context.Background(), "sh", "-c", fmt.Sprintf("echo %d > f%d; echo %d", i, i, i)).Output()
			if err != nil {
				errs <- fmt.Errorf("command %d: %v", i, err)
				return
			}
			if strings.TrimSpace(string(out)) != fmt.Sprint(i) {
				errs <- fmt.Errorf("command %d got output %q", i, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		b, err := os.ReadFile(filepath.Join(ws, fmt.Sprintf("f%d", i)))
		if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(i) {
			t.Errorf("host: f%d = %q, %v", i, b, err)
		}
	}
}

// TestBadInputStartsNothing: invalid policy or command input is refused
// with an error naming the flag and the value as typed, before any process
// exists.
func TestBadInputStartsNothing(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.MkdirAll(filepath.Join(ws, "secret", "sub"), 0o755))
	cases := []struct {
		name  string
		args  []string
		field string
	}{
		{"missing workspace", []string{"run", "--workspace", filepath.Join(ws, "nope"), "--", "true"}, "--workspace " + filepath.Join(ws, "nope") + ": does not exist"},
		{"writable under denied", []string{"run", "--workspace", ws, "--deny", "secret", "--write", "secret/sub", "--", "true"}, "--write secret/sub: "},
		{"refused env", []string{"run", "--workspace", ws, "--env", "LD_PRELOAD=/x.so", "--", "true"}, "--env LD_PRELOAD=/x.so: may not be set"},
		{"empty command", []string{"run", "--workspace", ws, "--", ""}, `run: the command is ""`},
		{"no command", []string{"run", "--workspace", ws}, "no command"},
		{"control character in path", []string{"run", "--workspace", ws, "--write", "a\x01b", "--", "true"}, `--write "a\x01b": contains a control character`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := runCLIArgs(t, c.args...)
			if res.code != 125 {
				t.Errorf("exit %d, want 125:\n%s", res.code, res)
			}
			if !strings.Contains(res.stderr, c.field) {
				t.Errorf("error does not name %q:\n%s", c.field, res)
			}
		})
	}
	// Library: the same through runtime.New and Start; no spawn request
	// leaves the process.
	before := spawn.Default().Spawned()
	_, err := runtime.New(runtime.Policy{Workspace: "relative/path"})
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Workspace" {
		t.Errorf("relative workspace: %v", err)
	}
	_, err = runtime.New(runtime.Policy{Workspace: ws + "\x00x"})
	if !errors.As(err, &pe) || pe.Field != "Workspace" {
		t.Errorf("NUL workspace: %v", err)
	}
	sb := newSandbox(t, ws)
	c := sb.Command(context.Background(), "true")
	c.Env = []string{"NODE_OPTIONS=--require /x.js"}
	if err := c.Run(); !errors.As(err, &pe) || pe.Field != "Cmd.Env[NODE_OPTIONS]" {
		t.Errorf("refused env: %v", err)
	}
	if after := spawn.Default().Spawned(); after != before {
		t.Errorf("bad input reached the spawn server: %d spawn requests", after-before)
	}
}
