//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// TestHostProcessesInvisibleAndUnkillable: a host process can be neither
// seen nor signalled from the sandbox.
func TestHostProcessesInvisibleAndUnkillable(t *testing.T) {
	ws := dir(t, "ws-")
	arg := uniqueSleep()
	host := exec.Command("sleep", arg)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Process.Kill()
	pid := host.Process.Pid
	res := sh(t, ws, fmt.Sprintf("ls /proc/%d; kill -9 %d; kill -9 -1; pkill -9 sleep; ps ax 2>/dev/null; ls /proc", pid, pid))
	if strings.Contains(res.stdout, arg) {
		t.Errorf("host process visible:\n%s", res)
	}
	if err := host.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("host: the host process was killed from the sandbox: %v\n%s", err, res)
	}
	// The only pids visible inside are the sandbox's own, all small.
	if pids := strings.Fields(res.stdout); slices.Contains(pids, strconv.Itoa(pid)) {
		t.Errorf("host pid %d listed in the sandbox's /proc", pid)
	}
}

// TestNoLeakedFds covers CVE-2024-21626: a host fd left open without
// O_CLOEXEC must not reach the command. The host lists the command's
// /proc/<pid>/fd.
func TestNoLeakedFds(t *testing.T) {
	ws := dir(t, "ws-")
	// Deliberately leak: no O_CLOEXEC, a directory fd outside the sandbox.
	leak, err := unix.Open(scratchBase, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leak)
	sb := newSandbox(t, ws)
	arg := uniqueSleep()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := sb.Command(ctx, "sleep", arg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	var pids []int
	if !waitFor(5*time.Second, func() bool { pids = procsWithArg(arg); return len(pids) == 1 }) {
		t.Fatalf("command not found on the host: %v", pids)
	}
	// The command opens files of its own while it starts (sleep reads
	// /etc/locale.alias): a leaked fd stays, those go. Poll until only
	// 0, 1 and 2 are left; a leak never leaves.
	var fds []string
	settled := waitFor(5*time.Second, func() bool {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pids[0]))
		if err != nil {
			return false
		}
		fds = fds[:0]
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pids[0], e.Name()))
			if l == scratchBase {
				t.Errorf("the leaked fd %s reached the command", e.Name())
			}
			fds = append(fds, e.Name()+"="+l)
		}
		return len(fds) == 3 && strings.HasPrefix(fds[0], "0=") && strings.HasPrefix(fds[1], "1=") && strings.HasPrefix(fds[2], "2=")
	})
	if !settled {
		t.Errorf("command holds fds %v, want exactly 0 1 2", fds)
	}
	// The capabilities of the command, as the host sees them.
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"} {
			if strings.HasPrefix(l, k) && strings.TrimSpace(strings.TrimPrefix(l, k)) != "0000000000000000" {
				t.Errorf("command holds capabilities: %s", l)
			}
		}
		if strings.HasPrefix(l, "NoNewPrivs:") && strings.TrimSpace(strings.TrimPrefix(l, "NoNewPrivs:")) != "1" {
			t.Errorf("no_new_privs not set: %s", l)
		}
	}
}

// TestDaemonsGoneAfterRun: nothing the command started survives Run.
func TestDaemonsGoneAfterRun(t *testing.T) {
	ws := dir(t, "ws-")
	arg := uniqueSleep()
	res := sh(t, ws, "setsid nohup sleep "+arg+" >/dev/null 2>&1 & (sleep "+arg+" &) ; echo started")
	if res.code != 0 {
		t.Fatalf("%s", res)
	}
	if pids := procsWithArg(arg); len(pids) != 0 {
		t.Errorf("host: daemons survived the run: %v", pids)
	}
}

// TestTimeoutKillsGrandchildren: --timeout kills the whole tree.
func TestTimeoutKillsGrandchildren(t *testing.T) {
	ws := dir(t, "ws-")
	// The timeout counts from Start, the sandbox's setup included, and a
	// timeout that lands before the command runs kills at once (137): on
	// a machine slow enough (an emulated VM, under load) to spend the
	// whole second on setup, the run proves nothing about the SIGTERM,
	// and is done again with a longer timeout.
	for _, timeout := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second} {
		arg := uniqueSleep()
		start := time.Now()
		res := sh(t, ws, "sh -c 'sh -c \"sleep "+arg+"\" & sleep "+arg+"' & sleep "+arg, "--timeout", timeout.String())
		if el := time.Since(start); el > timeout+20*time.Second {
			t.Errorf("timeout %v took %v", timeout, el)
		}
		if pids := procsWithArg(arg); len(pids) != 0 {
			t.Errorf("host: grandchildren survived the timeout: %v", pids)
		}
		if res.result == nil || !res.result.Killed || res.result.KillReason != runtime.KilledTimeout {
			t.Fatalf("result does not say timeout: %+v", res.result)
		}
		// Startup is 0 for a command killed before it was exec'd.
		if res.result.Startup == 0 || res.result.Startup >= timeout {
			t.Logf("the command had not started (startup %v) when its %v timeout came: again with a longer one", res.result.Startup, timeout)
			continue
		}
		// The shell ends on the timeout's SIGTERM; the sleeps it started
		// are killed with the sandbox.
		if res.code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit code %d, want %d:\n%s", res.code, 128+int(syscall.SIGTERM), res)
		}
		return
	}
	t.Fatal("no sandbox started within its timeout")
}

