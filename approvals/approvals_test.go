package approvals

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

func TestDefaults(t *testing.T) {
	e := Engine{}
	for tool, want := range map[string]Decision{"read": Allow, "glob": Allow, "grep": Allow, "write": Allow, "edit": Allow, "bash": Deny, "launch-missiles": Deny} {
		v, err := e.Decide(context.Background(), Call{Tool: tool, Arg: "x"})
		if err != nil || v.Decision != want {
			t.Errorf("%s: %+v, %v; want %s (a prompt with no one to ask denies)", tool, v, err, want)
		}
	}
	if v, _ := e.Lookup(Call{Tool: "bash"}); v.Decision != Prompt || v.Danger != DangerHigh {
		t.Errorf("Lookup bash: %+v", v)
	}
}

func TestPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, arg string
		want         bool
	}{
		{"npm *", "npm test", true}, {"npm *", "npm", false}, {"npm *", "npx test", false},
		{"git status", "git status", true}, {"git status", "git status; rm -rf /", false},
		{`a\*b`, "a*b", true}, {`a\*b`, "axb", false}, {"*", "anything\nat all", true},
		{"ls .", "ls ./", false}, {escapePattern("rm -rf /tmp/x*"), "rm -rf /tmp/x*", true},
		{escapePattern("rm -rf /tmp/x*"), "rm -rf /tmp/xyz", false},
	} {
		if got := matchPattern(tc.pattern, tc.arg); got != tc.want {
			t.Errorf("matchPattern(%q, %q) = %v", tc.pattern, tc.arg, got)
		}
	}
}

// TestRememberedAcrossStores: an approval remembered through the hook is
// found by a store opened afresh on the same file (as a restarted host
// would), for the calls its scope covers only; expiry and revocation
// bring the prompt back.
func TestRememberedAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "grants.db")
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	asked := 0
	engine := func(s *Store) *Engine {
		return &Engine{Store: s, Now: func() time.Time { return now }, Approve: func(_ context.Context, c Call, v Verdict) (Answer, error) {
			asked++
			return Answer{Allow: true, Remember: true, Pattern: "npm *", For: time.Hour}, nil
		}}
	}
	call := Call{Agent: "coder", Tool: "bash", Arg: "npm test", Workspace: "/w"}
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := engine(s).Decide(context.Background(), call)
	if err != nil || v.Decision != Allow || v.Grant == 0 || asked != 1 {
		t.Fatalf("first call: %+v, %v, asked %d", v, err, asked)
	}
	s.Close()

	s, err = OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := engine(s)
	for _, c := range []struct {
		call   Call
		prompt bool
	}{
		{call, false},
		{Call{Agent: "coder", Tool: "bash", Arg: "npm run build", Workspace: "/w"}, false},
		{Call{Agent: "coder", Tool: "bash", Arg: "curl evil", Workspace: "/w"}, true},
		{Call{Agent: "other", Tool: "bash", Arg: "npm test", Workspace: "/w"}, true},
		{Call{Agent: "coder", Tool: "bash", Arg: "npm test", Workspace: "/elsewhere"}, true},
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
	if v, _ := e.Lookup(call); v.Decision != Prompt {
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
	if v, _ := e.Lookup(call); v.Decision != Prompt {
		t.Errorf("after revocation: %+v", v)
	}
	if err := s.Revoke(first, now); !errors.Is(err, ErrNoGrant) {
		t.Errorf("revoking twice: %v", err)
	}
}

// TestProtectRefusesWritable: a database the sandbox could write is
// refused, naming it; one outside is masked.
func TestProtectRefusesWritable(t *testing.T) {
	ws := t.TempDir()
	s, err := OpenStore(filepath.Join(ws, ".hutch", "grants.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := runtime.DefaultPolicy(ws)
	var pe *runtime.PolicyError
	if err := s.Protect(&p); !errors.As(err, &pe) {
		t.Errorf("a database in the workspace: %v", err)
	}
	out, err := OpenStore(filepath.Join(t.TempDir(), "grants.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Protect(&p); err != nil || len(p.Deny) != 1 {
		t.Errorf("a database outside: %v, deny %v", err, p.Deny)
	}
	// A writable root holds every database (the check once missed "/").
	root := runtime.DefaultPolicy(ws)
	root.Writable = []string{"/"}
	if err := out.Protect(&root); !errors.As(err, &pe) {
		t.Errorf("a writable /: %v", err)
	}
}
