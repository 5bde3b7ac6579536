package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/hutchbox/hutch/runtime"
)

// TestLimitFlags: every limit flag reads what people type, and 0 means
// none on the command line (the library's Unlimited, since 0 there is its
// default); an unset flag keeps DefaultPolicy's value.
func TestLimitFlags(t *testing.T) {
	ws := t.TempDir()
	def := runtime.DefaultPolicy(ws)
	tests := []struct {
		f    runFlags
		want func(p runtime.Policy) bool
	}{
		{runFlags{}, func(p runtime.Policy) bool {
			return p.Memory == def.Memory && p.Pids == runtime.DefaultPids && p.OutputLimit == runtime.DefaultOutputLimit &&
				p.CPUs == 0 && p.Timeout == 0 && p.TmpSize == 0
		}},
		{runFlags{memory: "1.5GiB", outputLimit: "1k", tmpSize: "512mb", pids: "64", cpus: "0.5", timeout: "1m30s"}, func(p runtime.Policy) bool {
			return p.Memory == 3<<29 && p.OutputLimit == 1024 && p.TmpSize == 512<<20 && p.Pids == 64 && p.CPUs == 0.5 && p.Timeout == 90*time.Second
		}},
		{runFlags{memory: "0", outputLimit: "0", tmpSize: "0", pids: "0", cpus: "0", timeout: "0"}, func(p runtime.Policy) bool {
			return p.Memory == runtime.Unlimited && p.OutputLimit == runtime.Unlimited && p.TmpSize == runtime.Unlimited &&
				p.Pids == runtime.Unlimited && p.CPUs == runtime.Unlimited && p.Timeout == runtime.Unlimited
		}},
	}
	for _, tt := range tests {
		tt.f.workspace = ws
		p, err := policyFrom(tt.f)
		if err != nil || !tt.want(p) {
			t.Errorf("policyFrom(%+v): memory %d, output %d, tmp %d, pids %d, cpus %v, timeout %v, %v",
				tt.f, p.Memory, p.OutputLimit, p.TmpSize, p.Pids, p.CPUs, p.Timeout, err)
		}
	}
}

// TestFlagErrors: hutch run refuses bad input in the command line's own
// words: the flag and the value as typed (--memory 1k, not Memory "1024"),
// control characters escaped once, and never a Go field's name.
func TestFlagErrors(t *testing.T) {
	ws := t.TempDir()
	bad, esc := "a\nb\x1b[31m", `a\nb\x1b[31m` // esc: as Go's %q shows bad, escaped once
	tests := []struct {
		args []string
		want string // the start of stderr
	}{
		{[]string{"--memory", "1k"}, "hutch: --memory 1k: below the minimum of 4 MiB"},
		{[]string{"--memory", "-1"}, "hutch: --memory -1: negative"},
		{[]string{"--memory", "1.5XiB"}, `hutch: --memory 1.5XiB: unknown unit "XiB"`},
		{[]string{"--memory", "2P"}, "hutch: --memory 2P: above 1 PiB"},
		{[]string{"--output-limit", "lots"}, "hutch: --output-limit lots: not a size"},
		{[]string{"--output-limit", "9223372036854775808"}, "hutch: --output-limit 9223372036854775808: too large"},
		{[]string{"--tmp-size", "1"}, "hutch: --tmp-size 1: below the minimum of 4 KiB"},
		{[]string{"--pids", "1"}, "hutch: --pids 1: below the minimum of 2"},
		{[]string{"--pids", "-1"}, "hutch: --pids -1: negative (0 means no limit)"},
		{[]string{"--pids", "1.5"}, "hutch: --pids 1.5: not a whole number"},
		{[]string{"--pids", "4194305"}, "hutch: --pids 4194305: above the kernel's limit"},
		{[]string{"--cpus", "0.0001"}, "hutch: --cpus 0.0001: below the minimum of 0.01 cores"},
		{[]string{"--cpus", "-1"}, "hutch: --cpus -1: negative (0 means no limit)"},
		{[]string{"--cpus", "NaN"}, "hutch: --cpus NaN: not a number of cores"},
		{[]string{"--cpus", "4097"}, "hutch: --cpus 4097: above 4096 cores"},
		{[]string{"--timeout", "1ns"}, "hutch: --timeout 1ns: below the minimum of 1ms"},
		{[]string{"--timeout", "30"}, "hutch: --timeout 30: not a duration"},
		{[]string{"--timeout", "-1s"}, "hutch: --timeout -1s: negative (0 means none)"},
		{[]string{"--write", "missing"}, "hutch: --write missing: does not exist"},
		{[]string{"--write", ".", "--write", "/x/" + bad}, `hutch: --write "/x/` + esc + `": contains a control character`},
		{[]string{"--deny", "/x/" + bad}, `hutch: --deny "/x/` + esc + `": contains a control character`},
		{[]string{"--deny-name", bad}, `hutch: --deny-name "` + esc + `": contains a control character`},
		{[]string{"--deny-name", "a/b"}, "hutch: --deny-name a/b: a name or pattern, not a path"},
		{[]string{"--env", "OK=1", "--env", "LD_PRELOAD=/x.so"}, "hutch: --env LD_PRELOAD=/x.so: may not be set"},
		{[]string{"--env", "BASH_FUNC_ls%%=() { id; }"}, `hutch: --env "BASH_FUNC_ls%%=() { id; }": may not be set`},
		{[]string{"--env", "=x"}, "hutch: --env =x: not in KEY=VALUE form"},
		{[]string{"--net", "wifi"}, "hutch: --net wifi: not a network mode"},
		{[]string{"--allow-domain", "example.com"}, "hutch: --allow-domain example.com: only meaningful when the network mode is allow (it is none)"},
		{[]string{"--net", "allow", "--allow-domain", "ok.test", "--allow-domain", "exa mple.com"}, `hutch: --allow-domain "exa mple.com": `},
		{[]string{"--net", "allow", "--package-managers", "node,cobol"}, "hutch: --package-managers cobol: unknown package manager"},
		{[]string{"--net", "allow", "--allow-local", "localhost:80"}, "hutch: --allow-local localhost:80: not an exact ip:port pair"},
		{[]string{"--net", "allow", "--allow-local", "10.0.0.2:5432", "--allow-local", "8.8.8.8:53"}, "hutch: --allow-local 8.8.8.8:53: a public address"},
		{[]string{"--min-level", "strong"}, "hutch: --min-level strong: not a level"},
		{[]string{"--leaks", "maybe"}, "hutch: --leaks maybe: not report, redact, kill or off"},
		{[]string{"--denials", "maybe"}, "hutch: --denials maybe: not record or off"},
		{[]string{"--explain", "--denials", "off"}, "hutch: --explain explains the recorded denials, and --denials off records none"},
		{[]string{"--seccomp", "/nonexistent/profile.json"}, "hutch: --seccomp /nonexistent/profile.json: "},
		{[]string{"--workspace", "/"}, "hutch: --workspace /: the whole host tree cannot be writable"},
		{[]string{"--workspace", "/x/" + bad}, `hutch: --workspace "/x/` + esc + `": contains a control character`},
	}
	fields := []string{"Workspace", "Writable", "Deny", "DenyNames", "Env", "Timeout", "OutputLimit", "Seccomp",
		"Memory", "Pids", "CPUs", "TmpSize", "Network", "AllowDomains", "PackageManagers", "AllowLocal", "MinLevel", "Denials", "Explain", "Cmd."}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := append([]string{"run", "--workspace", ws}, tt.args...)
			var code int
			stderr := captureStderr(t, func() {
				code = execute(append(args, "--", "true"))
			})
			if code != exitHutchFailed || !strings.HasPrefix(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("hutch run %q: exit %d, stderr %q; want 125 and %q", tt.args, code, stderr, tt.want)
			}
			for _, f := range fields {
				if strings.Contains(stderr, f) {
					t.Errorf("hutch run %q: stderr %q names the Go field %s", tt.args, stderr, f)
				}
			}
		})
	}
}

