package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

func TestPolicyFromOutputLimit(t *testing.T) {
	ws := t.TempDir()
	p, err := policyFrom(runFlags{workspace: ws, outputLimit: "1KiB"})
	if err != nil || p.OutputLimit != 1024 || p.Workspace != ws {
		t.Errorf("policyFrom = %+v, %v", p, err)
	}
	if _, err := policyFrom(runFlags{workspace: ws, outputLimit: "lots"}); err == nil {
		t.Error("policyFrom with a bad --output-limit: nil error")
	}
}

// TestRunFlagsStopAtCommand: flags after the command belong to it.
func TestRunFlagsStopAtCommand(t *testing.T) {
	var code int
	c := runCommand(&code)
	if err := c.Flags().Parse([]string{"--timeout", "2s", "ls", "-la", "--timeout", "x"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Flags().Args(); len(got) != 4 || got[0] != "ls" || got[1] != "-la" || got[3] != "x" {
		t.Errorf("command args %q", got)
	}
}

// TestRefusedEnvNamesFlag: a refused variable is refused as the --env it
// came from, before any sandbox exists.
func TestRefusedEnvNamesFlag(t *testing.T) {
	ws := t.TempDir()
	for _, kv := range []string{"BASH_FUNC_ls%%=() { true; }", "GCONV_PATH=/tmp", "JAVA_TOOL_OPTIONS=-javaagent:/x.jar", "GIT_CONFIG_KEY_0=core.fsmonitor"} {
		p, err := policyFrom(runFlags{workspace: ws, outputLimit: "1MiB", env: []string{"OK=1", kv}})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := runtime.New(p)
		if sb != nil {
			sb.Close()
		}
		name, _, _ := strings.Cut(kv, "=")
		if err == nil || !strings.Contains(flagError(err).Error(), "Env["+name+"] (--env): may not be set") {
			t.Errorf("--env %q: %v", kv, flagError(err))
		}
	}
}

// TestRunExitCodes: hutch run exits 127 for a command not found in the
// sandbox and 126 for one it cannot execute, as shells and env do, and
// says why on stderr; otherwise it mirrors the command's status.
func TestRunExitCodes(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "script"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"hutch-no-such-command"}, exitNotFound, `hutch: exec: look up command hutch-no-such-command: "hutch-no-such-command" not found in PATH: no such file or directory`},
		{[]string{"./missing"}, exitNotFound, "hutch: exec: look up command ./missing: no such file or directory"},
		{[]string{"./script"}, exitCannotExec, "hutch: exec: look up command ./script: permission denied"},
		{[]string{"./dir"}, exitCannotExec, "hutch: exec: exec ./dir: fork/exec ./dir: permission denied"},
		{[]string{"sh", "-c", "exit 3"}, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			var code int
			stderr := captureStderr(t, func() {
				code = execute(append([]string{"run", "--workspace", ws, "--"}, tt.args...))
			})
			if code != tt.code {
				t.Errorf("hutch run %q: exit %d, want %d; stderr %q", tt.args, code, tt.code, stderr)
			}
			if got := strings.TrimSpace(stderr); got != tt.stderr {
				t.Errorf("hutch run %q: stderr %q, want %q", tt.args, got, tt.stderr)
			}
		})
	}
}

// captureStderr returns what f wrote to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	old := os.Stderr
	os.Stderr = tmp
	defer func() { os.Stderr = old }()
	f()
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
