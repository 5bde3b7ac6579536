//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEnvSameOnBothBackends feeds the Linux New and the macOS mapping the
// same environments and wants the same verdict from each, word for word.
func TestEnvSameOnBothBackends(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := filepath.Join(home, "../ws-"+filepath.Base(home))
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	var envs [][]string
	for _, name := range append(refusedEnvNames, allowedEnvNames...) {
		envs = append(envs, []string{"OK=1", name + "=x"})
	}
	envs = append(envs, []string{"NOEQUALS"}, []string{"=x"}, []string{"A=b\x00"}, nil)
	for _, env := range envs {
		_, _, darwinErr := resolveSeatbelt(Policy{Workspace: ws, Env: env}, home)
		sb, linuxErr := New(Policy{Workspace: ws, Env: env})
		if sb != nil {
			sb.Close()
		}
		if (darwinErr == nil) != (linuxErr == nil) || darwinErr != nil && darwinErr.Error() != linuxErr.Error() {
			t.Errorf("Env %q: Linux %v; macOS %v", env, linuxErr, darwinErr)
		}
	}
}