// TestExitCodesNotFoundCannotExec: the hutch binary exits 127 for a
// command not found in the sandbox and 126 for one it cannot execute, as
// shells and env do, naming the command; otherwise with the command's
// status, 128+N for signal N.
func TestExitCodesNotFoundCannotExec(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "script"), []byte("#!/bin/sh\n"), 0o644))
	must(os.Mkdir(filepath.Join(ws, "dir"), 0o755))
	tests := []struct {
		cmd    []string
		code   int
		stderr string // what stderr contains
	}{
		{[]string{"hutch-no-such-command"}, 127, `"hutch-no-such-command" not found in PATH`},
		{[]string{"/nonexistent/cmd"}, 127, "look up command /nonexistent/cmd: no such file or directory"},
		{[]string{"./script"}, 126, "look up command ./script: permission denied"},
		{[]string{"./dir"}, 126, "exec ./dir: permission denied"},
		{[]string{"sh", "-c", "exit 3"}, 3, ""},
		{[]string{"sh", "-c", "kill -9 $$"}, 128 + int(syscall.SIGKILL), ""},
	}
	for _, tt := range tests {
		t.Run(tt.cmd[0], func(t *testing.T) {
			res := runCLI(t, ws, nil, tt.cmd...)
			if res.code != tt.code || !strings.Contains(res.stderr, tt.stderr) {
				t.Errorf("hutch run %q: want exit %d and stderr with %q, got %s", tt.cmd, tt.code, tt.stderr, res)
			}
		})
	}
}

// TestHostDeathKillsSandbox: kill -9 of the hutch process takes the whole
// sandbox with it (spawn server and init die by parent-death signal).
func TestHostDeathKillsSandbox(t *testing.T) {
	ws := dir(t, "ws-")
	arg := uniqueSleep()
	c := exec.Command(hutchBin, "run", "--workspace", ws, "--", "sh", "-c", "sleep "+arg+" & sleep "+arg)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return len(procsWithArg(arg)) == 2 }) {
		c.Process.Kill()
		t.Fatalf("sandboxed sleeps never appeared: %v", procsWithArg(arg))
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	if !waitFor(5*time.Second, func() bool { return len(procsWithArg(arg)) == 0 }) {
		t.Errorf("host: sandbox outlived its host: %v", procsWithArg(arg))
	}
	if !waitFor(5*time.Second, func() bool {
		return len(procsWithArg(spawn.ServerArg0)) == 0 || !childOf(procsWithArg(spawn.ServerArg0), c.Process.Pid)
	}) {
		t.Errorf("host: spawn server outlived its host")
	}
}

