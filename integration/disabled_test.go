//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDisabledMode (issue 18, must show 5): a policy file's mode =
// "disabled" is refused unless the host program allows it (here the
// CLI's --allow-unsandboxed), naming the file's line; allowed, the
// command really runs unsandboxed (it writes where no sandbox lets it,
// judged on the host) and its Result says so; the flag alone unsandboxes
// nothing.
func TestDisabledMode(t *testing.T) {
	ws, out := dir(t, "disabled-ws-"), dir(t, "disabled-out-")
	must(os.Chmod(out, 0o777))
	file := filepath.Join(dir(t, "disabled-pol-"), "policy.toml")
	must(os.WriteFile(file, []byte("version = 1\n[sandbox]\nmode = \"disabled\"\n"), 0o644))
	escape := func(name string) []string { return []string{"sh", "-c", "touch " + filepath.Join(out, name)} }
	there := func(name string) bool { _, err := os.Stat(filepath.Join(out, name)); return err == nil }

	r := runCLI(t, ws, []string{"--policy", file}, escape("refused")...)
	if r.code != 125 || !strings.Contains(r.stderr, file+":3: sandbox.mode") || !strings.Contains(r.stderr, "--allow-unsandboxed") || there("refused") {
		t.Errorf("disabled without the host's consent: %s (escaped: %v)", r, there("refused"))
	}

	r = runCLI(t, ws, []string{"--policy", file, "--allow-unsandboxed"}, escape("allowed")...)
	if r.code != 0 || !there("allowed") {
		t.Fatalf("disabled, allowed: %s (wrote outside: %v)", r, there("allowed"))
	}
	if res := r.result; res == nil || !res.Unsandboxed || res.Level != "unsandboxed" || len(res.Layers) != 0 || len(res.Unenforced) == 0 {
		t.Errorf("the Result of an unsandboxed command: %+v", res)
	}
	if !strings.Contains(r.stderr, "DISABLED MODE") {
		t.Errorf("nothing said on stderr: %q", r.stderr)
	}

	r = runCLI(t, ws, []string{"--allow-unsandboxed"}, escape("flag-only")...)
	if r.code == 125 || there("flag-only") || r.result == nil || r.result.Unsandboxed {
		t.Errorf("--allow-unsandboxed alone: %s (wrote outside: %v)", r, there("flag-only"))
	}
}
