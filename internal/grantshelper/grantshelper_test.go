package grantshelper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/approvals/grantsdb"
)

// The test binary is its own helper: with $FAKE_HELPER set it serves as
// hutch-grants does ("serve"), or serves and dies at the first request
// ("die").
func TestMain(m *testing.M) {
	mode := os.Getenv("FAKE_HELPER")
	if mode == "" {
		os.Exit(m.Run())
	}
	if len(os.Args) != 3 || os.Args[1] != "--db" {
		fmt.Fprintf(os.Stderr, "bad command line %q", os.Args)
		os.Exit(2)
	}
	in := os.Stdin
	if log := os.Getenv("FAKE_HELPER_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintln(f, "started")
			f.Close()
		}
	}
	if mode == "die" {
		// Ready, then gone before answering.
		fmt.Println("{}")
		fmt.Fprintln(os.Stderr, "helper's last words")
		os.Exit(3)
	}
	if err := Serve(in, os.Stdout, func() (approvals.Backend, error) { return grantsdb.Open(os.Args[2]) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func self(t *testing.T, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_HELPER", mode)
	return exe
}

// children returns this process's children, read from /proc.
func children(t *testing.T) []string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no /proc/self/task/*/children: %v", err)
	}
	var pids []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}

// TestStoreThroughHelper: a Store kept by the helper adds, lists and
// revokes as the database does in the process, its grants come back
// whole, revoking twice is ErrNoGrant, and what it kept is in the file
// for a Store opened afresh, in the process, after the helper ended.
// With OpenIdle, the helper runs from the first call to Close, not after
// the open.
func TestStoreThroughHelper(t *testing.T) {
	exe := self(t, "serve")
	path := filepath.Join(t.TempDir(), "state", "grants.db")
	s, err := open(exe, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("after Open, children %v: the helper outlived its check of the database", c)
	}
	if s.Path() != path {
		t.Errorf("Path = %q, want %q", s.Path(), path)
	}
	now := time.Unix(0, time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC).UnixNano())
	want := approvals.Grant{Agent: "coder", Tool: "bash", Pattern: "npm *", Workspace: "/w", Decision: approvals.Allow, Created: now, Expires: now.Add(time.Hour)}
	id, err := s.Add(want)
	if err != nil || id != 1 {
		t.Fatalf("Add = %d, %v", id, err)
	}
	want.ID = id
	if _, err := s.Add(approvals.Grant{Agent: "coder", Tool: "bash", Pattern: "x", Workspace: "/w", Decision: approvals.Deny, Created: now}); err != nil {
		t.Fatal(err)
	}
	gs, err := s.List(now, false)
	if err != nil || len(gs) != 2 || !sameGrant(gs[0], want) {
		t.Fatalf("List = %+v, %v; want first %+v", gs, err, want)
	}
	if gs, _ := s.List(now.Add(2*time.Hour), false); len(gs) != 1 || gs[0].ID != 2 {
		t.Errorf("List past the first's expiry = %+v", gs)
	}
	if err := s.Revoke(2, now); err != nil {
		t.Fatal(err)
	}
	if c := children(t); len(c) != 1 {
		t.Errorf("children %v, want the one helper answering every call", c)
	}
	err = s.Revoke(2, now)
	if !errors.Is(err, approvals.ErrNoGrant) || !strings.Contains(err.Error(), "grant 2") {
		t.Errorf("revoking twice: %v, want ErrNoGrant naming grant 2", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := s.List(now, true); err == nil {
		t.Error("List after Close: no error")
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("after Close, children %v", c)
	}

	in, err := grantsdb.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	gs, err = in.List(now, true)
	if err != nil || len(gs) != 2 || !sameGrant(gs[0], want) || gs[1].Revoked.IsZero() {
		t.Errorf("the file, read in the process: %+v, %v", gs, err)
	}
}

func sameGrant(a, b approvals.Grant) bool {
	return a.ID == b.ID && a.Agent == b.Agent && a.Tool == b.Tool && a.Pattern == b.Pattern && a.Workspace == b.Workspace &&
		a.Decision == b.Decision && a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && a.Revoked.Equal(b.Revoked)
}

// TestHelperFailures: a database the helper cannot open fails Open with
// its reason, a helper that dies fails the call with what it said and
// the next call runs it again, and a missing helper is named.
func TestHelperFailures(t *testing.T) {
	dir := t.TempDir()
	if _, err := open(self(t, "serve"), dir, true); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory as the database: %v, want an error naming it", err)
	}

	log := filepath.Join(dir, "starts")
	t.Setenv("FAKE_HELPER_LOG", log)
	s, err := open(self(t, "die"), filepath.Join(dir, "grants.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.List(time.Now(), true)
	if err == nil || !strings.Contains(err.Error(), "helper's last words") || !strings.Contains(err.Error(), Name) {
		t.Errorf("a call to a dead helper: %v, want its stderr and %s", err, Name)
	}
	if _, err2 := s.Add(approvals.Grant{Decision: approvals.Allow}); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("the call after: %v, want %v", err2, err)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "started") != 3 {
		t.Errorf("the helper ran %d times, want 3 (Open's check, then each call)", strings.Count(string(b), "started"))
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("children %v after the helper died", c)
	}
	s.Close()

	t.Setenv("PATH", t.TempDir())
	if _, err := Open(filepath.Join(dir, "grants.db")); err == nil || !strings.Contains(err.Error(), Name) {
		t.Errorf("no helper: %v, want an error naming %s", err, Name)
	}
}

// TestOpenKeepsItsHelper: Open's run of the helper answers the Store's
// calls (one run for an open and three calls, as hutch grants makes), and
// ends with Close.
func TestOpenKeepsItsHelper(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "starts")
	t.Setenv("FAKE_HELPER_LOG", log)
	s, err := open(self(t, "serve"), filepath.Join(dir, "grants.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	if c := children(t); len(c) != 1 {
		t.Errorf("after Open, children %v, want its helper", c)
	}
	now := time.Now()
	id, err := s.Add(approvals.Grant{Agent: "coder", Tool: "bash", Pattern: "ls", Workspace: "/w", Decision: approvals.Allow})
	if err == nil {
		err = s.Revoke(id, now)
	}
	if err != nil {
		t.Fatal(err)
	}
	if gs, err := s.List(now, true); err != nil || len(gs) != 1 || gs[0].Revoked.IsZero() {
		t.Errorf("List = %+v, %v", gs, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "started") != 1 {
		t.Errorf("the helper ran %d times for an Open and three calls, want once", strings.Count(string(b), "started"))
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("after Close, children %v", c)
	}
}
