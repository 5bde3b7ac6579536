//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/policyfile"
	"github.com/hutchbox/hutch/runtime"
)

// TestPolicyFileCLI (issue 18, the policy file): hutch run --policy reads
// a TOML file on top of the default, --profile a table of it on top, and
// the flags add to both; each verdict is the host's (the files a command
// could write). policy check names the file, line and key of a mistake;
// policy show prints a file that reads back to the same policy; policy
// default prints the embedded default.
func TestPolicyFileCLI(t *testing.T) {
	ws, extra, other := dir(t, "pol-ws-"), dir(t, "pol-extra-"), dir(t, "pol-other-")
	for _, d := range []string{extra, other} {
		must(os.Chmod(d, 0o777))
	}
	must(os.MkdirAll(filepath.Join(ws, "docs"), 0o777))
	file := filepath.Join(dir(t, "pol-file-"), "policy.toml")
	must(os.WriteFile(file, []byte(`version = 1
[sandbox]
writable = ["`+extra+`"]

[profiles.readonly-docs]
read_only = ["docs"]
`), 0o644))
	write := `echo x > "$1"/f 2>/dev/null; true`
	written := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "f"))
		os.Remove(filepath.Join(d, "f"))
		return err == nil
	}
	for _, tc := range []struct {
		name  string
		flags []string
		d     string
		want  bool
	}{
		{"no file: extra is read-only", nil, extra, false},
		{"the file makes extra writable", []string{"--policy", file}, extra, true},
		{"the file leaves other read-only", []string{"--policy", file}, other, false},
		{"a flag adds other to the file's", []string{"--policy", file, "--write", other}, other, true},
		{"and keeps the file's", []string{"--policy", file, "--write", other}, extra, true},
		{"docs writable without the profile", []string{"--policy", file}, filepath.Join(ws, "docs"), true},
		{"the profile makes docs read-only", []string{"--policy", file, "--profile", "readonly-docs"}, filepath.Join(ws, "docs"), false},
	} {
		r := runCLI(t, ws, tc.flags, "sh", "-c", write, "sh", tc.d)
		if r.code != 0 {
			t.Fatalf("%s: %s", tc.name, r)
		}
		if got := written(tc.d); got != tc.want {
			t.Errorf("%s: %s written %v, want %v", tc.name, tc.d, got, tc.want)
		}
	}

	// Mistakes name the file, the line and the key, and run nothing.
	bad := filepath.Join(filepath.Dir(file), "bad.toml")
	must(os.WriteFile(bad, []byte("version = 1\n[sandbox]\nnetwork = \"none\"\n\n[profiles.small]\nmemory = \"1k\"\n"), 0o644))
	r := runCLIArgs(t, "policy", "check", bad, "--profile", "small")
	if r.code != 1 || !strings.Contains(r.stderr, bad+":6: profiles.small.memory: \"1k\": below the minimum") {
		t.Errorf("policy check: %s", r)
	}
	must(os.WriteFile(filepath.Join(ws, "marker"), nil, 0o644))
	r = runCLI(t, ws, []string{"--policy", bad, "--profile", "small"}, "rm", "marker")
	if _, err := os.Stat(filepath.Join(ws, "marker")); r.code != 125 || err != nil || !strings.Contains(r.stderr, bad+":6:") {
		t.Errorf("run with a bad profile: %s (marker: %v)", r, err)
	}
	if r := runCLIArgs(t, "policy", "check", file); r.code != 0 {
		t.Errorf("policy check of a good file: %s", r)
	}
	if r := runCLI(t, ws, []string{"--profile", "x"}, "true"); r.code != 125 || !strings.Contains(r.stderr, "--profile x: needs --policy") {
		t.Errorf("--profile without --policy: %s", r)
	}

	// show prints a file that reads back to what it shows.
	r = runCLIArgs(t, "policy", "show", "--workspace", ws, "--policy", file, "--profile", "readonly-docs", "--memory", "1GiB")
	if r.code != 0 {
		t.Fatalf("policy show: %s", r)
	}
	shown := filepath.Join(filepath.Dir(file), "shown.toml")
	must(os.WriteFile(shown, []byte(r.stdout), 0o644))
	f, err := policyfile.ReadFile(shown)
	if err != nil {
		t.Fatalf("the shown policy does not read back: %v\n%s", err, r.stdout)
	}
	p, err := policyfile.Policy(ws, "", f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Memory != 1<<30 || len(p.Writable) != 1 || p.Writable[0] != extra || len(p.ReadOnly) != 1 || !strings.HasSuffix(p.ReadOnly[0], "/docs") {
		t.Errorf("policy show gave %+v", p)
	}
	// --json prints the whole decision, which reads back as the
	// runtime.Resolved a durable process's supervisor runs: the same
	// policy, at the level this host gives.
	r = runCLIArgs(t, "policy", "show", "--json", "--workspace", ws, "--policy", file, "--profile", "readonly-docs", "--memory", "1GiB")
	var decided runtime.Resolved
	if err := json.Unmarshal([]byte(r.stdout), &decided); r.code != 0 || err != nil {
		t.Fatalf("policy show --json: %v\n%s", err, r)
	}
	if dp := decided.Policy(); dp.Memory != 1<<30 || len(dp.Writable) != 1 || dp.Writable[0] != extra || dp.Workspace != ws {
		t.Errorf("policy show --json gave %+v", dp)
	}
	if want, err := runtime.Check(runtime.DefaultPolicy(ws)); err != nil || decided.Level() != want.Level() {
		t.Errorf("policy show --json: level %s, this host gives %v (%v)", decided.Level(), want, err)
	}
	if r := runCLIArgs(t, "policy", "default"); r.code != 0 || string(policyfile.DefaultTOML()) != r.stdout {
		t.Errorf("policy default: %s", r)
	}
}

