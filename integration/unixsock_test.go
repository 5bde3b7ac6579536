//go:build linux

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// The default policy promises that no host unix socket outside the
// writable set (the workspace, --write paths, the sandbox's private /tmp
// and /dev/shm) can be reached from inside, whenever and however it was
// bound. The tests below each try one way around that promise and check
// the verdict on the host: a host listener's accept count, a marker file a
// host process writes when it accepts, or a file a sandboxed server writes
// into the workspace.

// sandboxConnects runs sockConnectScript in a sandbox on ws against paths
// (connect and send to each) and fails t unless the command ran to its end.
// What it says is logged, never believed: the callers' verdicts are the
// host's.
func sandboxConnects(t *testing.T, ws string, flags []string, paths ...string) {
	t.Helper()
	res := runCLI(t, ws, flags, append([]string{sockPython(t), "-c", sockConnectScript, ws}, paths...)...)
	if res.code != 0 {
		t.Errorf("the command did not run to its end (exit %d):\n%s", res.code, res)
	}
	t.Logf("sandbox says: %s", readReport(ws))
}

// sockPython is the python3 the socket tests run, both on the host (where
// it may run as another uid, which cannot enter a per-user shim directory
// such as pyenv's) and in sandboxes (whose root is the host's).
func sockPython(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/usr/bin/python3"); err == nil && fi.Mode().IsRegular() {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	return p
}

// sockDir makes a fresh host directory for sockets, outside the writable
// set and usable by every uid.
func sockDir(t *testing.T) string {
	t.Helper()
	d := dir(t, "sock-")
	must(os.Chmod(d, 0o755))
	return d
}

func sockExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// hostUnix is a stream listener in the test process that counts the
// connections it accepts and keeps the first line each one sent.
type hostUnix struct {
	path     string
	l        net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	lines    []string
}

func listenUnix(t *testing.T, path string) *hostUnix {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(path, 0o777)
	h := &hostUnix{path: path, l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				h.mu.Lock()
				h.lines = append(h.lines, line)
				h.mu.Unlock()
			}()
		}
	}()
	return h
}

// settle gives connections still in the backlog time to be accepted, then
// returns the count. A connection the sandbox completed before it exited
// is counted: the kernel queues it whether or not Accept ran yet.
func (h *hostUnix) settle() int {
	waitFor(1500*time.Millisecond, func() bool { return h.accepted.Load() > 0 })
	return int(h.accepted.Load())
}

func (h *hostUnix) receivedLines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// startCLI starts `hutch run --workspace ws [flags] -- cmd...` and returns
// a function that waits for it (a minute at most).
func startCLI(t *testing.T, ws string, flags []string, cmd ...string) func() cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	args := append(append(append([]string{"run", "--workspace", ws}, flags...), "--"), cmd...)
	c := exec.CommandContext(ctx, hutchBin, args...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		cancel()
		t.Fatalf("hutch: %v", err)
	}
	done := make(chan cliResult, 1)
	go func() {
		defer cancel()
		err := c.Wait()
		r := cliResult{stdout: out.String(), stderr: errb.String(), code: -1}
		if err == nil {
			r.code = 0
		} else if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else {
			r.stderr += "\n(wait: " + err.Error() + ")"
		}
		done <- r
	}()
	var once sync.Once
	var res cliResult
	wait := func() cliResult {
		once.Do(func() { res = <-done })
		return res
	}
	t.Cleanup(func() { wait() })
	return wait
}

// waitMarker waits for a file the sandboxed command writes into the
// workspace to say it is running; on timeout it fails with the command's
// output.
func waitMarker(t *testing.T, path string, wait func() cliResult) {
	t.Helper()
	if !waitFor(30*time.Second, func() bool { return sockExists(path) }) {
		t.Fatalf("the sandboxed command never wrote %s:\n%s", path, wait())
	}
}

