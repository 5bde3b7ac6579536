package processes

import (
	"context"
	"fmt"
	"io"
	"os"
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
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.Supervisor.Pid)); err == nil {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Supervisor.Pid))
		t.Errorf("the supervisor %d still exists: %s", p.Supervisor.Pid, st)
	}
}
