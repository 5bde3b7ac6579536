//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tracingProbe tries, from inside the sandbox, every way a tracer has to
// another process: PTRACE_ATTACH and PTRACE_SEIZE, process_vm_readv, and
// /proc/PID/{mem,environ,maps} (with a read of memory at the addresses
// maps gives, should it open), on each pid given. It writes what it read
// to got-PID and what it was told to probe.txt, then says so (attempted)
// and holds until the host has looked at its targets (checked).
const tracingProbe = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
ws = os.getcwd()
out = open(os.path.join(ws, "probe.txt"), "w")
def say(*a):
    print(*a, file=out, flush=True)
def vm_read(pid, addr, n):
    buf = ctypes.create_string_buffer(n)
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), n), iovec(addr, n)
    ctypes.set_errno(0)
    r = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return (buf.raw[:r] if r > 0 else b""), ctypes.get_errno()
for pid in map(int, sys.argv[1:]):
    got = open(os.path.join(ws, "got-%d" % pid), "wb")
    for name, req in (("attach", 16), ("seize", 0x4206)):
        ctypes.set_errno(0)
        r = libc.ptrace(req, pid, None, None)
        say(pid, name, r, ctypes.get_errno())
    data, err = vm_read(pid, 0x400000, 64)
    say(pid, "process_vm_readv", len(data), err)
    got.write(data)
    for f in ("environ", "mem", "maps"):
        try:
            with open("/proc/%d/%s" % (pid, f), "rb") as fh:
                data = fh.read(1 << 16) if f != "mem" else b""
            say(pid, f, "opened")
            got.write(data)
            if f == "maps":
                for line in data.decode(errors="replace").splitlines():
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    got.write(vm_read(pid, lo, min(hi - lo, 1 << 16))[0])
        except OSError as e:
            say(pid, f, "refused", e.errno)
    got.close()
open(os.path.join(ws, "attempted"), "w").close()
deadline = time.time() + 60
while not os.path.exists(os.path.join(ws, "checked")) and time.time() < deadline:
    time.sleep(0.05)
`

// suspendProbe has a tracer ask the kernel to suspend its tracee's
// seccomp filter (PTRACE_O_SUSPEND_SECCOMP, which needs CAP_SYS_ADMIN of
// the host and a tracer under no filter), lets the tracee go on, and the
// tracee makes a setuid file, which only the filter refuses (issue 13).
const suspendProbe = `
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
open("suid", "w").close()
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    try:
        os.chmod("suid", 0o4755)
    except OSError:
        pass
    os._exit(0)
os.waitpid(pid, 0)
ctypes.set_errno(0)
r = libc.ptrace(0x4200, pid, None, ctypes.c_void_p(0x200000))  # PTRACE_SETOPTIONS
print("suspend", r, ctypes.get_errno())
libc.ptrace(7, pid, None, None)  # PTRACE_CONT
os.waitpid(pid, 0)
`

// TestTracingInside (issue 46): debuggers and tracers work inside the
// sandbox on its own processes (strace -f, gdb -batch: their output
// files checked on the host), and reach nothing else: not the sandbox's
// init, not a host process (a `sleep` whose environment holds a marker).
// Checked on the host: neither target gets a tracer (its TracerPid) while
// the command holds, and no file the command wrote holds the marker. At
// the namespaces level and, forced, at the landlock level, where the host's
// processes are in the command's pid namespace and only Landlock keeps a
// tracer from them. A tracer cannot switch its tracee's filter off: the
// setuid file the tracee then tries to make has no setuid bit on the host.
func TestTracingInside(t *testing.T) {
	for _, tool := range []string{"strace", "gdb", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed on this host (.ci/run installs it)", tool)
		}
	}
	for _, tc := range []struct {
		name     string
		simulate string
		flags    []string
	}{
		{"namespaces", "", nil},
		{"landlock", "no-userns", []string{"--min-level", "landlock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dir(t, "ws-")
			var env []string
			if tc.simulate != "" {
				env = append(env, "HUTCH_SIMULATE="+tc.simulate)
			}

			// strace -f follows a shell and its child; gdb runs a
			// program to its crash and walks its stack.
			token := "traced-" + randomHex(8)
			script := fmt.Sprintf(`strace -f -o trace.txt sh -c 'echo %s > out.txt; /bin/true'
