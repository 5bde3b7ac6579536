//go:build unix

package approvals

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeRules(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "rules.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	path := writeRules(t, dir, `# an agent's rules
[tools.bash]
decision = "deny"

[tools.read_file]
decision = "prompt"
danger = "medium"

[tools.deploy]
decision = "prompt"
danger = "high"
shell = true

[tools.fetch_url]
decision = "allow"
danger = "low"

[tools]
notes = { decision = "deny", danger = "low" }
`)
	got, err := LoadRules(path)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultRules()
	want["bash"] = Rule{Decision: Deny, Danger: DangerHigh, Shell: true}
	want["read_file"] = Rule{Decision: Prompt, Danger: DangerMedium}
	want["deploy"] = Rule{Decision: Prompt, Danger: DangerHigh, Shell: true}
	want["fetch_url"] = Rule{Decision: Allow, Danger: DangerLow}
	want["notes"] = Rule{Decision: Deny, Danger: DangerLow}
	if !maps.Equal(got, want) {
		t.Errorf("LoadRules:\n got %v\nwant %v", got, want)
	}
	// The engine decides by them: deploy is a shell tool, judged command
	// by command against the grants.
	s, err := memStore(filepath.Join(dir, "grants.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Add(Grant{Tool: "deploy", Pattern: "make deploy*", Decision: Allow, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e := Engine{Rules: got, Store: s}
	for _, tc := range []struct {
		tool, arg string
		want      Decision
	}{
		{"bash", "ls", Deny}, {"read_file", "/etc/hosts", Prompt}, {"read", "/etc/hosts", Allow},
		{"deploy", "make deploy", Allow}, {"deploy", "make deploy; rm -rf ~", Prompt},
		{"fetch_url", "https://example.com", Allow}, {"notes", "x", Deny}, {"other", "x", Prompt},
	} {
		if v, err := e.Lookup(Call{Tool: tc.tool, Arg: tc.arg}); err != nil || v.Decision != tc.want {
			t.Errorf("%s %q: %+v, %v; want %s", tc.tool, tc.arg, v, err, tc.want)
		}
	}
	// An empty file is the defaults.
	if got, err := LoadRules(writeRules(t, t.TempDir(), "")); err != nil || !maps.Equal(got, DefaultRules()) {
		t.Errorf("an empty file: %v, %v", got, err)
	}
}

// TestLoadRulesRefused: every mistake is refused, naming the file, and
// where there is one the line, the tool and the field.
func TestLoadRulesRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		make    func(t *testing.T, dir string) string // instead of content
		want    []string                              // in the error, after the file's name
	}{
		{name: "unknown field", content: "[tools.bash]\ndecision = \"deny\"\nmode = \"x\"\n", want: []string{":3: tools.bash.mode: not a key"}},
		{name: "unknown top-level key", content: "version = 1\n", want: []string{":1: version: not a key", "[tools.NAME]"}},
		{name: "bad decision", content: "[tools.bash]\n\ndecision = \"maybe\"\n", want: []string{":3: tools.bash.decision:", `"maybe" is not allow, prompt or deny`}},
		{name: "bad decision case", content: "[tools.read_file]\ndecision = \"ALLOW\"\n", want: []string{":2: tools.read_file.decision:", `"ALLOW"`}},
		{name: "bad danger", content: "[tools.write]\ndanger = \"extreme\"\n", want: []string{":2: tools.write.danger:", `"extreme" is not low, medium or high`}},
		{name: "attocode's Safe is not a level", content: "[tools.glob]\ndanger = \"safe\"\n", want: []string{":2: tools.glob.danger:", `"safe"`}},
		{name: "shell not a boolean", content: "[tools.deploy]\ndecision = \"prompt\"\ndanger = \"high\"\nshell = \"yes\"\n", want: []string{":4: tools.deploy.shell: a TOML string, not true or false"}},
		{name: "decision not a string", content: "[tools.bash]\ndecision = 1\n", want: []string{":2: tools.bash.decision: a TOML integer, not a string"}},
		{name: "new tool without danger", content: "[tools.deploy]\ndecision = \"allow\"\n", want: []string{":1: tools.deploy.danger: missing"}},
		{name: "new tool without decision", content: "\n[tools.deploy]\ndanger = \"low\"\n", want: []string{":2: tools.deploy.decision: missing"}},
		{name: "table setting nothing", content: "[tools.bash]\n", want: []string{":1: tools.bash: sets none"}},
		{name: "empty tool name", content: "[tools.\"\"]\ndecision = \"allow\"\ndanger = \"low\"\n", want: []string{`:1: an empty tool name (tools."")`}},
		{name: "dotted key", content: "tools.bash.decision = \"yes\"\n", want: []string{":1: tools.bash.decision:", `"yes"`}},
		{name: "inline table", content: "[tools]\nx = 1\nbash = { decision = \"deny\", danger = \"huge\" }\n", want: []string{":2: tools.x: a TOML integer, not a table"}},
		{name: "inline table value", content: "[tools]\n\nbash = { decision = \"deny\", danger = \"huge\" }\n", want: []string{":3: tools.bash.danger:", `"huge"`}},
		{name: "two mistakes", content: "[tools.a]\ndecision = \"x\"\ndanger = \"low\"\n[tools.b]\ndecision = \"allow\"\ndanger = \"y\"\n", want: []string{":2: tools.a.decision:", ":6: tools.b.danger:"}},
		{name: "tools not a table", content: "tools = 3\n", want: []string{":1: tools: a TOML integer, not a table of [tools.NAME] tables"}},
		{name: "not TOML", content: "[tools.bash\ndecision = \"deny\"\n", want: []string{":1:"}},
		{name: "duplicate key", content: "[tools.bash]\ndecision = \"deny\"\ndecision = \"allow\"\n", want: []string{":3:"}},
		{name: "a directory", make: func(t *testing.T, dir string) string { return dir }, want: []string{"not a regular file"}},
		{name: "a device", make: func(*testing.T, string) string { return "/dev/null" }, want: []string{"not a regular file"}},
		{name: "a FIFO, refused without blocking", make: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "fifo")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, want: []string{"not a regular file"}},
		{name: "over 1 MiB", make: func(t *testing.T, dir string) string {
			return writeRules(t, dir, "[tools.bash]\ndecision = \"deny\"\n"+strings.Repeat("#", MaxRulesFileSize))
		}, want: []string{"more than 1048576 bytes"}},
		{name: "missing", make: func(t *testing.T, dir string) string { return filepath.Join(dir, "none.toml") }, want: []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var path string
			if tc.make != nil {
				path = tc.make(t, dir)
			} else {
				path = writeRules(t, dir, tc.content)
			}
			done := make(chan struct{})
			var rules map[string]Rule
			var err error
			go func() { rules, err = LoadRules(path); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("LoadRules blocked")
			}
			if err == nil {
				t.Fatalf("accepted: %v", rules)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path) && !strings.Contains(msg, " "+path) {
				t.Errorf("%q does not name the file %s", msg, path)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			var re *RulesError
			if tc.make == nil && !errors.As(err, &re) {
				t.Errorf("%v: not a *RulesError", err)
			}
		})
	}
}
