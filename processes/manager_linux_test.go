package processes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openManager(t *testing.T) *Manager {
	t.Helper()
	m, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m.Supervisor = testSupervisor
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.StopAll(ctx); err != nil {
			t.Errorf("StopAll: %v", err)
		}
		m.Close()
	})
	return m
}

func TestStartStop(t *testing.T) {
	m := openManager(t)
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"sh", "-c", "echo hello from the process; exec sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != StatusRunning || p.Pid == 0 || p.Supervisor == nil {
		t.Fatalf("after Start: %+v", p)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
	t.Logf("pid %d: %q", p.Pid, cmdline)
	eventually(t, 10*time.Second, "the log holds the output", func() bool {
		r, err := m.Log(p.ID)
		if err != nil {
			return false
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return strings.Contains(string(b), "hello from the process")
	})
	if err := m.Stop(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusStopped || got.Pid != 0 || got.Supervisor != nil {
		t.Errorf("after Stop: %+v", got)
	}
	if ok, _ := p.Supervisor.Live(); ok {
		t.Errorf("the supervisor %d still runs", p.Supervisor.Pid)
	}
}

// TestStartFailureLeavesNothing: a command that cannot start is Start's
// error, and no record, directory or supervisor is left.
func TestStartFailureLeavesNothing(t *testing.T) {
	m := openManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"no-such-command-here"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-command-here") {
		t.Fatalf("Start: %v", err)
	}
	if ents, _ := os.ReadDir(m.store.root); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	// A policy the runtime refuses is its PolicyError, before anything.
	p := runtime.DefaultPolicy(t.TempDir())
	p.Memory = 1
	_, err = m.Start(ctx, Spec{Policy: p, Args: []string{"true"}})
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Memory" {
		t.Errorf("Start with Memory 1: %v", err)
	}
	// A backend no supervisor runs is refused as New refuses it, before
	// a supervisor is started: Check decides an OCI policy for package
	// oci, and NewResolved would refuse it only in the supervisor.
	p = runtime.DefaultPolicy(t.TempDir())
	p.Backend = runtime.BackendOCI
	_, err = m.Start(ctx, Spec{Policy: p, Args: []string{"true"}})
	var be *runtime.BackendError
	if !errors.As(err, &be) || be.Backend != runtime.BackendOCI {
		t.Errorf("Start with Backend oci: %v, want a BackendError", err)
	}
	if ents, _ := os.ReadDir(m.store.root); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestDataDirInWorkspaceRefused: records the command could write are
// refused, named.
func TestDataDirInWorkspaceRefused(t *testing.T) {
	ws := t.TempDir()
	m, err := Open(filepath.Join(ws, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Supervisor = testSupervisor
	_, err = m.Start(context.Background(), Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"true"}})
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Spec.Policy" || !strings.Contains(err.Error(), "data directory") {
		t.Errorf("Start: %v", err)
	}
}

// TestOneSupervisor: a second supervisor for a process that has one
// refuses at once and changes nothing.
func TestOneSupervisor(t *testing.T) {
	m := openManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	second := &exec.Cmd{Path: "/proc/self/exe", Args: []string{supervisorArg0, m.store.dir(p.ID)}, ExtraFiles: []*os.File{w}}
	if err := second.Run(); err == nil {
		t.Error("a second supervisor ran")
	}
	w.Close()
	msg, _ := io.ReadAll(r)
	if !strings.Contains(string(msg), "another supervisor") {
		t.Errorf("the second supervisor said %q", msg)
	}
	got, err := m.Get(p.ID)
	if err != nil || got.Status != StatusRunning || *got.Supervisor != *p.Supervisor || got.Pid != p.Pid {
		t.Errorf("after a second supervisor: %+v, %v", got, err)
	}
}