// serverScript is a host unix stream server: it chdirs into argv[1], runs
// pre, binds and listens on each of argv[2:] (relative names are relative
// to argv[1]; missing parent directories are made), writes "ready", and on
// each accept writes a marker file accepted-N (then fills it with what the
// peer sent) into argv[1].
func serverScript(pre string) string {
	return `import os, select, socket, sys
d = sys.argv[1]
os.chdir(d)
` + pre + `
socks = []
for name in sys.argv[2:]:
    parent = os.path.dirname(name)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    s.listen(16)
    socks.append(s)
open('ready', 'w').close()
n = 0
while True:
    r, _, _ = select.select(socks, [], [])
    for s in r:
        c, _ = s.accept()
        n += 1
        m = os.path.join(d, 'accepted-%d' % n)
        open(m, 'w').close()
        c.settimeout(2)
        try:
            data = c.recv(64)
        except OSError:
            data = b''
        open(m, 'wb').write(data)
        c.close()
`
}

// startHostServer runs argv (ending in a serverScript invocation whose
// directory is d) on the host, optionally as uid/gid 65534 with no
// supplementary groups (what setpriv --reuid=65534 --regid=65534
// --clear-groups does), and waits for its "ready". It returns an error,
// with the process's stderr, when the process ended before that.
func startHostServer(t *testing.T, d string, asNobody bool, argv ...string) error {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	var errb strings.Builder
	c.Stderr = &errb
	if asNobody {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	if err := c.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = c.Process.Kill()
		<-exited
	})
	ready := filepath.Join(d, "ready")
	for end := time.Now().Add(20 * time.Second); !sockExists(ready); {
		select {
		case <-exited:
			return fmt.Errorf("%v exited before it was ready: %s", argv, strings.TrimSpace(errb.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("%v: not ready after 20s: %s", argv, strings.TrimSpace(errb.String()))
		}
	}
	return nil
}

// acceptMarkers waits a little for the host server's accept markers and
// returns them with what each peer sent.
func acceptMarkers(d string) []string {
	var got []string
	waitFor(1500*time.Millisecond, func() bool {
		m, _ := filepath.Glob(filepath.Join(d, "accepted-*"))
		return len(m) > 0
	})
	time.Sleep(100 * time.Millisecond) // let the server fill in what it read
	m, _ := filepath.Glob(filepath.Join(d, "accepted-*"))
	for _, f := range m {
		b, _ := os.ReadFile(f)
		got = append(got, fmt.Sprintf("%s (peer sent %q)", filepath.Base(f), b))
	}
	return got
}

// connectScript tries, for each absolute path in argv[2:], a stream
// connect and a send of "tag\n" (tag = the argument's index); argv[1] is
// the workspace, where it writes what it saw into report.
const sockConnectScript = `import os, socket, sys
ws = sys.argv[1]
out = []
for i, p in enumerate(sys.argv[2:]):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(p)
        s.sendall(b'conn%d\n' % i)
        s.close()
        out.append(p + ': connected and sent')
    except OSError as e:
        out.append(p + ': ' + repr(e))
open(os.path.join(ws, 'report'), 'w').write('\n'.join(out) + '\n')
`

func readReport(ws string) string {
	b, _ := os.ReadFile(filepath.Join(ws, "report"))
	return strings.TrimSpace(string(b))
}

// TestHostSocketBoundLater covers the snapshot's timing hole: a host
// socket bound after the command started is not in the snapshot of
// /proc/net/unix taken at start, so nothing masks it. The sandboxed
// command waits for the path to appear, then connects and sends; the host
// listener must accept nothing.
func TestHostSocketBoundLater(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	sock := filepath.Join(d, "late.sock")
	script := `import os, socket, sys, time
ws, p = sys.argv[1], sys.argv[2]
open(os.path.join(ws, 'running'), 'w').close()
end = time.time() + 15
while not os.path.exists(p) and time.time() < end:
    time.sleep(0.05)
seen = os.path.exists(p)
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(p)
    s.sendall(b'late\n')
    r = 'connected and sent'
except OSError as e:
    r = repr(e)
open(os.path.join(ws, 'report'), 'w').write('seen=%s %s\n' % (seen, r))
`
	wait := startCLI(t, ws, nil, py, "-c", script, ws, sock)
	waitMarker(t, filepath.Join(ws, "running"), wait)
	time.Sleep(1500 * time.Millisecond)
	h := listenUnix(t, sock)
	res := wait()
	if res.code != 0 {
		t.Errorf("the command did not run to its end (exit %d):\n%s", res.code, res)
	}
	t.Logf("sandbox says: %s", readReport(ws))
	if n := h.settle(); n != 0 {
		t.Errorf("host: %s, bound after the command started, accepted %d connection(s) from the sandbox (lines %q)", sock, n, h.receivedLines())
	}
}

// TestHostSocketRelativeBind covers sockets bound with a relative path:
// /proc/net/unix shows only the name given to bind ("r.sock"), which the
// snapshot cannot place, so the socket stays reachable both by its
// absolute path and by a relative connect from its directory.
func TestHostSocketRelativeBind(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	if err := startHostServer(t, d, false, py, "-c", serverScript(""), d, "r.sock"); err != nil {
		t.Fatal(err)
	}
	script := `import os, socket, sys
ws, d = sys.argv[1], sys.argv[2]
out = []
for tag, p in (('abs', os.path.join(d, 'r.sock')), ('rel', './r.sock')):
    try:
        if tag == 'rel':
            os.chdir(d)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(p)
        s.sendall(tag.encode() + b'\n')
        s.close()
        out.append(tag + ': connected and sent')
    except OSError as e:
        out.append(tag + ': ' + repr(e))
open(os.path.join(ws, 'report'), 'w').write('\n'.join(out) + '\n')
`
	res := runCLI(t, ws, nil, py, "-c", script, ws, d)
	if res.code != 0 {
		t.Errorf("the command did not run to its end (exit %d):\n%s", res.code, res)
	}
	t.Logf("sandbox says: %s", readReport(ws))
	if m := acceptMarkers(d); len(m) > 0 {
		t.Errorf("host: the socket bound as %q in %s accepted connections from the sandbox: %v", "r.sock", d, m)
	}
}

// TestHostSocketRenamed covers a socket renamed after bind: /proc/net/unix
// keeps the name it was bound with (a.sock), so the snapshot masks a path
// that no longer exists and leaves the socket's real path (b.sock) open.
func TestHostSocketRenamed(t *testing.T) {
	ws := dir(t, "ws-")
	d := sockDir(t)
	a, b := filepath.Join(d, "a.sock"), filepath.Join(d, "b.sock")
	h := listenUnix(t, a)
	must(os.Rename(a, b))
	sandboxConnects(t, ws, nil, b)
	if n := h.settle(); n != 0 {
		t.Errorf("host: the socket bound as %s and renamed to %s accepted %d connection(s) from the sandbox", a, b, n)
	}
}

// TestHostSocketRebound covers a socket replaced while the command runs:
// the mask over the old socket's path goes away with the unlinked file,
// and the new socket bound at the same path is reachable.
func TestHostSocketRebound(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	sock := filepath.Join(d, "s.sock")
	first := listenUnix(t, sock)
	script := `import os, socket, sys, time
ws, p = sys.argv[1], sys.argv[2]
open(os.path.join(ws, 'waiting'), 'w').close()
end = time.time() + 20
while not os.path.exists(os.path.join(ws, 'go')) and time.time() < end:
    time.sleep(0.05)
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(p)
    s.sendall(b'rebound\n')
    r = 'connected and sent'
except OSError as e:
    r = repr(e)
open(os.path.join(ws, 'report'), 'w').write(r + '\n')
`
	wait := startCLI(t, ws, nil, py, "-c", script, ws, sock)
	waitMarker(t, filepath.Join(ws, "waiting"), wait)
	first.l.Close()
	_ = os.Remove(sock)
	second := listenUnix(t, sock)
	must(os.WriteFile(filepath.Join(ws, "go"), nil, 0o644))
	res := wait()
	if res.code != 0 {
		t.Errorf("the command did not run to its end (exit %d):\n%s", res.code, res)
	}
	t.Logf("sandbox says: %s", readReport(ws))
	if n := second.settle(); n != 0 {
		t.Errorf("host: the socket re-bound at %s while the command ran accepted %d connection(s) from the sandbox", sock, n)
	}
	if n := first.accepted.Load(); n != 0 {
		t.Errorf("host: the first socket at %s accepted %d connection(s) from the sandbox", sock, n)
	}
}

// TestHostSocketOtherNetns covers sockets bound by a process in another
// network namespace: /proc/net/unix lists only the reader's namespace, so
// the snapshot never sees them, yet a pathname socket is found through the
// filesystem from any namespace.
func TestHostSocketOtherNetns(t *testing.T) {
	py := sockPython(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare not found")
	}
	ws := dir(t, "ws-")
	d := sockDir(t)
	flag := "-n"
	if os.Getuid() != 0 {
		flag = "-rn"
	}
	if err := startHostServer(t, d, false, unshare, flag, py, "-c", serverScript(""), d, "n.sock"); err != nil {
		t.Skipf("cannot bind a socket in another network namespace (unshare %s refused?): %v", flag, err)
	}
	sock := filepath.Join(d, "n.sock")
	if b, err := os.ReadFile("/proc/net/unix"); err == nil && strings.Contains(string(b), sock) {
		t.Logf("note: %s is listed in this namespace's /proc/net/unix", sock)
	}
	sandboxConnects(t, ws, nil, sock)
	if m := acceptMarkers(d); len(m) > 0 {
		t.Errorf("host: %s, bound in another network namespace, accepted connections from the sandbox: %v", sock, m)
	}
}

// TestHostDatagramSocket covers datagram sockets, which take a message
// without connect(): sendto() with an address from socket(AF_UNIX,
// SOCK_DGRAM), and from one end of a socketpair(AF_UNIX, SOCK_DGRAM),
// aimed at a host datagram socket bound before the command started and at
// one bound while it runs. Nothing may arrive.
func TestHostDatagramSocket(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	// Each host socket is read from the moment it is bound: what arrives
	// is recorded.
	var mu sync.Mutex
	var received []string
	listen := func(p string) {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(p, 0o777)
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 256)
			for {
				n, _, err := c.ReadFromUnix(buf)
				if err != nil {
					return
				}
				mu.Lock()
				received = append(received, fmt.Sprintf("%s received %q", p, buf[:n]))
				mu.Unlock()
			}
		}()
	}
	early, late := filepath.Join(d, "early.sock"), filepath.Join(d, "late.sock")
	listen(early)
	script := `import os, socket, sys, time
ws = sys.argv[1]
paths = sys.argv[2:]
open(os.path.join(ws, 'running'), 'w').close()
end = time.time() + 15
while not all(os.path.exists(p) for p in paths) and time.time() < end:
    time.sleep(0.05)
out = []
def attempt(name, f):
    try:
        f()
        out.append(name + ': sent')
    except OSError as e:
        out.append(name + ': ' + repr(e))
for p in paths:
    attempt(p + ' sendto', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'dgram-sendto', p))
    def pair():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(b'dgram-socketpair', p)
    attempt(p + ' socketpair sendto', pair)
    def conn():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.connect(p)
        s.send(b'dgram-connect')
    attempt(p + ' connect send', conn)
open(os.path.join(ws, 'report'), 'w').write('\n'.join(out) + '\n')
`
	wait := startCLI(t, ws, nil, py, "-c", script, ws, early, late)
	waitMarker(t, filepath.Join(ws, "running"), wait)
	time.Sleep(1500 * time.Millisecond)
	listen(late)
	res := wait()
	if res.code != 0 {
		t.Errorf("the command did not run to its end (exit %d):\n%s", res.code, res)
	}
	t.Logf("sandbox says: %s", readReport(ws))
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, r := range received {
		t.Errorf("host: the datagram socket %s from the sandbox", r)
	}
}

