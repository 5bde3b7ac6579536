//go:build linux

package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// TestDurableDenials: a durable process's record says what its run was
// refused, by which rule, while the run goes on (a server that keeps
// running after a refusal) and once it has ended. The refusal is the
// host's own record of it (the seccomp listener's), read from the record
// the supervisor keeps on the host, never from what the command prints.
func TestDurableDenials(t *testing.T) {
	ws, data := dir(t, "durable-denials-ws-"), dir(t, "durable-denials-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	// bpf(2) three times, then a server's life: sleep.
	p := startDurable(t, data, ws, "refused", "python3", "-c",
		`import ctypes, time
l = ctypes.CDLL(None, use_errno=True)
for _ in range(3): l.syscall(321, 0, 0, 0)
time.sleep(3000)`)
	bpf := func(p processes.Process) *runtime.Denial {
		if len(p.Runs) == 0 {
			return nil
		}
		for _, d := range p.Runs[len(p.Runs)-1].Denials {
			if d.Source == runtime.DenialSeccomp && d.Op == "bpf" {
				return &d
			}
		}
		return nil
	}
	get := func() processes.Process {
		t.Helper()
		out, stderr, code := hutchProcess(t, data, "get", p.ID)
		var got processes.Process
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("get %s: exit %d, %s%s", p.ID, code, out, stderr)
		}
		return got
	}
	var d *runtime.Denial
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := get()
		if d = bpf(got); d != nil && d.Count == 3 {
			if got.Status != processes.StatusRunning {
				t.Errorf("the record told the refusals of a run that is %s, want running", got.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after start the running process's record tells %+v; want bpf refused 3 times (runs %+v)", d, got.Runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if d.Rule != runtime.RuleSeccomp || d.Errno != "EPERM" || d.Reason == "" {
		t.Errorf("the refusal while running: %+v; want rule seccomp, EPERM, a reason", *d)
	}
	if out, stderr, code := hutchProcess(t, data, "stop", p.ID); code != 0 {
		t.Fatalf("stop: exit %d, %s%s", code, out, stderr)
	}
	got := get()
	if d := bpf(got); d == nil || d.Count != 3 {
		t.Errorf("the stopped process's last run tells %+v; want bpf refused 3 times", d)
	}
}
