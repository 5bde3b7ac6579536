package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "1048576", want: 1 << 20},
		{in: "10MiB", want: 10 << 20},
		{in: "512KiB", want: 512 << 10},
		{in: "2GiB", want: 2 << 30},
		{in: "1KB", want: 1000},
		{in: "3MB", want: 3_000_000},
		{in: "2GB", want: 2_000_000_000},
		{in: "512k", want: 512 << 10},
		{in: "512K", want: 512 << 10},
		{in: "7m", want: 7 << 20},
		{in: "7M", want: 7 << 20},
		{in: "1g", want: 1 << 30},
		{in: "1G", want: 1 << 30},
		{in: "100B", want: 100},
		{in: "0MiB", want: 0},
		{in: " 10MiB ", want: 10 << 20},
		{in: "10 MiB", want: 10 << 20},
		{in: "\t64k\n", want: 64 << 10},
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "8589934591G", want: 8589934591 << 30}, // the largest G that fits

		{in: "", wantErr: true},
		{in: "   ", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "k", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "-1MiB", wantErr: true},
		{in: "1.5MiB", wantErr: true},
		{in: "ten", wantErr: true},
		{in: "10mib", wantErr: true},
		{in: "10 M iB", wantErr: true},
		{in: "10MiBMiB", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "1e6", wantErr: true},
		{in: "10TiB", wantErr: true},
		{in: "9223372036854775808", wantErr: true}, // past int64
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		switch {
		case tt.wantErr && err == nil:
			t.Errorf("parseSize(%q) = %d, want an error", tt.in, got)
		case !tt.wantErr && err != nil:
			t.Errorf("parseSize(%q): %v, want %d", tt.in, err, tt.want)
		case !tt.wantErr && got != tt.want:
			t.Errorf("parseSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

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

// TestDefaultMinLevelPortable: hutch run without --min-level leaves the
// policy's MinLevel empty, the strongest level the host gives (namespaces
// on Linux): naming namespaces made every run refuse on macOS, which has
// only its Seatbelt profile.
func TestDefaultMinLevelPortable(t *testing.T) {
	var code int
	c := runCommand(&code)
	if err := c.Flags().Parse([]string{"--workspace", t.TempDir(), "true"}); err != nil {
		t.Fatal(err)
	}
	f := c.Flags().Lookup("min-level")
	p, err := policyFrom(runFlags{workspace: t.TempDir(), outputLimit: "1MiB", minLevel: f.Value.String()})
	if err != nil {
		t.Fatal(err)
	}
	if p.MinLevel != "" {
		t.Errorf("default --min-level makes MinLevel %q, want \"\" (the host's strongest)", p.MinLevel)
	}
}