// TestSocketsInsideWritableWork: what the promise must not take away.
// Sockets in the writable set work: a host socket in the workspace or a
// --write path is reachable; a server in the sandbox can bind in /tmp,
// /dev/shm, the workspace and a --write path and its clients reach it;
// multiprocessing's manager (AF_UNIX in /tmp) round-trips.
func TestSocketsInsideWritableWork(t *testing.T) {
	py := sockPython(t)
	t.Run("host-socket-in-writable-set", func(t *testing.T) {
		ws := dir(t, "ws-")
		wdir := sockDir(t)
		hws := listenUnix(t, filepath.Join(ws, "h.sock"))
		hw := listenUnix(t, filepath.Join(wdir, "w.sock"))
		res := runCLI(t, ws, []string{"--write", wdir}, py, "-c", sockConnectScript, ws, hws.path, hw.path)
		if res.code != 0 {
			t.Errorf("exit %d:\n%s", res.code, res)
		}
		for i, h := range []*hostUnix{hws, hw} {
			want := fmt.Sprintf("conn%d\n", i)
			// The command has ended: what it sent is there, or never comes.
			if !waitFor(2*time.Second, func() bool { return len(h.receivedLines()) > 0 }) {
				t.Errorf("host: %s accepted %d connection(s) and received nothing; want one connection sending %q (sandbox says: %s)", h.path, h.accepted.Load(), want, readReport(ws))
				continue
			}
			time.Sleep(100 * time.Millisecond)
			if n, lines := h.accepted.Load(), h.receivedLines(); n != 1 || len(lines) != 1 || lines[0] != want {
				t.Errorf("host: %s accepted %d connection(s) sending %q; want one sending %q", h.path, n, lines, want)
			}
		}
	})
	t.Run("servers-in-sandbox", func(t *testing.T) {
		ws := dir(t, "ws-")
		wdir := sockDir(t)
		// Each is "bind path>connect path"; the last connects by a path
		// relative to the working directory (the workspace).
		paths := []string{"/tmp/s.sock", "/dev/shm/hutch-it-s.sock", filepath.Join(ws, "s.sock"), filepath.Join(wdir, "s.sock"), filepath.Join(ws, "r.sock") + ">./r.sock"}
		script := `import json, os, socket, sys, threading
ws = sys.argv[1]
paths = sys.argv[2:]
got, errs = {}, {}
def serve(s, p):
    try:
        c, _ = s.accept()
        c.settimeout(5)
        data = b''
        while not data.endswith(b'\n'):
            chunk = c.recv(64)
            if not chunk:
                break
            data += chunk
        got[p] = data.decode()
        c.close()
    except OSError as e:
        errs[p] = 'server: ' + repr(e)
threads = []
for p in paths:
    bind, _, conn = p.partition('>')
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(bind)
        s.listen(1)
    except OSError as e:
        errs[p] = 'bind: ' + repr(e)
        continue
    th = threading.Thread(target=serve, args=(s, p), daemon=True)
    th.start()
    threads.append(th)
    try:
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(5)
        c.connect(conn or bind)
        c.sendall(('via ' + p + '\n').encode())
        c.close()
    except OSError as e:
        errs[p] = 'client: ' + repr(e)
for th in threads:
    th.join(10)
json.dump({'got': got, 'errs': errs}, open(os.path.join(ws, 'served.json'), 'w'))
`
		res := runCLI(t, ws, []string{"--write", wdir}, append([]string{py, "-c", script, ws}, paths...)...)
		if res.code != 0 {
			t.Errorf("exit %d:\n%s", res.code, res)
		}
		var served struct{ Got, Errs map[string]string }
		b, err := os.ReadFile(filepath.Join(ws, "served.json"))
		if err != nil {
			t.Fatalf("host: no served.json in the workspace: %v\n%s", err, res)
		}
		if err := json.Unmarshal(b, &served); err != nil {
			t.Fatalf("served.json: %v: %s", err, b)
		}
		for _, p := range paths {
			if want := "via " + p + "\n"; served.Got[p] != want {
				t.Errorf("the server on %s received %q, want %q (error: %s)", p, served.Got[p], want, served.Errs[p])
			}
		}
	})
	t.Run("multiprocessing-manager", func(t *testing.T) {
		ws := dir(t, "ws-")
		script := `import os, sys
from multiprocessing.managers import BaseManager
class Calc:
    def double(self, x):
        return 2 * x
class M(BaseManager):
    pass
M.register('calc', callable=Calc)
if __name__ == '__main__':
    m = M(address='/tmp/hutch-it-mgr.sock', authkey=b'hutch')
    m.start()
    try:
        r = m.calc().double(21)
    finally:
        m.shutdown()
    open(os.path.join(sys.argv[1], 'manager.out'), 'w').write('%d\n' % r)
`
		res := runCLI(t, ws, nil, py, "-c", script, ws)
		if res.code != 0 {
			t.Errorf("exit %d:\n%s", res.code, res)
		}
		b, err := os.ReadFile(filepath.Join(ws, "manager.out"))
		if err != nil || strings.TrimSpace(string(b)) != "42" {
			t.Errorf("host: manager.out = %q, %v; want 42\n%s", b, err, res)
		}
	})
}

