//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// TestTimeoutDuringSetupCLI: a --timeout shorter than the sandbox's setup
// is a timeout wherever it lands: exit 137 and a --result-json saying
// killed by the timeout, never 125 with no result.
func TestTimeoutDuringSetupCLI(t *testing.T) {
	ws := dir(t, "ws-")
	for range 3 {
		res := runCLI(t, ws, []string{"--timeout", "1ms"}, "sleep", "60")
		if res.code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit %d, want 137:\n%s", res.code, res)
		}
		r := res.result
		if r == nil || !r.Killed || r.KillReason != runtime.KilledTimeout || r.Signal != syscall.SIGKILL {
			t.Errorf("--result-json %+v, want killed by the timeout:\n%s", r, res)
		}
	}
}

// cliRun is a `hutch run` in progress, its stdin held open by the test.
type cliRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	rj     string
}

// startHeldCLI starts `hutch run --workspace ws --result-json ... -- cmd...`
// and waits until the command runs (it prints "up" first).
func startHeldCLI(t *testing.T, ws string, cmd ...string) *cliRun {
	t.Helper()
	r := &cliRun{rj: filepath.Join(t.TempDir(), "result.json")}
	args := append([]string{"run", "--workspace", ws, "--result-json", r.rj, "--"}, cmd...)
	r.cmd = exec.Command(hutchBin, args...)
	r.cmd.Stderr = &r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "up\n" {
		t.Fatalf("hutch run: %q, %v\n%s", line, err, r.stderr.String())
	}
	return r
}

// wait waits for the CLI and reads its exit status and --result-json.
func (r *cliRun) wait(t *testing.T) (int, *runtime.Result) {
	t.Helper()
	r.stdin.Close()
	err := r.cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.rj)
	if err != nil {
		t.Fatalf("--result-json: %v\n%s", err, r.stderr.String())
	}
	var res runtime.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return code, &res
}

// hutchGroups returns the host's directories of the hutch cgroups that
// pid is in, from the host's /proc/<pid>/cgroup: one per v1 hierarchy, or
// the v2 one.
func hutchGroups(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.Contains(f[2], "/hutch-") {
			continue
		}
		mnt := "/sys/fs/cgroup"
		if f[1] == "" {
			if _, err := os.Stat(mnt + "/unified"); err == nil {
				mnt += "/unified" // hybrid
			}
		} else {
			mnt += "/" + strings.Split(f[1], ",")[0]
		}
		dirs = append(dirs, mnt+f[2])
	}
	return dirs
}

// TestCLILeavesNoCgroup: once `hutch run` exits, the cgroup directories of
// its command are gone from every hierarchy: nothing waits for a later
// process to sweep them.
func TestCLILeavesNoCgroup(t *testing.T) {
	ws := dir(t, "ws-")
	if !cgroupsEnforced(t, ws) {
		t.Skip("no cgroups for this user here")
	}
	r := startHeldCLI(t, ws, "sh", "-c", "echo up; cat")
	var groups []string
	for _, p := range descendants(r.cmd.Process.Pid) {
		for _, g := range hutchGroups(p) {
			if !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	if len(groups) == 0 {
		t.Fatal("host: the command is in no hutch cgroup")
	}
	if code, _ := r.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, r.stderr.String())
	}
	for _, g := range groups {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("host: %s left behind by hutch run", g)
		}
	}
}

// TestSandboxInitKilledCLI: the command's sandbox init killed from the
// host ends the run with 137 and a --result-json saying the sandbox died
// and how, not a bare SIGKILL that nobody sent.
func TestSandboxInitKilledCLI(t *testing.T) {
	ws := dir(t, "ws-")
	r := startHeldCLI(t, ws, "sh", "-c", "echo up; cat")
	// The init is the spawn server's child, the spawn server hutch's;
	// the server's other child, if any, is its spare (hutch-spare).
	var init int
	for _, p := range descendants(r.cmd.Process.Pid) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		if pp := parentOf(p); pp != r.cmd.Process.Pid && parentOf(pp) == r.cmd.Process.Pid && string(comm) == "hutch-init\n" {
			init = p
		}
	}
	if init == 0 {
		t.Fatal("host: no sandbox init below hutch run")
	}
	if err := syscall.Kill(init, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, res := r.wait(t)
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want 137\n%s", code, r.stderr.String())
	}
	if !res.Killed || res.KillReason != runtime.KilledSandboxDied || !strings.Contains(res.Reason, "from outside hutch") {
		t.Errorf("--result-json %+v, want killed: %q", res, runtime.KilledSandboxDied)
	}
	if !waitFor(5*time.Second, func() bool { return len(descendants(r.cmd.Process.Pid)) == 0 }) {
		t.Errorf("host: processes left: %v", descendants(r.cmd.Process.Pid))
	}
}

// TestUnenforcedLimitsReported: every limit asked for that does not hold
// is in Result.Unenforced: without cgroups (the rlimit fallback of an
// ordinary user) a CPU rate has no rlimit at all and RLIMIT_NPROC counts
// the user's processes, not the command's.
func TestUnenforcedLimitsReported(t *testing.T) {
	ws := dir(t, "ws-")
	res := runCLI(t, ws, []string{"--cpus", "0.5", "--pids", "100"}, "true")
	if res.result == nil || res.code != 0 {
		t.Fatalf("no result:\n%s", res)
	}
	has := func(prefix string) bool {
		return slices.ContainsFunc(res.result.Unenforced, func(s string) bool { return strings.HasPrefix(s, prefix) })
	}
	cgroup := slices.Contains(res.result.Layers, runtime.LayerCgroup)
	for _, limit := range []string{"cpus:", "pids:"} {
		if has(limit) == cgroup {
			t.Errorf("cgroup layer %v, and %q in Unenforced is %v: %q", cgroup, limit, has(limit), res.result.Unenforced)
		}
	}
}
