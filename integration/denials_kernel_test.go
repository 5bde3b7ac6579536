//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// py runs a Python one-liner in the sandbox (python3 is among the
// project's test dependencies).
func py(code string) []string { return []string{"python3", "-c", code} }

// TestDenialsKernel (issue 48): for each class of refusal the kernel
// reports to hutch (a call the seccomp profile refuses, a host unix
// socket behind the wall, an address the sandbox's network has no route
// to, a domain the proxy refuses, ptrace of a host process), a command
// that runs into it gets a Denial naming the right rule, and the host
// shows the refusal held (no connection accepted, no request served, the
// host's process not traced); a command that runs into none gets none.
// As root and as uid 65534.
func TestDenialsKernel(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	ws := dir(t, "denials-")
	outside := dir(t, "denials-outside-")

	// A host socket outside every writable tree, shown read-only.
	sockPath := outside + "/host.sock"
	l, err := net.Listen("unix", sockPath)
	must(err)
	defer l.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	// A host socket in a masked directory: the view shows none there.
	masked := dir(t, "denials-masked-")
	hidden, err := net.Listen("unix", masked+"/hidden.sock")
	must(err)
	defer hidden.Close()
	// A host process for the command to try to trace.
	victim := exec.Command("sleep", "600")
	must(victim.Start())
	defer func() {
		victim.Process.Kill()
		victim.Wait() //nolint:errcheck
	}()
	vpid := victim.Process.Pid

	type want struct {
		source runtime.DenialSource
		op     string
		object string
		rule   runtime.Rule
		errno  string
		allow  bool
	}
	rows := []struct {
		name  string
		flags []string
		cmd   []string
		want  *want // nil: no denial at all
		// wallOnly: the refusal is seen by the unix wall's filter, which a
		// kernel whose Landlock guards socket files does without.
		wallOnly bool
		// held checks on the host that the refusal held.
		held func(t *testing.T)
		// refusedBefore512: hutch refuses the row's flags as root before
		// Linux 5.12 (--allow-nested).
		refusedBefore512 bool
	}{
		{
			name: "seccomp", cmd: py(`import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(321, 0, 0, 0); print(r, ctypes.get_errno())`),
			want: &want{runtime.DenialSeccomp, "bpf", "", runtime.RuleSeccomp, "EPERM", true},
		},
		{
			name: "new namespace", cmd: py(`import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.unshare(0x10000000), ctypes.get_errno())`),
			want: &want{runtime.DenialSeccomp, "unshare", "", runtime.RuleSeccomp, "EPERM", true},
		},
		{
			name: "host unix socket", cmd: py(`import socket; s = socket.socket(socket.AF_UNIX); s.connect("` + sockPath + `")`),
			want:     &want{runtime.DenialUnixWall, "connect", sockPath, runtime.RuleUnixWall, "EACCES", false},
			wallOnly: true,
			held: func(t *testing.T) {
				select {
				case <-accepted:
					t.Error("the host's socket accepted a connection from the sandbox")
				case <-time.After(100 * time.Millisecond):
				}
			},
		},
		{
			// What is reported can reach the command (--explain): a host
			// socket its view hides is not looked for on the host, so
			// the refusal there is not told from a connect to nothing.
			name: "host socket behind a mask", flags: []string{"--deny", masked},
			cmd:      py(`import socket` + "\n" + `try: socket.socket(socket.AF_UNIX).connect("` + masked + `/hidden.sock")` + "\n" + `except OSError: pass`),
			wallOnly: true,
		},
		{
			name: "no network", cmd: py(`import socket; socket.create_connection(("192.0.2.1", 80), timeout=5)`),
			want:     &want{runtime.DenialNetwork, "connect", "192.0.2.1:80", runtime.RuleNetwork, "ENETUNREACH", true},
			wallOnly: true,
		},
		{
			name: "proxy refuses a domain", flags: []string{"--net", "allow", "--allow-domain", "example.com"},
			cmd:  py(`import urllib.request; urllib.request.urlopen("http://blocked.invalid/", timeout=10)`),
			want: &want{runtime.DenialNetwork, "http", "blocked.invalid:80", runtime.RuleNetwork, "", true},
		},
		{
			name: "ptrace of a host process", cmd: py(fmt.Sprintf(`import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.ptrace(16, %d, 0, 0), ctypes.get_errno())`, vpid)),
			want: &want{runtime.DenialPidNamespace, "ptrace", "pid " + strconv.Itoa(vpid), runtime.RuleOutsideSandbox, "ESRCH", false},
			held: func(t *testing.T) {
				st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", vpid))
				if err != nil || !strings.Contains(string(st), "\nTracerPid:\t0\n") {
					t.Errorf("the host's process %d is traced (%v):\n%s", vpid, err, st)
				}
			},
		},
		{
			// A chroot of the command's own whose /proc is a symlink to
			// "/proc": the host must not look the pid up in its own
			// /proc, or the report would tell the command which host
			// pids exist. Neither attach is reported.
			name: "ptrace from a chroot with /proc linked", flags: []string{"--allow-nested"}, refusedBefore512: true,
			cmd: py(fmt.Sprintf(`import ctypes, os
l = ctypes.CDLL(None, use_errno=True)
os.makedirs("jail", exist_ok=True)
if not os.path.islink("jail/proc"):
    os.symlink("/proc", "jail/proc")
assert l.unshare(0x10000000) == 0, ctypes.get_errno()
os.chroot("jail")
for pid in (%d, 4000000):
    l.ptrace(16, pid, 0, 0)
`, vpid)),
		},
		{
			name: "none", cmd: []string{"sh", "-c", `ls -l / >/dev/null && echo hi > f && cat f >/dev/null && python3 -c 'import socket, os; socket.socket(socket.AF_UNIX).close(); os.getpid()'`},
		},
		{
			name: "ptrace inside", cmd: []string{"sh", "-c", `sleep 5 & exec python3 -c 'import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.ptrace(16, '"$!"', 0, 0) == 0 else 1)'`},
		},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			run := runCLI(t, ws, r.flags, r.cmd...)
			if r.refusedBefore512 && run.code == 125 && strings.Contains(run.stderr, "before 5.12") {
				t.Skipf("hutch refuses %v here: %s", r.flags, run.stderr)
			}
			res := run.result
			if res == nil {
				t.Fatalf("no result\n%s", run)
			}
			if r.held != nil {
				r.held(t)
			}
			if r.wallOnly && res.UnixSocketWall != "seccomp-notify" {
				t.Skipf("the unix wall is %q here: no listener sees this refusal", res.UnixSocketWall)
			}
			if r.want == nil {
				if len(res.Denials) != 0 || run.code != 0 {
					t.Errorf("exit %d, denials %+v; want 0 and none\n%s", run.code, res.Denials, run)
				}
				return
			}
			w := r.want
			var found *runtime.Denial
			for i, d := range res.Denials {
				if d.Source == w.source && d.Op == w.op {
					found = &res.Denials[i]
				}
			}
			if found == nil {
				t.Fatalf("no %s denial of %s in %+v\n%s", w.source, w.op, res.Denials, run)
			}
			if found.Object != w.object || found.Rule != w.rule || found.Errno != w.errno || found.Count < 1 || found.Reason == "" || (found.Allow != nil) != w.allow {
				t.Errorf("denial %+v; want object %q, rule %s, errno %q, a reason, a remedy %v", *found, w.object, w.rule, w.errno, w.allow)
			}
			t.Logf("%s", found)
		})
	}
}