// forgedProcLine is a /proc/net/unix line naming path, in the kernel's
// format ("Num RefCount Protocol Flags Type St Inode Path").
func forgedProcLine(path string) string {
	return "0000000000000000: 00000002 00000000 00010000 0001 01 99999 " + path
}

// socketBinder says who binds the sockets of the forged-name tests: as
// root, uid 65534, another user than the one who runs hutch; otherwise the
// test's own uid (no other uid is available to it), which still shows that
// a user's socket names do not steer the sandbox.
func socketBinder(t *testing.T, d string) bool {
	t.Helper()
	if os.Getuid() != 0 {
		t.Logf("not root: the socket is bound by this test's own uid %d, not by another user", os.Getuid())
		return false
	}
	must(os.Chown(d, 65534, 65534))
	return true
}

// TestForgedSocketNameChangesNothing covers the parsing of /proc/net/unix,
// which prints socket names raw: a name holding a newline forges whole
// lines, and any user could have the sandbox mask files of the host (a
// denial of service, or a file that silently reads empty). Binaries and
// files the forged lines name must stay untouched in the sandbox.
func TestForgedSocketNameChangesNothing(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	asNobody := socketBinder(t, d)
	env := "/usr/bin/env"
	if !sockExists(env) {
		p, err := exec.LookPath("env")
		if err != nil || !filepath.IsAbs(p) {
			t.Skip("no env binary")
		}
		env = p
	}
	var plain string
	for _, f := range []string{"/etc/hostname", "/etc/os-release", "/etc/hutch-vm.conf", "/etc/passwd"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			plain = f
			break
		}
	}
	if plain == "" {
		t.Skip("no ordinary non-empty file in /etc to forge a line for")
	}
	want, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	// Relative names: the forged line is the whole path after the newline;
	// an absolute name would not fit in sun_path's 108 bytes.
	names := []string{"a\n" + forgedProcLine(env), "b\n" + forgedProcLine(plain)}
	for _, n := range names {
		if len(n) > 107 {
			t.Skipf("forged name too long for sun_path: %q", n)
		}
	}
	if err := startHostServer(t, d, asNobody, append([]string{py, "-c", serverScript(""), d}, names...)...); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/proc/net/unix"); err == nil {
		for _, n := range names {
			if !strings.Contains(string(b), n) {
				t.Logf("note: /proc/net/unix does not show the name %q raw", n)
			}
		}
	}
	r := runCLI(t, ws, nil, env, "true")
	if r.code != 0 {
		t.Errorf("`%s true` with a forged /proc/net/unix line naming %s: want exit 0:\n%s", env, env, r)
	}
	r = runCLI(t, ws, nil, "cat", plain)
	if r.code != 0 || r.stdout != string(want) {
		t.Errorf("`cat %s` with a forged /proc/net/unix line naming it: want exit 0 and the host's content %q:\n%s", plain, want, r)
	}
}