// childOf reports whether any of pids has parent ppid.
func childOf(pids []int, ppid int) bool {
	for _, p := range pids {
		if parentOf(p) == ppid {
			return true
		}
	}
	return false
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// TestNetworkIsolated: host loopback TCP listeners, host abstract and
// pathname unix sockets are unreachable. The host's listeners count what
// they accept.
func TestNetworkIsolated(t *testing.T) {
	for _, mode := range [][]string{nil, {"--net", "allow", "--allow-domain", "*"}} {
		t.Run(strings.Join(append([]string{"net"}, mode...), " "), func(t *testing.T) { testNetworkIsolated(t, mode) })
	}
}

// testNetworkIsolated: with the flags given (none, or the allow-list
// with everything allowed) the host's loopback, unix and abstract sockets
// stay out of reach, and so do raw sockets and UDP.
func testNetworkIsolated(t *testing.T, flags []string) {
	ws := dir(t, "ws-")
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	port := tcp.Addr().(*net.TCPAddr).Port
	sockDir := dir(t, "sock-")
	sockPath := filepath.Join(sockDir, "host.sock")
	unixL, err := net.Listen("unix", sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer unixL.Close()
	_ = os.Chmod(sockPath, 0o777)
	abstract := "@hutch-it-" + filepath.Base(sockDir)
	absL, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer absL.Close()

	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	accepted := make(chan string, 10)
	go func() {
		buf := make([]byte, 64)
		if _, _, err := udp.ReadFrom(buf); err == nil {
			accepted <- "udp"
		}
	}()
	for name, l := range map[string]net.Listener{"tcp": tcp, "unix": unixL, "abstract": absL} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- name
				c.Close()
			}
		}()
	}
	script := fmt.Sprintf(`
import socket
def try_(name, fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr); print("CONNECTED", name)
    except OSError as e:
        print("refused", name, e)
try_("tcp", socket.AF_INET, ("127.0.0.1", %d))
try_("unix", socket.AF_UNIX, %q)
try_("abstract", socket.AF_UNIX, "\0" + %q)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", ("127.0.0.1", %d)); print("sent udp")
except OSError as e:
    print("refused udp", e)
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print("RAW SOCKET")
except OSError as e:
    print("refused raw", e)
`, port, sockPath, abstract[1:], udpPort)
	res := runCLI(t, ws, flags, "python3", "-c", script)
	if strings.Contains(res.stdout, "RAW SOCKET") {
		t.Errorf("a raw socket was opened:\n%s", res)
	}
	if !strings.Contains(res.stdout, "refused tcp") {
		t.Errorf("probe did not run:\n%s", res)
	}
	select {
	case name := <-accepted:
		t.Errorf("host: the %s listener accepted a connection from the sandbox:\n%s", name, res)
	case <-time.After(300 * time.Millisecond):
	}
	// Control: the same probe on the host does connect, so the test can fail.
	c, err := net.Dial("unix", sockPath)
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	c.Close()
	<-accepted
}

// TestLoopbackWorksInside: the sandbox's own loopback is up.
func TestLoopbackWorksInside(t *testing.T) {
	ws := dir(t, "ws-")
	res := runCLI(t, ws, nil, "python3", "-c", `
import socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname(), timeout=2)
a, _ = l.accept(); a.sendall(b"pong"); print(c.recv(4).decode())
`)
	if res.code != 0 || !strings.Contains(res.stdout, "pong") {
		t.Errorf("loopback inside the sandbox does not work:\n%s", res)
	}
}

// TestPrivilegeInside: uid 0 or not, the command cannot remount, unmount
// its /tmp, write /proc/sys, or see the host's environment through
// /proc/1/environ. Checked on the host: mount tables and sysctls unchanged.
func TestPrivilegeInside(t *testing.T) {
	ws := dir(t, "ws-")
	corePattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	t.Cleanup(func() {
		// Should the sandbox ever get through, put the host back.
		if b, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(b) != string(corePattern) && os.Getuid() == 0 {
			_ = os.WriteFile("/proc/sys/kernel/core_pattern", corePattern, 0)
		}
	})
	t.Setenv("HUTCH_IT_HOST_SECRET", "host-env-secret-5521")
	res := sh(t, ws, `
mount -o remount,rw / 2>&1; echo "remount=$?"
umount /tmp 2>&1; echo "umount=$?"
umount -l /tmp 2>&1; echo "umount-lazy=$?"
echo 'hutch-it-core.%p' > /proc/sys/kernel/core_pattern 2>&1; echo "core=$?"
cat /proc/1/environ 2>&1; env | grep HUTCH_IT_HOST_SECRET
unshare -r true 2>&1; echo "unshare=$?"
`)
	if b, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(b) != string(corePattern) {
		t.Fatalf("host: kernel.core_pattern changed to %q", b)
	}
	if strings.Contains(res.stdout+res.stderr, "host-env-secret-5521") {
		t.Errorf("host environment visible in the sandbox:\n%s", res)
	}
	for _, want := range []string{"remount=", "umount=", "core="} {
		if strings.Contains(res.stdout, want+"0") {
			t.Errorf("%s succeeded inside the sandbox:\n%s", strings.TrimSuffix(want, "="), res)
		}
	}
}