// TestServeDenialFlags: hutch serve takes run's --denials and --explain,
// and refuses a bad one as run does, before it listens.
func TestServeDenialFlags(t *testing.T) {
	ws, sock := t.TempDir(), filepath.Join(t.TempDir(), "private", "s") // a directory serve makes 0700
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--denials", "maybe"}, "hutch: --denials maybe: not record or off"},
		{[]string{"--explain", "--denials", "off"}, "hutch: --explain explains the recorded denials, and --denials off records none"},
	} {
		var code int
		stderr := captureStderr(t, func() {
			code = execute(append([]string{"serve", "--socket", sock, "--workspace", ws}, tt.args...))
		})
		if code != exitHutchFailed || !strings.HasPrefix(stderr, tt.want) {
			t.Errorf("hutch serve %q: exit %d, stderr %q; want 125 and %q", tt.args, code, stderr, tt.want)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("hutch serve %q listened", tt.args)
		}
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

// TestRepeatedFlags: each use of a repeatable flag is one value, commas
// and all, in the order given; --help shows no default for them.
func TestRepeatedFlags(t *testing.T) {
	var f runFlags
	fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addRunFlags(fl, &f)
	if err := fl.Parse([]string{"--env", "A=1", "--write", "/w", "--env", "B=2,3", "--allow-domain", "a.test,b.test"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		flag      string
		got, want []string
	}{
		{"--env", f.env, []string{"A=1", "B=2,3"}},
		{"--write", f.write, []string{"/w"}},
		{"--allow-domain", f.allowDomain, []string{"a.test,b.test"}},
		{"--deny", f.deny, nil},
	} {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.flag, tt.got, tt.want)
		}
	}
	if !fl.Changed("env") || fl.Changed("deny") {
		t.Error("Changed: --env not set, or --deny set")
	}
	var unset runFlags
	help := pflag.NewFlagSet("help", pflag.ContinueOnError)
	addRunFlags(help, &unset)
	if usage := help.FlagUsages(); !strings.Contains(usage, "--env stringArray") || strings.Contains(usage, "(default [") {
		t.Errorf("help:\n%s", usage)
	}
}

// TestRefusedEnvNamesFlag: a refused variable is refused as the --env it
// came from, before any sandbox exists.
func TestRefusedEnvNamesFlag(t *testing.T) {
	ws := t.TempDir()
	for _, kv := range []string{"BASH_FUNC_ls%%=() { true; }", "GCONV_PATH=/tmp", "JAVA_TOOL_OPTIONS=-javaagent:/x.jar", "GIT_CONFIG_KEY_0=core.fsmonitor"} {
		p, err := policyFrom(runFlags{workspace: ws, env: []string{"OK=1", kv}})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := runtime.New(p)
		if sb != nil {
			sb.Close()
		}
		f := runFlags{env: []string{"OK=1", kv}}
		if err == nil || !strings.HasPrefix(f.flagError(err).Error(), "--env "+quote(kv)+": may not be set") {
			t.Errorf("--env %q: %v", kv, f.flagError(err))
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
		{[]string{"./dir"}, exitCannotExec, "hutch: exec: exec ./dir: permission denied"},
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