// TestSymlinkedSocketPathChangesNothing covers a socket bound through a
// symlinked directory: /proc/net/unix shows the path through the symlink,
// and masking that path fails the sandbox's setup (any user could keep
// everyone's sandboxes from starting). The command must run, and the
// socket must stay unreachable by either path.
func TestSymlinkedSocketPathChangesNothing(t *testing.T) {
	py := sockPython(t)
	ws := dir(t, "ws-")
	d := sockDir(t)
	asNobody := socketBinder(t, d)
	viaLink := filepath.Join(d, "L", "s.sock")
	pre := "os.mkdir('D')\nos.symlink('D', 'L')\n"
	if err := startHostServer(t, d, asNobody, py, "-c", serverScript(pre), d, viaLink); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/proc/net/unix"); err == nil && !strings.Contains(string(b), viaLink) {
		t.Logf("note: /proc/net/unix does not show %s", viaLink)
	}
	r := runCLI(t, ws, nil, "true")
	if r.code != 0 {
		t.Errorf("`true` with a socket bound at %s (through a symlink): want exit 0:\n%s", viaLink, r)
	}
	sandboxConnects(t, ws, nil, viaLink, filepath.Join(d, "D", "s.sock"))
	if m := acceptMarkers(d); len(m) > 0 {
		t.Errorf("host: the socket bound at %s accepted connections from the sandbox: %v", viaLink, m)
	}
}

