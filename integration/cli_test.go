//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestVersionAndDebug: `hutch --version` names the version; hutch's own
// steps reach stderr only when asked, by --debug or HUTCH_LOG=debug (the
// Sandbox it made, with the workspace), and a HUTCH_LOG that is not a
// level is refused naming it, before anything runs.
func TestVersionAndDebug(t *testing.T) {
	r := runCLIArgs(t, "--version")
	v, ok := strings.CutPrefix(r.stdout, "hutch version ")
	v = strings.TrimSpace(v)
	if r.code != 0 || !ok || v == "" || v == "(devel)" {
		t.Errorf("hutch --version:\n%s", r)
	}
	// The same version in --result-json and doctor --json.
	rj := filepath.Join(t.TempDir(), "result.json")
	runCLIArgs(t, "run", "--workspace", dir(t, "ws-"), "--result-json", rj, "--", "true")
	b, _ := os.ReadFile(rj)
	for what, doc := range map[string][]byte{"--result-json": b, "doctor --json": []byte(runCLIArgs(t, "doctor", "--json").stdout)} {
		var got struct {
			Version string `json:"hutch_version"`
		}
		if err := json.Unmarshal(doc, &got); err != nil || got.Version != v {
			t.Errorf("%s says hutch_version %q (%v); --version says %q", what, got.Version, err, v)
		}
	}

	ws := dir(t, "ws-")
	ready := "sandbox ready"
	for _, tt := range []struct {
		name   string
		env    string
		args   []string
		logged bool
	}{
		{"default", "", nil, false},
		{"--debug", "", []string{"--debug"}, true},
		{"HUTCH_LOG=debug", "HUTCH_LOG=debug", nil, true},
		{"HUTCH_LOG=error", "HUTCH_LOG=error", nil, false},
	} {
		args := append(append([]string{}, tt.args...), "run", "--workspace", ws, "--", "true")
		c := exec.Command(hutchBin, args...)
		c.Env = append(os.Environ(), tt.env)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", tt.name, err, out)
			continue
		}
		if got := strings.Contains(string(out), ready) && strings.Contains(string(out), ws); got != tt.logged {
			t.Errorf("%s: debug record on stderr %v, want %v:\n%s", tt.name, got, tt.logged, out)
		}
	}

	c := exec.Command(hutchBin, "run", "--workspace", ws, "--", "touch", filepath.Join(ws, "ran"))
	c.Env = append(os.Environ(), "HUTCH_LOG=loud")
	out, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "HUTCH_LOG loud") {
		t.Errorf("HUTCH_LOG=loud: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("host: the command ran under a refused HUTCH_LOG")
	}
}

// TestNoticesNotInStderr: what the host does not enforce for every run
// alike (limits kept by rlimits for an unprivileged user) is not written
// into each command's stderr, which an agent feeds to its model: the
// Result holds it, and --verbose says it. (As root, with cgroups, there
// is nothing to say; the check holds all the same.)
func TestNoticesNotInStderr(t *testing.T) {
	ws := dir(t, "ws-")
	r := sh(t, ws, "echo out; echo err >&2")
	if r.code != 0 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("the command's own output, exactly: want out and err, got %s", r)
	}
	if r.result == nil {
		t.Fatalf("no result: %s", r)
	}
	if !slices.ContainsFunc(r.result.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerCgroup }) {
		return // cgroups here: no notice to move
	}
	if len(r.result.Unenforced) == 0 {
		t.Errorf("cgroups skipped, but the Result says nothing is unenforced: %+v", r.result)
	}
	if v := sh(t, ws, "true", "--verbose"); !strings.Contains(v.stderr, "rlimits") {
		t.Errorf("--verbose does not say the limits are rlimits: %s", v)
	}
}

// TestUsageErrorsInFlagWords: a bad value the caller typed is refused
// with exit 125, naming the flag (or PATH) and the value as typed, in the
// command line's words, not Go's: never taken as unset, never a refusal
// of the sandbox (exit 1).
func TestUsageErrorsInFlagWords(t *testing.T) {
	ws, data := dir(t, "ws-"), dir(t, "data-")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"read", "--workspace", ws, "--mode", "txt", "x"}, `--mode txt: not "text" or "binary"`},
		{[]string{"read", "--workspace", ws, "--offset", "-1", "x"}, "--offset and --limit"},
		{[]string{"write", "--workspace", ws, "--content", "x", "rel.txt"}, "PATH rel.txt: not absolute"},
		{[]string{"run", "--workspace", ws, "--net=", "--", "true"}, `--net "": empty`},
		{[]string{"process", "start", "--data-dir", data, "--workspace", ws, "--name", "a\nb", "--", "true"}, `--name "a\nb"`},
		{[]string{"process", "start", "--data-dir", data, "--workspace", ws, "--name", strings.Repeat("n", 100000), "--", "true"}, "--name"},
		{[]string{"serve", "--socket", filepath.Join(dir(t, "sock-"), "s", "api.sock"), "--workspace", ws, "--prewarm=100000"}, "--prewarm 100000: must be 0-64"},
	} {
		r := runCLIArgs(t, tc.args...)
		if r.code != 125 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "Options") || strings.Contains(r.stderr, "Spec.") {
			t.Errorf("hutch %.120q: %s\nwant exit 125 and %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}
	if r := runCLIArgs(t, "process", "list", "--data-dir", data); strings.Contains(r.stdout, `"id"`) {
		t.Errorf("a refused start left a process: %s", r)
	}
}