// TestHalfDoneStopFinished: desired stopped recorded by a manager that
// died before it signalled: the next manager's Open sends the stop.
func TestHalfDoneStopFinished(t *testing.T) {
	m := openManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.store.update(p.ID, func(p *Process) error { p.Desired = DesiredStopped; return nil }); err != nil {
		t.Fatal(err)
	}
	next, err := Open(filepath.Dir(m.store.root))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	eventually(t, 30*time.Second, "the stop is finished", func() bool {
		got, err := next.Get(p.ID)
		return err == nil && got.Status == StatusStopped
	})
	// The supervisor records the stop, then exits.
	eventually(t, 10*time.Second, "the supervisor is gone", func() bool {
		ok, _ := p.Supervisor.Live()
		return !ok
	})
}

// TestStopKillsAfterGrace: a process that ignores SIGTERM is killed with
// its whole sandbox once StopGrace has passed, and Stop returns then.
func TestStopKillsAfterGrace(t *testing.T) {
	m := openManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := t.TempDir()
	p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"sh", "-c", `trap "" TERM; touch ignoring; sleep 300 & sleep 301; wait`}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the command ignores SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(ws, "ignoring"))
		return err == nil
	})
	cmd, err := Identify(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Stop(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < time.Second {
		t.Errorf("Stop returned after %v, before the grace was over: the SIGTERM was not ignored?", took)
	}
	if ok, _ := cmd.Live(); ok {
		t.Error("the command lives on")
	}
	got, _ := m.Get(p.ID)
	if r := got.Runs[len(got.Runs)-1]; r.Signal != "SIGKILL" {
		t.Errorf("the last run ended %+v, want by SIGKILL", r)
	}
}

// TestConcurrentStops: two managers stopping the same process at once
// both return once it is gone, and its record ends stopped.
func TestConcurrentStops(t *testing.T) {
	m := openManager(t)
	other, err := Open(filepath.Dir(m.store.root))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, mm := range []*Manager{m, other} {
		go func() { errs <- mm.Stop(ctx, p.ID) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if ok, _ := p.Supervisor.Live(); ok {
		t.Error("the supervisor lives on")
	}
	for _, mm := range []*Manager{m, other} {
		if got, err := mm.Get(p.ID); err != nil || got.Status != StatusStopped {
			t.Errorf("after both stops: %+v, %v", got, err)
		}
	}
}

// TestStartCancelledLeavesNothing: a Start whose context ends before the
// command runs leaves no record and no supervisor.
func TestStartCancelledLeavesNothing(t *testing.T) {
	m := openManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"sleep", "300"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start: %v", err)
	}
	if ents, _ := os.ReadDir(m.store.root); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	if left := supervisorsOf(m); len(left) != 0 {
		t.Errorf("supervisors left: %v", left)
	}
}

// supervisorsOf lists the live supervisors of m's processes, from the
// host's /proc.
func supervisorsOf(m *Manager) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		b, err := os.ReadFile(p + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), supervisorArg0+"\x00"+m.store.root+"/") {
			if st, _ := os.ReadFile(p + "/stat"); !strings.Contains(string(st), ") Z ") {
				found = append(found, p)
			}
		}
	}
	return found
}

// TestLogAcrossRotation (issue 41): read between a rotation's rename and
// the new file's creation, the log is what was rotated, not empty; and a
// rotation between the two opens never gives the same bytes twice.
func TestLogAcrossRotation(t *testing.T) {
	m, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id := "0123456789ab"
	dir := m.store.dir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		r, err := m.Log(id)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	// Mid-rotation: only process.log.1 exists.
	if err := os.WriteFile(filepath.Join(dir, oldLogFile), []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "rotated\n" {
		t.Errorf("mid-rotation the log reads %q", got)
	}
	// Both, the same file (a rotation between the opens: a hard link
	// stands for it): read once.
	if err := os.Link(filepath.Join(dir, oldLogFile), filepath.Join(dir, logFile)); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "rotated\n" {
		t.Errorf("the same file under both names reads %q", got)
	}
}

// descendantsOf lists every process below pid in the host's process table
// (by the parent pid of each), with its identity.
func descendantsOf(t *testing.T, pid int) []Identity {
	t.Helper()
	parent := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscan(e.Name(), &child); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's name, which may hold anything.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscan(rest, &state, &ppid); err == nil {
			parent[ppid] = append(parent[ppid], child)
		}
	}
	var out []Identity
	for queue := parent[pid]; len(queue) > 0; queue = queue[1:] {
		if id, err := Identify(queue[0]); err == nil {
			out = append(out, id)
		}
		queue = append(queue, parent[queue[0]]...)
	}
	return out
}