// TestLibraryLeakFree: 1,000 sequential runs leave the host process with
// no more fds, goroutines, mounts or child processes than before.
func TestLibraryLeakFree(t *testing.T) {
	if testing.Short() {
		t.Skip("400 runs")
	}
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	run := func() error { return sb.Command(context.Background(), "true").Run() }
	if err := run(); err != nil { // the spawn server starts on first use
		t.Fatal(err)
	}
	// Landlock's carve-out keeps a directory's listing, and the files of
	// its entries, once the directory is over a second old (the workspace
	// just made moved its parent's): a cache of the process, like the
	// spawn server, made once.
	time.Sleep(1100 * time.Millisecond)
	// A small workspace is walked for the Sandbox's first eight looks at
	// its trees (two a command), then watched: an inotify instance, made
	// once, as the spawn server is.
	for range 4 {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	fds0, gr0, mnt0, kids0 := countFds(), goruntime.NumGoroutine(), countMounts(), descendants(os.Getpid())
	// Another job beside this one makes files where the carve-out lists
	// (the suite's scratch directory holds the home of the masked
	// ~/.ssh): the listings' cache grows, which is no leak.
	for i := range 40 {
		f := filepath.Join(filepath.Dir(ws), fmt.Sprintf("neighbour-%d-%d", os.Getpid(), i))
		must(os.WriteFile(f, nil, 0o644))
		t.Cleanup(func() { os.Remove(f) })
	}
	// Four callers at once, as an agent's tools call: a leak that needs
	// two commands in flight shows as well as one per command.
	const callers, runs = 4, 100
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range runs {
				if err := run(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	settle()
	fds1, gr1, mnt1, kids1 := countFds(), goruntime.NumGoroutine(), countMounts(), descendants(os.Getpid())
	if fds1 > fds0 {
		t.Errorf("open fds grew from %d to %d", fds0, fds1)
	}
	if gr1 > gr0+2 {
		t.Errorf("goroutines grew from %d to %d", gr0, gr1)
	}
	if mnt1 != mnt0 {
		t.Errorf("mounts in /proc/self/mountinfo went from %d to %d", mnt0, mnt1)
	}
	if len(kids1) > len(kids0) {
		t.Errorf("descendant processes went from %v to %v", kids0, kids1)
	}
}

func settle() {
	time.Sleep(200 * time.Millisecond)
	goruntime.GC()
}

func countFds() int {
	n, dups := leakableFds(os.Getpid())
	return n + dups
}

// leakableFds counts pid's open fds that a leak would make grow: all but
// the O_PATH ones (n), plus the O_PATH fds beyond the first to each file
// (dups). The O_PATH fds are the Landlock carve-out's cache of listed
// directories' entries (landlock's listings): one per entry of each
// directory on the way to a masked path, kept while the directory does not
// change, so their number follows what other processes do in /var/tmp,
// /etc or the home directory, not what the process leaks. A leak of them
// would open the same files again and again, which dups counts. n is -1
// when /proc does not say.
func leakableFds(pid int) (n, dups int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1, 0
	}
	const oPath = 0o10000000 // O_PATH, in fdinfo's octal flags
	seen := map[string]bool{}
	for _, e := range ents {
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			continue // closed since it was listed
		}
		var flags uint64
		for _, l := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(l, "flags:"); ok {
				flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&oPath == 0 {
			n++
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if seen[target] {
			dups++
		}
		seen[target] = true
	}
	return n, dups
}

func countMounts() int {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// descendants lists all host processes below pid.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err == nil {
			parent[p] = parentOf(p)
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSpawnServerRestarts: when the spawn server dies, the command in
// flight fails (its sandbox dies with the server) and the next command
// starts a new server.
func TestSpawnServerRestarts(t *testing.T) {
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	arg := uniqueSleep()
	cmd := sb.Command(context.Background(), "sleep", arg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	server := spawn.Default().ServerPid()
	before := spawn.Default().ServersStarted()
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the command in flight survived its spawn server")
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWithArg(arg)) == 0 }) {
		t.Errorf("host: sandbox outlived its spawn server: %v", procsWithArg(arg))
	}
	if err := sb.Command(context.Background(), "true").Run(); err != nil {
		t.Fatalf("after a server death: %v", err)
	}
	if after := spawn.Default().ServersStarted(); after != before+1 {
		t.Errorf("servers started: %d -> %d, want one more", before, after)
	}
	if p := spawn.Default().ServerPid(); p == server || p == 0 {
		t.Errorf("server pid %d after restart (was %d)", p, server)
	}
}

// TestLargeHostHeapStillSpawns: a host holding 1 GiB of live heap still
// runs commands (sandboxes are cloned by the spawn server, not by the
// host; the timing is the benchmark's business).
func TestLargeHostHeapStillSpawns(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 1 GiB")
	}
	heap := make([]byte, 1<<30)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	for i := range 5 {
		name := fmt.Sprintf("heap-%d", i)
		if err := sb.Command(context.Background(), "touch", name).Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(ws, name)); err != nil {
			t.Fatalf("host: %v", err)
		}
	}
	goruntime.KeepAlive(heap)
}
