//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedFunctionRefused: an exported bash function in --env would
// replace ls in every bash the command starts. The host first shows the
// route is real (bash outside any sandbox runs the function), then that
// hutch refuses the flag before anything runs: no marker, exit 125, and
// an error naming --env.
func TestExportedFunctionRefused(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on the host")
	}
	ws := dir(t, "ws-")
	control := filepath.Join(t.TempDir(), "control")
	c := exec.Command(bash, "-c", "ls >/dev/null")
	c.Env = append(os.Environ(), "BASH_FUNC_ls%%=() { touch "+control+"; }")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("host bash: %v\n%s", err, out)
	}
	if _, err := os.Stat(control); err != nil {
		t.Fatalf("bash on the host did not import BASH_FUNC_ls%%%%, so this test proves nothing: %v", err)
	}

	// The marker's directory is writable to the command, so only the
	// refusal keeps the function from leaving it there.
	out := dir(t, "out-")
	marker := filepath.Join(out, "ran")
	res := runCLI(t, ws, []string{"--write", out, "--env", "BASH_FUNC_ls%%=() { touch " + marker + "; }"}, bash, "-c", "ls")
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("host: %s exists: the exported function ran\n%s", marker, res)
	}
	if res.code != 125 {
		t.Errorf("exit %d, want 125 (hutch refused)\n%s", res.code, res)
	}
	if !strings.Contains(res.stderr, `--env "BASH_FUNC_ls%%=() { touch `) {
		t.Errorf("error does not name the --env variable:\n%s", res)
	}
	if res.result == nil || res.result.ExitCode != 125 || len(res.result.Layers) != 0 {
		t.Errorf("--result-json of a refused run: %+v, want exit 125 and no layers", res.result)
	}
}
