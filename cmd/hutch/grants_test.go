//go:build linux

package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hutchbox/hutch/approvals"
)

// TestGrantsDecideAsEngine: hutch grants decide prints the Verdict the
// Go engine gives on the same database, for compound commands judged
// command by command (issue 46).
func TestGrantsDecideAsEngine(t *testing.T) {
	db := filepath.Join(t.TempDir(), "grants.db")
	scope := []string{"--agent", "coder", "--tool", "bash", "--workspace", "/w"}
	for _, g := range []struct{ pattern, decision string }{{"npm test*", "allow"}, {"ls*", "allow"}, {"grep *", "allow"}, {"sh -c *", "allow"}, {"sudo *", "deny"}} {
		args := append([]string{"grants", "--db", db, "add", "--pattern", g.pattern, "--decision", g.decision}, scope...)
		if code, _, stderr := hutchOutput(t, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
	}
	s, err := approvals.OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := approvals.Engine{Store: s}
	for arg, want := range map[string]approvals.Decision{
		"npm test; rm -rf ~":          approvals.Prompt,
		"ls; sudo rm -rf /":           approvals.Deny,
		"npm test && ls -l | grep x":  approvals.Allow,
		"echo $(sudo id)":             approvals.Deny,
		"sh -c 'npm test; rm -rf ~'":  approvals.Prompt,
		"sh -c 'npm test && ls'":      approvals.Allow,
		`sh -c "$X"`:                  approvals.Prompt,
		"$X args":                     approvals.Prompt,
		"npm test 'unterminated":      approvals.Prompt,
		"cat <<EOF\n$(rm -rf ~)\nEOF": approvals.Prompt,
	} {
		code, stdout, stderr := hutchOutput(t, append([]string{"grants", "--db", db, "decide", "--arg", arg}, scope...)...)
		var got approvals.Verdict
		if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil {
			t.Errorf("decide %q: exit %d: %s%s", arg, code, stdout, stderr)
			continue
		}
		v, err := e.Lookup(approvals.Call{Agent: "coder", Tool: "bash", Workspace: "/w", Arg: arg})
		if err != nil || !reflect.DeepEqual(got, v) || got.Decision != want {
			t.Errorf("decide %q: the CLI says %+v, the engine %+v (%v); want %s", arg, got, v, err, want)
		}
	}
}