// TestPolicyLayers: with --policy-layers the workspace's own
// .hutch/policy.toml is read, and, written where a sandboxed command can
// write, it may only narrow: a read-only carve-out it adds is enforced
// (the host sees the write fail), a network it opens is refused naming
// its line; without the flag it is not read at all.
func TestPolicyLayers(t *testing.T) {
	ws := dir(t, "layers-ws-")
	must(os.MkdirAll(filepath.Join(ws, ".hutch"), 0o777))
	must(os.MkdirAll(filepath.Join(ws, "docs"), 0o777))
	project := filepath.Join(ws, ".hutch", "policy.toml")
	must(os.WriteFile(project, []byte("version = 1\n[sandbox]\nread_only = [\"docs\"]\n"), 0o644))
	target := filepath.Join(ws, "docs", "f")
	write := []string{"sh", "-c", "echo x > " + target + " 2>/dev/null; true"}
	r := runCLI(t, ws, nil, write...)
	if _, err := os.Stat(target); r.code != 0 || err != nil {
		t.Fatalf("without --policy-layers the project file is not read: %s (%v)", r, err)
	}
	os.Remove(target)
	r = runCLI(t, ws, []string{"--policy-layers"}, write...)
	if _, err := os.Stat(target); r.code != 0 || err == nil {
		t.Errorf("with --policy-layers, docs is read-only: %s (written: %v)", r, err == nil)
	}
	must(os.WriteFile(project, []byte("version = 1\n[sandbox]\nnetwork = \"host\"\n"), 0o644))
	r = runCLI(t, ws, []string{"--policy-layers"}, "true")
	if r.code != 125 || !strings.Contains(r.stderr, project+":3: sandbox.network: an untrusted layer may only narrow") {
		t.Errorf("a project file opening the network: %s", r)
	}
	// The call's own file, trusted, comes last.
	own := filepath.Join(dir(t, "layers-own-"), "own.toml")
	must(os.WriteFile(own, []byte("version = 1\n[sandbox]\nnetwork = \"host\"\n"), 0o644))
	must(os.WriteFile(project, []byte("version = 1\n[sandbox]\ntimeout = \"1m\"\n"), 0o644))
	if r := runCLI(t, ws, []string{"--policy-layers", "--policy", own}, "true"); r.code != 0 || r.result == nil || r.result.Network != "host" {
		t.Errorf("the caller's file over a narrowing project: %s", r)
	}
}