// TestPoolSurvivesSocketChurn covers the pool's cost of the snapshot: any
// host socket bound or closed anywhere changes it, and a pooled init built
// with another snapshot is thrown away, so on a busy host prewarming
// never pays. With the host churning sockets, most commands must still
// run in a prewarmed init.
func TestPoolSurvivesSocketChurn(t *testing.T) {
	ws := dir(t, "ws-")
	d := sockDir(t)
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		// Each socket has a new name and lives ~20 ms, while the next one
		// is bound: a host where clients come and go.
		n := 0
		var prev net.Listener
		defer func() {
			if prev != nil {
				prev.Close()
			}
			churned <- n
		}()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			l, err := net.Listen("unix", filepath.Join(d, fmt.Sprintf("churn-%d.sock", n)))
			if err == nil {
				n++
			}
			if prev != nil {
				prev.Close()
			}
			prev = l
		}
	}()
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Prewarm = 2 })
	defer sb.Close()
	const runs, want = 30, 25
	prewarmed, notReady := 0, 0
	for i := range runs {
		if !waitFor(2*time.Second, func() bool { return sb.Prewarmed() > 0 }) {
			notReady++
		}
		cmd := sb.Command(context.Background(), "true")
		if err := cmd.Run(); err != nil {
			t.Errorf("command %d: %v", i, err)
		}
		if cmd.Result != nil && cmd.Result.Prewarmed {
			prewarmed++
		}
	}
	close(stop)
	n := <-churned
	t.Logf("%d of %d commands prewarmed; the pool was empty for 2s before %d of them; %d host sockets bound meanwhile", prewarmed, runs, notReady, n)
	if prewarmed < want {
		t.Errorf("only %d of %d commands ran in a prewarmed init while host sockets came and went; want at least %d", prewarmed, runs, want)
	}
}
