package grantsdb_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/approvals/grantsdb"
)

// TestRememberedAcrossStores: an approval remembered through the hook is
// found by a store opened afresh on the same file (as a restarted host
// would), for the calls its scope covers only; expiry and revocation
// bring the prompt back.
func TestRememberedAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "grants.db")
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	asked := 0
	engine := func(s *approvals.Store) *approvals.Engine {
		return &approvals.Engine{Store: s, Now: func() time.Time { return now }, Approve: func(_ context.Context, c approvals.Call, v approvals.Verdict) (approvals.Answer, error) {
			asked++
			return approvals.Answer{Allow: true, Remember: true, Pattern: "npm *", For: time.Hour}, nil
		}}
	}
	call := approvals.Call{Agent: "coder", Tool: "bash", Arg: "npm test", Workspace: "/w"}
	s, err := grantsdb.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := engine(s).Decide(context.Background(), call)
	if err != nil || v.Decision != approvals.Allow || v.Grant == 0 || asked != 1 {
		t.Fatalf("first call: %+v, %v, asked %d", v, err, asked)
	}
	s.Close()

	s, err = grantsdb.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := engine(s)
	for _, c := range []struct {
		call   approvals.Call
		prompt bool
	}{
		{call, false},
		{approvals.Call{Agent: "coder", Tool: "bash", Arg: "npm run build", Workspace: "/w"}, false},
		{approvals.Call{Agent: "coder", Tool: "bash", Arg: "curl evil", Workspace: "/w"}, true},
		{approvals.Call{Agent: "other", Tool: "bash", Arg: "npm test", Workspace: "/w"}, true},
		{approvals.Call{Agent: "coder", Tool: "bash", Arg: "npm test", Workspace: "/elsewhere"}, true},
	} {
		before := asked
		v, err := e.Decide(context.Background(), c.call)
		if err != nil || (asked > before) != c.prompt {
			t.Errorf("%+v: %+v, %v; prompted %v, want %v", c.call, v, err, asked > before, c.prompt)
		}
	}
	gs, _ := s.List(now, false)
	first := gs[0].ID
	now = now.Add(2 * time.Hour) // past the first grant's hour
	if v, _ := e.Lookup(call); v.Decision != approvals.Prompt {
		t.Errorf("after expiry: %+v", v)
	}
	now = now.Add(-2 * time.Hour)
	if err := s.Revoke(first, now); err != nil {
		t.Fatal(err)
	}
	// Another one may cover it; revoke all to see the prompt again.
	gs, _ = s.List(now, false)
	for _, g := range gs {
		s.Revoke(g.ID, now)
	}
	if v, _ := e.Lookup(call); v.Decision != approvals.Prompt {
		t.Errorf("after revocation: %+v", v)
	}
	if err := s.Revoke(first, now); !errors.Is(err, approvals.ErrNoGrant) {
		t.Errorf("revoking twice: %v", err)
	}
}

// TestOpenMakesPrivateFiles: the database and the directory made for it
// are the user's alone, and a path that cannot be a database is an error
// naming it.
func TestOpenMakesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := grantsdb.OpenStore(filepath.Join(dir, "grants.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700, s.Path(): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %o", path, fi.Mode(), err, want)
		}
	}
	if _, err := grantsdb.OpenStore(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory as the database: %v", err)
	}
}