// TestStopLeavesNothingRunning: when Stop returns, nothing that ran below
// the supervisor runs any more: not the command, not the sandbox's init,
// not the spawn server and its spare init, which die with the supervisor
// (PR_SET_PDEATHSIG) but on the kernel's own time unless the supervisor
// reaps them before it ends. Several rounds: the race is short.
func TestStopLeavesNothingRunning(t *testing.T) {
	m := openManager(t)
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 12 {
		p, err := m.Start(ctx, Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"sleep", "300"}})
		if err != nil {
			t.Fatal(err)
		}
		below := descendantsOf(t, p.Supervisor.Pid)
		if len(below) < 3 {
			t.Fatalf("round %d: below the supervisor: %+v; want at least the spawn server, the init and the sleep", round, below)
		}
		if err := m.Stop(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		for _, id := range below {
			if live, _ := id.Live(); live {
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", id.Pid))
				t.Errorf("round %d: when Stop returned, pid %d below the supervisor still ran: %s", round, id.Pid, stat)
			}
		}
	}
}

// TestNoSupervisorProgram: with Manager.Supervisor empty and no hutch on
// $PATH, Start refuses, naming the field, and leaves nothing in the data
// directory: the host program is never started as a supervisor instead.
func TestNoSupervisorProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	data := t.TempDir()
	m, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Start(context.Background(), Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "Manager.Supervisor") || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("Start: %v, want no supervisor program, naming Manager.Supervisor", err)
	}
	left, err := os.ReadDir(filepath.Join(data, "processes"))
	if err != nil || len(left) != 0 {
		t.Errorf("the data directory holds %v (%v), want nothing", left, err)
	}
}

// TestSpecFromAnotherVersion: sandbox.json carries the manager's decision
// whole to the supervisor; one with a field this build does not know
// (written by a newer manager), or a decision of another format, is
// refused by the supervisor, not run with the field dropped.
func TestSpecFromAnotherVersion(t *testing.T) {
	dir := t.TempDir()
	spec, err := Spec{Policy: runtime.DefaultPolicy(t.TempDir()), Args: []string{"true"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.Check(spec.Policy)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(newSandboxDoc(spec, r))
	if err != nil {
		t.Fatal(err)
	}
	var s supervisor
	got, err := s.readSpec(writeSpec(t, dir, b))
	if err != nil {
		t.Fatalf("this build's own sandbox.json: %v", err)
	}
	if !reflect.DeepEqual(got.Policy(), r.Policy()) || got.Level() != r.Level() || !reflect.DeepEqual(s.spec.Policy, r.Policy()) || !slices.Equal(s.spec.Args, spec.Args) {
		t.Errorf("read back: %+v at %s (spec %+v), want %+v at %s", got.Policy(), got.Level(), s.spec, r.Policy(), r.Level())
	}
	for name, edit := range map[string]func(doc map[string]any){
		"a spec field":            func(d map[string]any) { d["spec"].(map[string]any)["policy_v9_field"] = true },
		"a field beside the spec": func(d map[string]any) { d["policy_v9_field"] = true },
		"a resolved policy field": func(d map[string]any) {
			d["resolved"].(map[string]any)["policy"].(map[string]any)["policy_v9_field"] = true
		},
		"another resolved format": func(d map[string]any) { d["resolved"].(map[string]any)["format"] = runtime.ResolvedFormat + 1 },
		"no decision":             func(d map[string]any) { delete(d, "resolved") },
	} {
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		bad, _ := json.Marshal(d)
		if _, err := s.readSpec(writeSpec(t, dir, bad)); err == nil {
			t.Errorf("sandbox.json with %s: read, want refused", name)
		}
	}
}

// writeSpec writes b as dir's sandbox.json, and returns dir.
func writeSpec(t *testing.T, dir string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, sandboxFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
