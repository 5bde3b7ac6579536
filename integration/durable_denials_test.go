//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"strings"
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

// TestDurableExplainAPI: POST /v1/processes/start with explain appends
// to the process's log, at its run's end, the line naming what the run
// was refused (the log is the supervisor's file on the host; the line is
// hutch's, after the command's own output). A server that records no
// denials refuses explain, naming the field.
func TestDurableExplainAPI(t *testing.T) {
	ws, data := dir(t, "durable-explain-ws-"), dir(t, "durable-explain-data-")
	s := startServe(t, ws, data)
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	var rec processes.Process
	body := `{"argv":["python3","-c","import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0); print('done')"],"restart":"never","explain":true}`
	if code := s.call(t, "POST", "/v1/processes/start", body, &rec); code != 200 || rec.ID == "" {
		t.Fatalf("start with explain: %d %+v", code, rec)
	}
	var log string
	if !waitFor(30*time.Second, func() bool {
		b, err := os.ReadFile(rec.Log)
		log = string(b)
		return err == nil && strings.Contains(log, "hutch: refused")
	}) {
		t.Fatalf("the log %s never told the refusal: %q", rec.Log, log)
	}
	if i, j := strings.Index(log, "done"), strings.Index(log, "hutch: refused"); i < 0 || j < i || !strings.Contains(log[j:], "bpf") {
		t.Errorf("the log: %q; want the command's output, then hutch's line naming bpf", log)
	}

	off := startServe(t, ws, dir(t, "durable-explain-data-"), "--denials", "off")
	var e struct {
		Error struct{ Field, Code string }
	}
	if code := off.call(t, "POST", "/v1/processes/start", `{"argv":["true"],"explain":true}`, &e); code != 400 || e.Error.Field != "explain" {
		t.Errorf("explain with --denials off: %d %+v; want 400 naming explain", code, e)
	}
}
