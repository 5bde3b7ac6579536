//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// resultDoc is what --result-json holds besides runtime.Result's fields.
type resultDoc struct {
	Schema   int      `json:"schema"`
	Version  string   `json:"hutch_version"`
	Argv     []string `json:"argv"`
	Command  []string `json:"command"`
	Error    string   `json:"error"`
	ExitCode int      `json:"exit_code"`
	Signal   int      `json:"signal"`
	Layers   []string `json:"layers"`
}

func readResultDoc(t *testing.T, p string) *resultDoc {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("host: no --result-json: %v", err)
		return nil
	}
	var d resultDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("--result-json: %v\n%s", err, b)
	}
	return &d
}

// TestResultJSONAlwaysWritten: --result-json is checked before anything
// runs and written whatever happens after: a refused policy (125), a
// command that cannot be found (127) or executed (126), and a run whose
// stdout reader went away (hutch lives on; the command gets SIGPIPE as in
// a shell pipeline). It names its schema, hutch's version and the argv.
func TestResultJSONAlwaysWritten(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "noexec"), []byte("#!/bin/sh\n"), 0o644))
	for _, tt := range []struct {
		name  string
		flags []string
		cmd   []string
		code  int
		err   string
	}{
		{"refused policy", []string{"--cpus", "NaN"}, []string{"true"}, 125, "--cpus"},
		{"not found", nil, []string{"/nonexistent/cmd"}, 127, "no such file"},
		{"cannot execute", nil, []string{filepath.Join(ws, "noexec")}, 126, "permission denied"},
		{"ran", nil, []string{"sh", "-c", "exit 3"}, 3, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rj := filepath.Join(t.TempDir(), "r.json")
			args := append(append([]string{"run", "--workspace", ws, "--result-json", rj}, tt.flags...), "--")
			r := runCLIArgs(t, append(args, tt.cmd...)...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tt.code, r)
			}
			d := readResultDoc(t, rj)
			if d == nil {
				return
			}
			if d.Schema != 1 || d.Version == "" || !slices.Equal(d.Command, tt.cmd) || len(d.Argv) < 2 || d.Argv[1] != "run" {
				t.Errorf("document: %+v", d)
			}
			if d.ExitCode != tt.code || !strings.Contains(d.Error, tt.err) || (tt.err == "") != (d.Error == "") {
				t.Errorf("exit_code %d, error %q; want %d and %q", d.ExitCode, d.Error, tt.code, tt.err)
			}
			if tt.code >= 125 && tt.name == "refused policy" && len(d.Layers) != 0 {
				t.Errorf("layers %v for a run that never started", d.Layers)
			}
		})
	}

	// An unwritable path is refused before the command runs.
	marker := filepath.Join(ws, "ran")
	r := runCLIArgs(t, "run", "--workspace", ws, "--result-json", filepath.Join(ws, "no/such/dir/r.json"), "--", "touch", marker)
	if _, err := os.Stat(marker); err == nil || r.code != 125 || !strings.Contains(r.stderr, "--result-json") {
		t.Errorf("unwritable --result-json: exit %d, command ran: %v\n%s", r.code, err == nil, r)
	}

	// hutch run -- yes | head -1: the command gets SIGPIPE, hutch reports it.
	rj := filepath.Join(t.TempDir(), "r.json")
	c := exec.Command("sh", "-c", `"$0" run --workspace "$1" --result-json "$2" -- yes | head -1 >/dev/null`, hutchBin, ws, rj)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d := readResultDoc(t, rj); d != nil && d.Signal != int(syscall.SIGPIPE) {
		t.Errorf("a command writing to a closed pipe: %+v, want SIGPIPE", d)
	}

	// The command's last line fits in the sandbox's pipe and the command
	// exits 0, but the reader is gone when hutch passes it on: hutch is
	// the pipeline's writer and ends as one (141, quietly), not as a
	// failure of its own (125).
	c = exec.Command("bash", "-c", `"$0" run --workspace "$1" -- sh -c 'echo one; sleep 0.5; echo two' 2>"$2" | head -1 >/dev/null; echo "${PIPESTATUS[0]}"`, hutchBin, ws, filepath.Join(ws, "hutch-stderr"))
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	stderr, _ := os.ReadFile(filepath.Join(ws, "hutch-stderr"))
	if strings.TrimSpace(string(out)) != "141" || len(stderr) != 0 {
		t.Errorf("hutch run ... | head -1 with the reader gone before the last line: exit %s, stderr %q; want 141 and nothing", out, stderr)
	}
}