gdb -batch -ex run -ex bt --args /bin/sh -c 'kill -SEGV $$' > gdb.txt 2>&1
echo done`, token)
			res := runCLIArgsEnv(t, env, append(append([]string{"run", "--workspace", ws}, tc.flags...), "--", "sh", "-c", script)...)
			if res.code != 0 {
				t.Fatalf("strace and gdb:\n%s", res)
			}
			trace := readString(t, filepath.Join(ws, "trace.txt"))
			for _, want := range []string{`execve("/bin/true"`, `write(1, "` + token + `\n"`, "+++ exited with 0 +++"} {
				if !strings.Contains(trace, want) {
					t.Errorf("host: strace's trace has no %q:\n%s", want, cut(trace))
				}
			}
			if got := readString(t, filepath.Join(ws, "out.txt")); got != token+"\n" {
				t.Errorf("host: the traced command wrote %q, want %q", got, token+"\n")
			}
			gdbOut := readString(t, filepath.Join(ws, "gdb.txt"))
			if !strings.Contains(gdbOut, "received signal SIGSEGV") || !strings.Contains(gdbOut, "\n#0 ") {
				t.Errorf("host: gdb caught no crash, or walked no stack:\n%s", gdbOut)
			}

			res = runCLIArgsEnv(t, env, append(append([]string{"run", "--workspace", ws}, tc.flags...), "--", "python3", "-c", suspendProbe)...)
			fi, err := os.Stat(filepath.Join(ws, "suid"))
			switch {
			case err != nil || res.code != 0:
				t.Errorf("the suspend probe: %v\n%s", err, res)
			case fi.Mode()&os.ModeSetuid != 0:
				t.Errorf("host: the tracee made a setuid file (%v): its tracer suspended its filter:\n%s", fi.Mode(), res)
			}

			// The targets: a host process with a secret in its
			// environment, and, at the namespaces level, the sandbox's
			// init (pid 1 inside; at the landlock level pid 1 is the
			// host's own init, a host process like the sleep).
			marker := "hutch-it-trace-marker-" + randomHex(12)
			host := exec.Command("sleep", "120")
			host.Env = append(os.Environ(), "HUTCH_IT_TRACE_MARKER="+marker)
			must(host.Start())
			defer func() { host.Process.Kill(); host.Wait() }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := exec.CommandContext(ctx, hutchBin, append(append([]string{"run", "--workspace", ws}, tc.flags...),
				"--", "python3", "-c", tracingProbe, "1", strconv.Itoa(host.Process.Pid))...)
			c.Env = append(append(os.Environ(), env...), "HUTCH_IT_TRACE_MARKER="+marker)
			var out bytes.Buffer
			c.Stdout, c.Stderr = &out, &out
			must(c.Start())
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			attempted := filepath.Join(ws, "attempted")
			if !waitFor(60*time.Second, func() bool { _, err := os.Stat(attempted); return err == nil }) {
				c.Process.Kill()
				<-done
				t.Fatalf("the probe did not finish its attempts in 60s:\n%s", out.String())
			}
			targets := map[string]int{"the host's sleep": host.Process.Pid}
			if tc.simulate == "" {
				inits := descendantsNamed("hutch-init")
				if len(inits) != 1 {
					t.Fatalf("host: %d processes named hutch-init below the test, want the one of this command: %v", len(inits), inits)
				}
				targets["the sandbox's init"] = inits[0]
			}
			for what, pid := range targets {
				if tracer := tracerPid(pid); tracer != 0 {
					t.Errorf("host: %s (pid %d) is traced by pid %d", what, pid, tracer)
				}
			}
			must(os.WriteFile(filepath.Join(ws, "checked"), nil, 0o644))
			if err := <-done; err != nil {
				t.Fatalf("the probe: %v\n%s", err, out.String())
			}
			probe := readString(t, filepath.Join(ws, "probe.txt"))
			t.Logf("the probe's attempts:\n%s", probe)
			// Every attempt was made: a probe that skipped its
			// targets would prove nothing.
			for _, pid := range []int{1, host.Process.Pid} {
				for _, what := range []string{"attach", "seize", "process_vm_readv", "environ", "mem", "maps"} {
					if !strings.Contains(probe, fmt.Sprintf("%d %s ", pid, what)) {
						t.Errorf("the probe made no %s attempt on pid %d:\n%s", what, pid, probe)
					}
				}
				for _, what := range []string{"attach", "seize"} {
					if strings.Contains(probe, fmt.Sprintf("%d %s 0 ", pid, what)) {
						t.Errorf("ptrace %s of pid %d succeeded:\n%s", what, pid, probe)
					}
				}
			}
			entries, err := os.ReadDir(ws)
			must(err)
			for _, e := range entries {
				if b, err := os.ReadFile(filepath.Join(ws, e.Name())); err == nil && bytes.Contains(b, []byte(marker)) {
					t.Errorf("host: %s, written by the command, holds the host process's marker", e.Name())
				}
			}
			if strings.Contains(out.String(), marker) {
				t.Errorf("the command's output holds the host process's marker:\n%s", out.String())
			}
		})
	}
}

// tracerPid is the TracerPid of pid's status, -1 when unreadable.
func tracerPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("host: %v", err)
	}
	return string(b)
}

// cut is s, or its first 4 KiB.
func cut(s string) string {
	if len(s) > 4096 {
		return s[:4096] + "..."
	}
	return s
}
