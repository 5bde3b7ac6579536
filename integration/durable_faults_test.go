//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/processes"
)

// Durable processes under faults (issue 41): a record that cannot be read
// disables nothing but itself, and stopped means that nothing of the
// process runs, whatever its record says. Judged in /proc.

// TestDurableUnreadableRecord: with one record truncated and another
// replaced by a directory, hutch process list still lists every process
// (the bad ones as unreadable, with the reason), a sibling is stopped,
// the processes behind the bad records are stopped too (found by the lock
// their supervisors hold), and hutch serve starts on the data directory.
func TestDurableUnreadableRecord(t *testing.T) {
	ws, data := dir(t, "durable-ws-"), dir(t, "durable-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	start := func(name string, cmd ...string) processes.Process { return startDurable(t, data, ws, name, cmd...) }
	a, b, c := start("a", "sleep", "3011"), start("b", "sleep", "3012"), start("c", "sleep", "3013")
	aSup, aCmd := *a.Supervisor, identityOf(t, a.Pid)
	bSup, bCmd := *b.Supervisor, identityOf(t, b.Pid)
	cSup, cCmd := *c.Supervisor, identityOf(t, c.Pid)
	recA := filepath.Join(data, "processes", a.ID, "record.json")
	recC := filepath.Join(data, "processes", c.ID, "record.json")
	whole, err := os.ReadFile(recA)
	must(err)
	must(os.WriteFile(recA, whole[:len(whole)/2], 0o600))
	must(os.Remove(recC))
	must(os.Mkdir(recC, 0o700))

	out, stderr, code := hutchProcess(t, data, "list")
	var list []processes.Process
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 {
		t.Fatalf("list with two bad records: exit %d, %s%s", code, out, stderr)
	}
	for _, p := range list {
		bad := p.ID == a.ID || p.ID == c.ID
		if bad != (p.Status == processes.StatusUnreadable) || bad && !strings.Contains(p.Reason, "record.json") {
			t.Errorf("listed %s as %s (%s)", p.ID, p.Status, p.Reason)
		}
	}
	if _, stderr, code := hutchProcess(t, data, "stop", b.ID); code != 0 || live(bSup) || live(bCmd) {
		t.Errorf("stop of the sibling: exit %d (%s); supervisor live %v, command live %v", code, stderr, live(bSup), live(bCmd))
	}
	if _, stderr, code := hutchProcess(t, data, "stop", a.ID); code != 0 || live(aSup) || live(aCmd) {
		t.Errorf("stop of the truncated record's process: exit %d (%s); supervisor live %v, command live %v", code, stderr, live(aSup), live(aCmd))
	}
	if _, stderr, code := hutchProcess(t, data, "stop-all"); code != 0 || live(cSup) || live(cCmd) {
		t.Errorf("stop-all with a directory for a record: exit %d (%s); supervisor live %v, command live %v", code, stderr, live(cSup), live(cCmd))
	}
	s := startServe(t, ws, data)
	if err := s.health(); err != nil {
		t.Errorf("hutch serve on the data directory: %v", err)
	}
	// Stopped, the bad records go as any other.
	for _, id := range []string{a.ID, c.ID} {
		if _, stderr, code := hutchProcess(t, data, "rm", id); code != 0 {
			t.Errorf("rm of an unreadable record: exit %d (%s)", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(data, "processes", id)); err == nil {
			t.Errorf("rm left %s", id)
		}
	}
}

// TestDurableStaleButAliveStopped: a record judged stale (another boot's
// id: restored or edited) while its supervisor runs is stopped by hutch
// process stop and by stop-all: nothing of it runs afterwards.
func TestDurableStaleButAliveStopped(t *testing.T) {
	ws, data := dir(t, "durable-ws-"), dir(t, "durable-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	var started []processes.Process
	for i, name := range []string{"x", "y", "z"} {
		started = append(started, startDurable(t, data, ws, name, "sleep", fmt.Sprint(3021+i)))
	}
	for _, p := range started {
		rec := filepath.Join(data, "processes", p.ID, "record.json")
		b, err := os.ReadFile(rec)
		must(err)
		var r map[string]any
		must(json.Unmarshal(b, &r))
		r["supervisor"].(map[string]any)["boot_id"] = "00000000-0000-4000-8000-000000000000"
		b, err = json.Marshal(r)
		must(err)
		must(os.WriteFile(rec+".tmp", b, 0o600))
		must(os.Rename(rec+".tmp", rec))
	}
	x, y, z := started[0], started[1], started[2]
	xSup, xCmd, ySup, yCmd := *x.Supervisor, identityOf(t, x.Pid), *y.Supervisor, identityOf(t, y.Pid)
	// z's record is read (and judged stale); then its command dies: its
	// supervisor, no longer the record's, restarts nothing and ends.
	zSup := *z.Supervisor
	if out, _, code := hutchProcess(t, data, "get", z.ID); code != 0 || !strings.Contains(out, `"stale"`) {
		t.Fatalf("get %s: exit %d, %s", z.ID, code, out)
	}
	must(syscall.Kill(z.Pid, syscall.SIGKILL))
	if !waitFor(15*time.Second, func() bool { return !live(zSup) }) {
		t.Errorf("the supervisor of a record judged stale lives on after its command died")
	}
	time.Sleep(time.Second)
	if pids := procsWithArg("3023"); len(pids) > 0 {
		t.Errorf("the stale supervisor restarted its command: pids %v", pids)
	}
	if _, stderr, code := hutchProcess(t, data, "stop", x.ID); code != 0 || live(xSup) || live(xCmd) {
		t.Errorf("stop of a stale record's live process: exit %d (%s); supervisor live %v, command live %v", code, stderr, live(xSup), live(xCmd))
	}
	if _, stderr, code := hutchProcess(t, data, "stop-all"); code != 0 {
		t.Errorf("stop-all: exit %d (%s)", code, stderr)
	}
	if !waitFor(5*time.Second, func() bool { return !live(ySup) && !live(yCmd) }) {
		t.Errorf("after stop-all: supervisor live %v, command live %v", live(ySup), live(yCmd))
	}
}

// TestServeDurableNoPool: a durable process started through a server with
// --prewarm does not inherit its pool: below its supervisor there is its
// command's init and at most the spawn server's one spare, not the
// server's prewarmed inits again.
func TestServeDurableNoPool(t *testing.T) {
	ws, data := dir(t, "durable-ws-"), dir(t, "durable-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	s := startServe(t, ws, data, "--prewarm", "3")
	var p processes.Process
	if status := s.call(t, "POST", "/v1/processes/start", mustJSON(map[string]any{"argv": []string{"sleep", "3031"}}), &p); status != 200 || p.Supervisor == nil {
		t.Fatalf("start: %d %+v", status, p)
	}
	// Give a pool the time to fill, were there one.
	time.Sleep(2 * time.Second)
	inits := 0
	var walk func(pid int)
	walk = func(pid int) {
		// Each thread's children: a Go process forks from any thread.
		var b []byte
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, task := range tasks {
			c, _ := os.ReadFile(task)
			b = append(append(b, c...), ' ')
		}
		for _, f := range strings.Fields(string(b)) {
			var child int
			fmt.Sscan(f, &child)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child)); strings.TrimSpace(string(comm)) == "hutch-init" {
				inits++
			}
			walk(child)
		}
	}
	walk(p.Supervisor.Pid)
	if inits == 0 || inits > 2 {
		t.Errorf("%d sandbox inits below the durable process's supervisor; want its command's and at most one spare", inits)
	}
}

// TestDurableFullDisk: a durable process whose data directory fills up
// runs on (its output dropped and counted), hutch process list works and
// says the log is full, and once there is room again the log resumes with
// a line saying how much was lost. A tmpfs of its own stands for the
// disk (root only).
func TestDurableFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	data := dir(t, "durable-data-")
	if err := syscall.Mount("tmpfs", data, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		hutchProcess(t, data, "stop-all")
		syscall.Unmount(data, syscall.MNT_DETACH)
	})
	ws := dir(t, "durable-ws-")
	p := startDurable(t, data, ws, "talker", "sh", "-c", "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.01; done")
	cmd := identityOf(t, p.Pid)
	// Fill what is left.
	filler := filepath.Join(data, "filler")
	f, err := os.Create(filler)
	must(err)
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	var rec processes.Process
	if !waitFor(30*time.Second, func() bool {
		out, _, code := hutchProcess(t, data, "get", p.ID)
		return code == 0 && json.Unmarshal([]byte(out), &rec) == nil && rec.LogFull && rec.LogDropped > 0
	}) {
		t.Fatalf("the record does not say the log is full: %+v", rec)
	}
	if !live(cmd) || !live(*p.Supervisor) {
		t.Fatalf("on a full disk: command live %v, supervisor live %v", live(cmd), live(*p.Supervisor))
	}
	out, stderr, code := hutchProcess(t, data, "list")
	if code != 0 || !strings.Contains(out, `"log_full": true`) {
		t.Errorf("list on a full disk: exit %d, %s%s", code, out, stderr)
	}
	must(os.Remove(filler))
	if !waitFor(30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "processes", p.ID, "process.log"))
		return strings.Contains(string(b), "bytes of output were dropped")
	}) {
		t.Error("the log did not resume with what was lost")
	}
	if !waitFor(10*time.Second, func() bool {
		out, _, code := hutchProcess(t, data, "get", p.ID)
		rec = processes.Process{} // log_full false is left out of the JSON
		return code == 0 && json.Unmarshal([]byte(out), &rec) == nil && !rec.LogFull
	}) {
		t.Errorf("the record still says the log is full: %+v", rec)
	}
	if !live(cmd) {
		t.Error("the command did not survive the full disk")
	}
}
