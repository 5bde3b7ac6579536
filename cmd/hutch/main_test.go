package main

import (
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
