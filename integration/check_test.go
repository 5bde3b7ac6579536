//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Deciding starts nothing (issue 42): hutch policy check and show, and
// the validation of hutch process start, decide what a Sandbox would be
// (runtime.Check) without making one, so no spawn server, spare init or
// pooled init is started for them. Judged from the host: the CLI runs
// under a subreaper of the test's, and every process it left behind
// (killed with it, or on its own) comes back to the subreaper to be
// counted.

// orphansEnv holds, as JSON, the command orphansHelper runs.
const orphansEnv = "HUTCH_IT_ORPHANS_ARGV"

// orphansHelper is the test binary run as a subreaper of argv: it runs
// argv, waits for what argv's exit kills to die, and prints a line for
// each process left to it (its pid and argv[0], or its name once dead),
// killing and reaping them; argv's exit status is its own.
func orphansHelper() int {
	var argv []string
	if err := json.Unmarshal([]byte(os.Getenv(orphansEnv)), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "orphans helper:", err)
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "orphans helper:", err)
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			fmt.Fprintln(os.Stderr, "orphans helper:", err)
			return 2
		}
		code = ee.ExitCode()
	}
	// A spawn server dies of its parent's death (PR_SET_PDEATHSIG),
	// after it has come to the subreaper: give it time to.
	time.Sleep(300 * time.Millisecond)
	for _, pid := range childrenOf(os.Getpid()) {
		fmt.Printf("ORPHAN %d %s\n", pid, procName(pid))
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
	return code
}

// childrenOf lists the processes whose parent is pid, zombies included.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err == nil && parentOf(p) == pid {
			out = append(out, p)
		}
	}
	return out
}

// procName is pid's argv[0], or, once it is dead (a zombie has no
// command line), its name in /proc/pid/stat.
func procName(pid int) string {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(b) > 0 {
		a0, _, _ := strings.Cut(string(b), "\x00")
		return a0
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	if i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')'); i >= 0 && j > i {
		return "(" + s[i+1:j] + ")"
	}
	return "?"
}

// orphansOf runs the hutch CLI with args under orphansHelper and returns
// the processes it left behind, one "pid argv0" each, and its output.
func orphansOf(t *testing.T, args ...string) (orphans []string, out string, code int) {
	t.Helper()
	argv, _ := json.Marshal(append([]string{hutchBin}, args...))
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), orphansEnv+"="+string(argv))
	b, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "ORPHAN "); ok {
			orphans = append(orphans, rest)
		}
	}
	return orphans, string(b), code
}

// TestPolicyCommandsStartNothing: hutch policy show and check start no
// process at all.
func TestPolicyCommandsStartNothing(t *testing.T) {
	ws := dir(t, "ws-")
	file := filepath.Join(dir(t, "pol-"), "policy.toml")
	must(os.WriteFile(file, []byte("version = 1\n[sandbox]\nallow_git_write = false\n"), 0o644))
	for _, args := range [][]string{
		{"policy", "show", "--workspace", ws},
		{"policy", "check", file},
	} {
		orphans, out, code := orphansOf(t, args...)
		if code != 0 {
			t.Errorf("hutch %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		if len(orphans) > 0 {
			t.Errorf("hutch %s left processes behind: %q (a spawn server and its spare)", strings.Join(args, " "), orphans)
		}
	}
}

// TestProcessStartValidatesWithoutSandbox: hutch process start leaves one
// process behind, the supervisor, and no spawn server of its own: the
// supervisor makes the Sandbox, once.
func TestProcessStartValidatesWithoutSandbox(t *testing.T) {
	ws, data := dir(t, "ws-"), dir(t, "data-")
	orphans, out, code := orphansOf(t, "process", "start", "--data-dir", data, "--workspace", ws, "--name", "quiet", "--", "sleep", "300")
	defer runCLIArgs(t, "process", "stop-all", "--data-dir", data)
	if code != 0 {
		t.Fatalf("hutch process start: exit %d\n%s", code, out)
	}
	// The helper killed what was left to it, the supervisor included.
	for _, o := range orphans {
		if !strings.Contains(o, "supervisor") {
			t.Errorf("hutch process start left %q behind besides its supervisor (all: %q)", o, orphans)
		}
	}
	if len(orphans) == 0 {
		t.Errorf("no supervisor came to the subreaper\n%s", out)
	}
}
