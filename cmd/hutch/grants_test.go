//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
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

// TestGrantsRulesFile: hutch grants decide --rules FILE decides by the
// file's rules over the defaults, and hutch grants rules prints the
// table in effect, sorted (issue 46).
func TestGrantsRulesFile(t *testing.T) {
	dir := t.TempDir()
	db, rules := filepath.Join(dir, "grants.db"), filepath.Join(dir, "rules.toml")
	if err := os.WriteFile(rules, []byte("[tools.bash]\ndecision = \"deny\"\n\n[tools.deploy]\ndecision = \"allow\"\ndanger = \"high\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	decide := func(tool string, extra ...string) approvals.Verdict {
		t.Helper()
		args := append([]string{"grants", "--db", db, "decide", "--tool", tool, "--arg", "make deploy"}, extra...)
		code, stdout, stderr := hutchOutput(t, args...)
		var v approvals.Verdict
		if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil {
			t.Fatalf("%q: exit %d: %s%s", args, code, stdout, stderr)
		}
		return v
	}
	for _, tc := range []struct {
		tool         string
		dflt, byFile approvals.Decision
	}{
		{"bash", approvals.Prompt, approvals.Deny},
		{"deploy", approvals.Prompt, approvals.Allow},
		{"read_file", approvals.Allow, approvals.Allow}, // attocode's, by default
		{"spawn_agent", approvals.Allow, approvals.Allow},
	} {
		if v := decide(tc.tool); v.Decision != tc.dflt {
			t.Errorf("decide --tool %s: %+v; want %s", tc.tool, v, tc.dflt)
		}
		if v := decide(tc.tool, "--rules", rules); v.Decision != tc.byFile {
			t.Errorf("decide --tool %s --rules: %+v; want %s", tc.tool, v, tc.byFile)
		}
	}
	if v := decide("bash", "--rules", rules); v.Danger != approvals.DangerHigh {
		t.Errorf("bash --rules keeps its danger: %+v", v)
	}

	type row struct {
		Tool     string             `json:"tool"`
		Decision approvals.Decision `json:"decision"`
		Danger   approvals.Danger   `json:"danger"`
		Shell    bool               `json:"shell"`
	}
	code, stdout, stderr := hutchOutput(t, "grants", "rules", "--rules", rules, "--json")
	var rows []row
	if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil {
		t.Fatalf("rules --json: exit %d: %s%s", code, stdout, stderr)
	}
	want, err := approvals.LoadRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) || !slices.IsSortedFunc(rows, func(a, b row) int { return strings.Compare(a.Tool, b.Tool) }) {
		t.Errorf("rules --json: %d rows, sorted %v; want %d, sorted", len(rows), slices.IsSortedFunc(rows, func(a, b row) int { return strings.Compare(a.Tool, b.Tool) }), len(want))
	}
	for _, r := range rows {
		if w := want[r.Tool]; w.Decision != r.Decision || w.Danger != r.Danger || w.Shell != r.Shell {
			t.Errorf("rules --json: %+v; LoadRules has %+v", r, w)
		}
	}
	code, stdout, _ = hutchOutput(t, "grants", "rules")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != len(approvals.DefaultRules())+1 || !slices.IsSorted(lines[1:]) ||
		!slices.Contains(lines, "bash           prompt    high    true") || !slices.Contains(lines, "read_file      allow     low     false") {
		t.Errorf("rules: exit %d:\n%s", code, stdout)
	}
}

// TestGrantsRulesRefused: a bad rules file is refused before anything is
// decided, naming --rules, the file, and the tool and field at fault.
func TestGrantsRulesRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[tools.bash]\ndecision = \"sometimes\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "grants.db")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"grants", "--db", db, "decide", "--tool", "bash", "--arg", "ls", "--rules", bad}, []string{"--rules", bad + ":2: tools.bash.decision", `"sometimes"`}},
		{[]string{"grants", "rules", "--rules", bad}, []string{"--rules", bad + ":2: tools.bash.decision"}},
		{[]string{"grants", "rules", "--rules", dir}, []string{"--rules", dir, "not a regular file"}},
		{[]string{"grants", "--db", db, "decide", "--tool", "bash", "--rules", filepath.Join(dir, "none.toml")}, []string{"--rules", filepath.Join(dir, "none.toml")}},
	} {
		code, stdout, stderr := hutchOutput(t, tc.args...)
		if code == 0 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want a refusal", tc.args, code, stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused --rules opened the database %s", db)
	}
}
