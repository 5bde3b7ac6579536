//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhy: hutch why's exit status is its verdict (0 allowed, 1 refused),
// its first line says the verdict and the rule, its second how to allow a
// refusal; a PATH or --access it cannot take exits 125 naming it.
func TestWhy(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("K=V\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want []string // in stdout, or for 125 in stderr
	}{
		{[]string{"a.txt", "--access", "write"}, 0, []string{"allowed: write a.txt: ", "is in the workspace"}},
		{[]string{".env"}, 1, []string{"refused: read .env: ", `masked: default deny name ".env"`, "\nto allow it: --no-default-deny"}},
		{[]string{"/etc", "--access", "write"}, 1, []string{"/etc is outside the writable trees", "--allow-system-write /etc"}},
		{[]string{"a.txt", "--access", "exec"}, exitHutchFailed, []string{"hutch: --access exec: not read, write or execute"}},
		{[]string{"a\x00b"}, exitHutchFailed, []string{"hutch: PATH "}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var code int
			var stdout string
			stderr := captureStderr(t, func() {
				stdout = captureStdout(t, func() {
					code = execute(append([]string{"why", "--workspace", ws}, tt.args...))
				})
			})
			out := stdout
			if tt.code == exitHutchFailed {
				out = stderr
			}
			for _, w := range tt.want {
				if code != tt.code || !strings.Contains(out, w) {
					t.Errorf("hutch why %q: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, stdout, stderr, tt.code, w)
				}
			}
		})
	}
}

// captureStdout returns what f wrote to os.Stdout.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	old := os.Stdout
	os.Stdout = tmp
	defer func() { os.Stdout = old }()
	f()
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
