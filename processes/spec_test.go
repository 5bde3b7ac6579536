package processes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

func TestRestartDelay(t *testing.T) {
	base, max := 2*time.Second, 60*time.Second
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, restartDelay(n, base, max))
	}
	want := []time.Duration{2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if d := restartDelay(1000, base, max); d != max {
		t.Errorf("after 1000 failures: %v", d)
	}
}

func TestSpecRefused(t *testing.T) {
	ok := Spec{Args: []string{"true"}}
	for _, tc := range []struct {
		edit  func(*Spec)
		field string
	}{
		{func(s *Spec) { s.Args = nil }, "Spec.Args"},
		{func(s *Spec) { s.Args = []string{""} }, "Spec.Args"},
		{func(s *Spec) { s.Restart = "sometimes" }, "Spec.Restart"},
		{func(s *Spec) { s.RestartDelay = -time.Second }, "Spec.RestartDelay"},
		{func(s *Spec) { s.RestartDelay = time.Microsecond }, "Spec.RestartDelay"},
		{func(s *Spec) { s.StopGrace = -1 }, "Spec.StopGrace"},
		{func(s *Spec) { s.RestartDelay, s.MaxRestartDelay = 5*time.Second, time.Second }, "Spec.MaxRestartDelay"},
		{func(s *Spec) { s.LogMaxBytes = 100 }, "Spec.LogMaxBytes"},
		// Never written to disk, so never the supervisor's: refused, not
		// dropped.
		{func(s *Spec) { s.Policy.LeakValues = map[string]string{"API_KEY": "0123456789abcdef"} }, "Spec.Policy.LeakValues"},
	} {
		s := ok
		tc.edit(&s)
		_, err := s.withDefaults()
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%+v: %v; want a PolicyError on %s", s, err, tc.field)
		}
	}
	s, err := ok.withDefaults()
	if err != nil || s.Restart != RestartAlways || s.RestartDelay != DefaultRestartDelay || s.MaxRestartDelay != DefaultMaxRestartDelay ||
		s.StopGrace != DefaultStopGrace || s.LogMaxBytes != DefaultLogMaxBytes {
		t.Errorf("defaults: %+v, %v", s, err)
	}
}

// TestSpecRoundTrip: sandbox.json gives the supervisor the very policy
// the caller's Start checked.
func TestSpecRoundTrip(t *testing.T) {
	p := runtime.DefaultPolicy("/w")
	p.Writable, p.Deny, p.Env = []string{"/data"}, []string{"/secret"}, []string{"A=1"}
	p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	p.Apps = &runtime.AppIsolation{Dir: "apps", ID: "a1"}
	p.Timeout, p.CPUs = time.Minute, 1.5
	p.Seccomp = &seccomp.Profile{DefaultAction: "SCMP_ACT_ERRNO"}
	spec := Spec{Name: "n", Policy: p, Args: []string{"a", "b"}, Restart: RestartNever, RestartDelay: time.Second}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, spec) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, spec)
	}
}

func TestRotatingLog(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"0123", "4567", "89abcdefghij", "klm"} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write %q: %d, %v", s, n, err)
		}
	}
	l.Close()
	cur, _ := os.ReadFile(filepath.Join(dir, logFile))
	old, _ := os.ReadFile(filepath.Join(dir, oldLogFile))
	// 0123456789 filled the first log, abcdefghij the second, klm the third.
	if string(old) != "abcdefghij" || string(cur) != "klm" {
		t.Errorf("after rotation: %s=%q, %s=%q", oldLogFile, old, logFile, cur)
	}
	// Reopened, it counts what is there.
	l, _ = openLog(dir, 10)
	l.Write([]byte("nopqrstu"))
	l.Close()
	cur, _ = os.ReadFile(filepath.Join(dir, logFile))
	old, _ = os.ReadFile(filepath.Join(dir, oldLogFile))
	if string(old) != "klmnopqrst" || string(cur) != "u" {
		t.Errorf("after reopening: %q, %q", old, cur)
	}
	if fi, err := os.Stat(filepath.Join(dir, logFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode: %v, %v", fi, err)
	}
	if strings.Contains(string(cur)+string(old), "0123") {
		t.Error("the first log was kept")
	}
}

// TestRotatingLogFull: on a full disk the log drops and counts what it
// cannot write, never fails its writer, and says what was lost once it
// can write again; a rotation that could not make its new file is
// finished by the next one.
func TestRotatingLogFull(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var events []bool
	l.full = func(full bool, lost int64) { events = append(events, full) }
	// A file that fails with ENOSPC stands for the full disk.
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	good := l.f
	l.f = full
	if n, err := l.Write([]byte("lost bytes")); n != 10 || err != nil {
		t.Fatalf("a write on a full disk: %d, %v", n, err)
	}
	l.f = good
	if _, err := l.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, logFile))
	if !strings.Contains(string(b), "10 bytes of output were dropped") || !strings.HasSuffix(string(b), "after\n") {
		t.Errorf("the log holds %q", b)
	}
	if len(events) != 2 || !events[0] || events[1] {
		t.Errorf("full events %v, want [true false]", events)
	}
	// Once it dropped, the log waits for room beyond the records'
	// reserve: a write that would fit meanwhile is dropped too.
	roomy := false
	l.room = func() bool { return roomy }
	l.f = full
	l.Write([]byte("lost again"))
	l.f = good
	if n, err := l.Write([]byte("still no room\n")); n != 14 || err != nil {
		t.Fatalf("a write while the room is short: %d, %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, logFile)); strings.Contains(string(b), "still no room") {
		t.Errorf("the log wrote into the records' reserve: %q", b)
	}
	roomy = true
	l.Write([]byte("room\n"))
	if b, _ := os.ReadFile(filepath.Join(dir, logFile)); !strings.Contains(string(b), "24 bytes of output were dropped") || !strings.HasSuffix(string(b), "room\n") {
		t.Errorf("the log holds %q", b)
	}
	if len(events) != 4 || !events[2] || events[3] {
		t.Errorf("full events %v, want [true false true false]", events)
	}
	// A rotation that renamed the log but could not make the new one.
	if err := os.Rename(filepath.Join(dir, logFile), filepath.Join(dir, oldLogFile)); err != nil {
		t.Fatal(err)
	}
	if err := l.rotate(); err != nil {
		t.Fatalf("a rotation after a half-done one: %v", err)
	}
}