// TestDenialsCounted: the host answers a refused call with the errno the
// profile gives it without a listener (Policy.Denials off), and counts
// repeats: 20,000 refused calls are one Denial of count 20,000, and
// beyond 64 kinds the rest are only counted (DenialsDropped).
func TestDenialsCounted(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	ws := dir(t, "denials-count-")
	const calls = 20000
	// bpf, mount and a setuid chmod: each errno as the command sees it.
	script := fmt.Sprintf(`import ctypes
l = ctypes.CDLL(None, use_errno=True)
errs = []
for nr, args in ((321, (0, 0, 0)), (165, (0, 0, 0, 0, 0)), (90, (b"f", 0o4755))):
    l.syscall(nr, *args)
    errs.append(ctypes.get_errno())
for _ in range(%d - 1):
    l.syscall(321, 0, 0, 0)
# 100 pids no sandbox has: 100 kinds of ptrace denial.
for pid in range(4000000, 4000100):
    l.ptrace(16, pid, 0, 0)
print(errs)
`, calls)
	must(os.WriteFile(filepath.Join(ws, "f"), nil, 0o644))
	outputs := map[runtime.DenialMode]string{}
	for _, mode := range []runtime.DenialMode{runtime.DenialsOff, runtime.DenialsRecord} {
		sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Denials = mode })
		defer sb.Close()
		cmd := sb.Command(context.Background(), "python3", "-c", script)
		out, err := cmd.Output()
		var ee *runtime.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		outputs[mode] = string(out)
		res := cmd.Result
		if mode == runtime.DenialsOff {
			if len(res.Denials) != 0 {
				t.Errorf("Denials off: %+v", res.Denials)
			}
			continue
		}
		counts := map[string]int{}
		ptraces := 0
		for _, d := range res.Denials {
			if d.Op == "ptrace" {
				ptraces++
				continue
			}
			counts[d.Op] += d.Count
		}
		if counts["bpf"] != calls || counts["mount"] != 1 || counts["chmod"] != 1 {
			t.Errorf("counts %v; want bpf %d, mount 1, chmod 1", counts, calls)
		}
		if len(res.Denials) != 64 || res.DenialsDropped != 100-(64-3) || ptraces != 61 {
			t.Errorf("%d kinds (%d of ptrace), %d dropped; want 64 kinds, the 3 calls' and 61 of ptrace, and 39 dropped", len(res.Denials), ptraces, res.DenialsDropped)
		}
	}
	if outputs[runtime.DenialsOff] != outputs[runtime.DenialsRecord] || !strings.HasPrefix(outputs[runtime.DenialsOff], "[1, 1, 1]") {
		t.Errorf("errnos without a listener %q, with %q; want the same, EPERM each", outputs[runtime.DenialsOff], outputs[runtime.DenialsRecord])
	}
}
