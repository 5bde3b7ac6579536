//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/integration/internal/initcount"
	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// The host program's side of TestHostProgramRunsOnce.
const (
	initPhasesEnv = "HUTCH_IT_INIT_PHASES"
	initWsEnv     = "HUTCH_IT_INIT_WORKSPACE"
)

// initSleep is long against a spawn even under load, so that a "spawn"
// phase that held it could not pass for one that did not.
const initSleep = 2 * time.Second

// hostProgram makes a copy of this test binary, a host program with
// package initcount, in a scratch directory of its own, with its counter
// file (initcount) empty; it returns the directory and the program.
func hostProgram(t *testing.T) (scratch, prog string) {
	t.Helper()
	scratch = dir(t, "hostprog")
	// The copy has counter and sleep files of its own, so that no other
	// test's processes count.
	prog = filepath.Join(scratch, "host-program")
	bin, err := os.ReadFile(os.Args[0])
	must(err)
	must(os.WriteFile(prog, bin, 0o755))
	counter := prog + initcount.CounterSuffix
	// Writable by whoever might run the program's code, in or out of a
	// sandbox, so that a missing line means the code did not run.
	must(os.WriteFile(counter, nil, 0o666))
	must(os.Chmod(counter, 0o666))
	return scratch, prog
}

// checkRanOnce fails t unless the host program prog's package init
// functions ran in exactly one process: pid, the program itself.
func checkRanOnce(t *testing.T, prog string, pid int) {
	t.Helper()
	b, err := os.ReadFile(prog + initcount.CounterSuffix)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 1 || lines[0] != fmt.Sprint(pid) {
		t.Errorf("the host program's init functions ran in %d processes (%v), want 1: its own (%d)", len(lines), lines, pid)
	}
}

// TestHostProgramRunsOnce: a host program (a copy of this test binary,
// with package initcount) runs 20 sandboxed commands, and its Go code runs
// in one process only, its own. The zygote and every init are C that
// takes over before the Go runtime starts, so neither the host's package
// init functions nor its runtime cost a spawn anything; an init function
// that sleeps shows up in no command's "spawn" phase.
func TestHostProgramRunsOnce(t *testing.T) {
	ws := dir(t, "ws")
	scratch, prog := hostProgram(t)
	must(os.WriteFile(prog+initcount.SleepSuffix, []byte(initSleep.String()), 0o644))
	phases := filepath.Join(scratch, "phases.json")
	must(os.WriteFile(phases, nil, 0o666))
	must(os.Chmod(phases, 0o666))

	cmd := exec.Command(prog, "-test.run=^TestHostProgramChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), initPhasesEnv+"="+phases, initWsEnv+"="+ws, "HUTCH_BIN="+hutchBin)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("host program: %v\n%s", err, out)
	}

	checkRanOnce(t, prog, cmd.Process.Pid)

	var results [][]runtime.Phase
	b, err := os.ReadFile(phases)
	if err == nil {
		err = json.Unmarshal(b, &results)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 20 {
		t.Fatalf("%d results, want 20", len(results))
	}
	for i, ps := range results {
		if len(ps) == 0 || ps[0].Name != "spawn" {
			t.Fatalf("command %d: phases %v, want spawn first", i, ps)
		}
		if d := time.Duration(ps[0].Nanos); d >= initSleep {
			t.Errorf("command %d: spawn phase %v holds the host program's %v init", i, d, initSleep)
		}
	}
}

// TestHostProgramChild is TestHostProgramRunsOnce's host program.
func TestHostProgramChild(t *testing.T) {
	ws, out := os.Getenv(initWsEnv), os.Getenv(initPhasesEnv)
	if ws == "" || out == "" {
		t.Skip("run by TestHostProgramRunsOnce")
	}
	sb := newSandbox(t, ws)
	defer sb.Close()
	var results [][]runtime.Phase
	for range 20 {
		c := sb.Command(context.Background(), "/bin/true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		results = append(results, c.Result.Phases)
	}
	b, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The host program's side of TestDurableSupervisorRunsNoHostCode.
const durableInitDataEnv = "HUTCH_IT_INIT_DURABLE_DATA"

// TestDurableSupervisorRunsNoHostCode (issue 42): a host program (a copy
// of this test binary, with package initcount) starts a durable process
// and stops it, and its Go code ran in one process only, its own: the
// process's supervisor, which outlives the host program, is hutch's own
// binary, not the host program started again, so no package init of the
// agent (which may write files or dial out) runs in it.
func TestDurableSupervisorRunsNoHostCode(t *testing.T) {
	ws := dir(t, "ws")
	_, prog := hostProgram(t)
	data := dir(t, "data")
	cmd := exec.Command(prog, "-test.run=^TestDurableHostProgramChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), durableInitDataEnv+"="+data, initWsEnv+"="+ws, "HUTCH_BIN="+hutchBin)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("host program: %v\n%s", err, out)
	}
	checkRanOnce(t, prog, cmd.Process.Pid)
}

// TestDurableHostProgramChild is TestDurableSupervisorRunsNoHostCode's
// host program: it starts a durable process, checks from the host that its
// command runs, and stops it.
func TestDurableHostProgramChild(t *testing.T) {
	ws, data := os.Getenv(initWsEnv), os.Getenv(durableInitDataEnv)
	if ws == "" || data == "" {
		t.Skip("run by TestDurableSupervisorRunsNoHostCode")
	}
	m, err := processes.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Supervisor = os.Getenv("HUTCH_BIN")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := m.Start(ctx, processes.Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"sh", "-c", "echo up > ran; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx, p.ID)
	for {
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the durable command never ran: %s", durableState(data, p.ID))
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := m.Stop(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
}
