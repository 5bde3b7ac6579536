//go:build linux

package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// refusedEnv are variables neither a Policy nor a Cmd may set, one or two
// of each group; the internal TestRefusedEnv checks every one.
var refusedEnv = []string{
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG_OUTPUT",
	"GCONV_PATH", "GLIBC_TUNABLES",
	"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME",
	"NODE_OPTIONS", "RUBYOPT", "PERL5OPT", "PERL5LIB", "JAVA_TOOL_OPTIONS",
	"BASH_ENV", "ENV", "PROMPT_COMMAND", "BASH_FUNC_ls%%", "SHELLOPTS", "PS4",
	"DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH",
	"GIT_SSH_COMMAND", "GIT_CONFIG_KEY_0", "LESSOPEN", "OPENSSL_CONF",
}

// wantPolicyError fails t unless err is a *runtime.PolicyError for field.
func wantPolicyError(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want *runtime.PolicyError for %s", field)
	}
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *runtime.PolicyError for %s", err, err, field)
	}
	if pe.Field != field {
		t.Fatalf("PolicyError.Field = %q, want %q (err: %v)", pe.Field, field, err)
	}
	if pe.Reason == "" {
		t.Errorf("PolicyError has no Reason: %#v", pe)
	}
	if !strings.HasPrefix(err.Error(), "hutch: "+field) {
		t.Errorf("Error() = %q, want it to start with %q", err.Error(), "hutch: "+field)
	}
}

// noSpawn fails t if f makes the process-wide spawn client ask for an init.
func noSpawn(t *testing.T, f func()) {
	t.Helper()
	before := spawn.Default().Spawned()
	f()
	if after := spawn.Default().Spawned(); after != before {
		t.Errorf("%d sandbox inits were requested, want none", after-before)
	}
}

// mkdirs creates each of dirs (relative to base) and returns base.
func mkdirs(t *testing.T, base string, dirs ...string) string {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func TestNewRefusesBadPolicy(t *testing.T) {
	// HOME decides what "~" in DefaultDeny and Deny means.
	home := t.TempDir()
	t.Setenv("HOME", home)
	mkdirs(t, home, ".ssh/work")

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	type tc struct {
		name  string
		p     func(ws string) runtime.Policy
		field string
	}
	pol := func(f func(p *runtime.Policy)) func(string) runtime.Policy {
		return func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			f(&p)
			return p
		}
	}
	tests := []tc{
		{"no workspace", func(string) runtime.Policy { return runtime.Policy{} }, "Workspace"},
		{"empty workspace", pol(func(p *runtime.Policy) { p.Workspace = "" }), "Workspace"},
		{"non-existent workspace", pol(func(p *runtime.Policy) { p.Workspace = filepath.Join(p.Workspace, "missing") }), "Workspace"},
		{"relative workspace", pol(func(p *runtime.Policy) { p.Workspace = "ws" }), "Workspace"},
		{"dot workspace", pol(func(p *runtime.Policy) { p.Workspace = "." }), "Workspace"},
		{"workspace with NUL", pol(func(p *runtime.Policy) { p.Workspace += "\x00x" }), "Workspace"},
		{"workspace with newline", pol(func(p *runtime.Policy) { p.Workspace += "\nx" }), "Workspace"},
		{"workspace with escape", pol(func(p *runtime.Policy) { p.Workspace += "\x1b[31m" }), "Workspace"},
		{"workspace with DEL", pol(func(p *runtime.Policy) { p.Workspace += "\x7f" }), "Workspace"},
		{"workspace longer than PATH_MAX", pol(func(p *runtime.Policy) { p.Workspace = "/" + strings.Repeat("a/", 2100) }), "Workspace"},
		{"workspace is a file", pol(func(p *runtime.Policy) { p.Workspace = file }), "Workspace"},
		{"workspace is /", pol(func(p *runtime.Policy) { p.Workspace = "/" }), "Workspace"},
		{"workspace is /etc", pol(func(p *runtime.Policy) { p.Workspace = "/etc" }), "Workspace"},
		{"workspace is /usr/", pol(func(p *runtime.Policy) { p.Workspace = "/usr/" }), "Workspace"},
		{"writable /etc", pol(func(p *runtime.Policy) { p.Writable = []string{"/etc"} }), "Writable[0]"},
		{"writable /var", pol(func(p *runtime.Policy) { p.Writable = []string{"/var"} }), "Writable[0]"},
		{"writable /usr/lib/..", pol(func(p *runtime.Policy) { p.Writable = []string{"/usr/lib/.."} }), "Writable[0]"},
		{"writable /bin (a link to /usr/bin here)", pol(func(p *runtime.Policy) { p.Writable = []string{"/bin"} }), "Writable[0]"},
		{"writable /etc allowed, /usr not", pol(func(p *runtime.Policy) {
			p.Writable, p.AllowSystemWrite = []string{"/etc", "/usr"}, []string{"/etc"}
		}), "Writable[1]"},
		{"writable link to /etc", pol(func(p *runtime.Policy) {
			link := filepath.Join(p.Workspace, "etc-link")
			if err := os.Symlink("/etc", link); err != nil {
				t.Fatal(err)
			}
			p.Writable = []string{link}
		}), "Writable[0]"},
		{"allow of a tree not a system one", pol(func(p *runtime.Policy) { p.AllowSystemWrite = []string{p.Workspace} }), "AllowSystemWrite[0]"},
		{"allow of a relative path", pol(func(p *runtime.Policy) { p.AllowSystemWrite = []string{"etc"} }), "AllowSystemWrite[0]"},
		{"workspace under a default-denied path", pol(func(p *runtime.Policy) { p.Workspace = filepath.Join(home, ".ssh", "work") }), "Workspace"},
		{"workspace linked into a default-denied path", pol(func(p *runtime.Policy) {
			link := filepath.Join(p.Workspace, "link")
			if err := os.Symlink(filepath.Join(home, ".ssh", "work"), link); err != nil {
				t.Fatal(err)
			}
			p.Workspace = link
		}), "Workspace"},

		{"writable under a denied path", pol(func(p *runtime.Policy) {
			mkdirs(t, p.Workspace, "secret/sub")
			p.Deny, p.Writable = []string{"secret"}, []string{"secret/sub"}
		}), "Writable[0]"},
		{"writable is the denied path", pol(func(p *runtime.Policy) {
			mkdirs(t, p.Workspace, "secret")
			p.Deny, p.Writable = []string{"secret"}, []string{"secret"}
		}), "Writable[0]"},
		{"second writable under a denied path", pol(func(p *runtime.Policy) {
			mkdirs(t, p.Workspace, "ok", "secret/sub")
			p.Deny, p.Writable = []string{"secret"}, []string{"ok", "secret/sub"}
		}), "Writable[1]"},
		{"writable reaching a denied path through a symlink", pol(func(p *runtime.Policy) {
			mkdirs(t, p.Workspace, "secret/sub")
			if err := os.Symlink("secret/sub", filepath.Join(p.Workspace, "link")); err != nil {
				t.Fatal(err)
			}
			p.Deny, p.Writable = []string{"secret"}, []string{"link"}
		}), "Writable[0]"},
		{"writable under a default-denied path", pol(func(p *runtime.Policy) {
			p.Writable = []string{filepath.Join(home, ".ssh", "work")}
		}), "Writable[0]"},
		{"writable does not exist", pol(func(p *runtime.Policy) { p.Writable = []string{"missing"} }), "Writable[0]"},
		{"writable absolute does not exist", pol(func(p *runtime.Policy) { p.Writable = []string{"/nonexistent-hutch-test/x"} }), "Writable[0]"},
		{"writable is /", pol(func(p *runtime.Policy) { p.Writable = []string{"/"} }), "Writable[0]"},
		{"writable is /tmp", pol(func(p *runtime.Policy) { p.Writable = []string{"/tmp"} }), "Writable[0]"},
		{"writable is /tmp spelled with ..", pol(func(p *runtime.Policy) { p.Writable = []string{"/var/../tmp/"} }), "Writable[0]"},
		{"writable in /run", pol(func(p *runtime.Policy) { p.Writable = []string{"/run"} }), "Writable[0]"},
		{"writable empty", pol(func(p *runtime.Policy) { p.Writable = []string{""} }), "Writable[0]"},
		{"writable with NUL", pol(func(p *runtime.Policy) { p.Writable = []string{"a\x00b"} }), "Writable[0]"},
		{"writable with control character", pol(func(p *runtime.Policy) { p.Writable = []string{"a\tb"} }), "Writable[0]"},
		{"writable too long", pol(func(p *runtime.Policy) { p.Writable = []string{strings.Repeat("x", 4097)} }), "Writable[0]"},

		{"deny is the workspace", pol(func(p *runtime.Policy) { p.Deny = []string{p.Workspace} }), "Deny[0]"},
		{"deny is the workspace, relative", pol(func(p *runtime.Policy) { p.Deny = []string{"."} }), "Deny[0]"},
		{"deny contains the workspace", pol(func(p *runtime.Policy) { p.Deny = []string{filepath.Dir(p.Workspace)} }), "Deny[0]"},
		{"deny contains the workspace, relative", pol(func(p *runtime.Policy) { p.Deny = []string{".."} }), "Deny[0]"},
		{"deny is /", pol(func(p *runtime.Policy) { p.Deny = []string{"/"} }), "Deny[0]"},
		{"second deny is / spelled with ..", pol(func(p *runtime.Policy) { p.Deny = []string{"x", "/tmp/.."} }), "Deny[1]"},
		{"deny linking to the workspace's parent", pol(func(p *runtime.Policy) {
			if err := os.Symlink(filepath.Dir(p.Workspace), filepath.Join(p.Workspace, "up")); err != nil {
				t.Fatal(err)
			}
			p.Deny = []string{"up"}
		}), "Deny[0]"},
		{"deny empty", pol(func(p *runtime.Policy) { p.Deny = []string{""} }), "Deny[0]"},
		{"deny with NUL", pol(func(p *runtime.Policy) { p.Deny = []string{"a\x00"} }), "Deny[0]"},
		{"deny with control character", pol(func(p *runtime.Policy) { p.Deny = []string{"a\rb"} }), "Deny[0]"},

		{"deny name empty", pol(func(p *runtime.Policy) { p.DenyNames = []string{""} }), "DenyNames[0]"},
		{"deny name is /", pol(func(p *runtime.Policy) { p.DenyNames = []string{"id_rsa", "/"} }), "DenyNames[1]"},
		{"deny name is a path", pol(func(p *runtime.Policy) { p.DenyNames = []string{"a", "b", "sub/.env"} }), "DenyNames[2]"},
		{"deny name ..", pol(func(p *runtime.Policy) { p.DenyNames = []string{".."} }), "DenyNames[0]"},
		{"deny name with NUL", pol(func(p *runtime.Policy) { p.DenyNames = []string{"a\x00"} }), "DenyNames[0]"},
		{"deny name bad pattern", pol(func(p *runtime.Policy) { p.DenyNames = []string{"id_[rsa"} }), "DenyNames[0]"},

		{"env without =", pol(func(p *runtime.Policy) { p.Env = []string{"FOO"} }), "Env"},
		{"env with empty key", pol(func(p *runtime.Policy) { p.Env = []string{"=x"} }), "Env"},
		{"env with NUL", pol(func(p *runtime.Policy) { p.Env = []string{"A=b\x00c"} }), "Env"},

		{"relative tools", pol(func(p *runtime.Policy) { p.Tools = "bin" }), "Tools"},
		{"missing tools", pol(func(p *runtime.Policy) { p.Tools = "/nonexistent-hutch-tools" }), "Tools"},
		{"tools is a file", pol(func(p *runtime.Policy) { p.Tools = file }), "Tools"},
		{"tools with NUL", pol(func(p *runtime.Policy) { p.Tools = "/bin\x00" }), "Tools"},
		{"filesystem may not degrade", pol(func(p *runtime.Policy) { p.AllowDegraded = []runtime.Layer{runtime.LayerFilesystem} }), "AllowDegraded[0]"},
		{"user namespace may not degrade", pol(func(p *runtime.Policy) {
			p.AllowDegraded = []runtime.Layer{runtime.LayerLoopback, runtime.LayerUserNS}
		}), "AllowDegraded[1]"},
		{"unknown layer", pol(func(p *runtime.Policy) { p.AllowDegraded = []runtime.Layer{"seccomp"} }), "AllowDegraded[0]"},
		// AllowLocal lifts the address checks, so it takes only what they
		// refuse; a public address would be a way around AllowDomains.
		{"public allow-local", pol(func(p *runtime.Policy) {
			p.Network, p.AllowLocal = runtime.NetworkAllow, []string{"10.1.2.3:5432", "8.8.8.8:53"}
		}), "AllowLocal[1]"},
		{"public IPv6 allow-local", pol(func(p *runtime.Policy) {
			p.Network, p.AllowLocal = runtime.NetworkAllow, []string{"[2001:4860:4860::8888]:53"}
		}), "AllowLocal[0]"},
	}
	// The kernel trees, and any path in them, are refused as the
	// workspace exactly as they are as writable paths; so is what would
	// make the sandbox's private /tmp and HOME the host's.
	for _, k := range refusedTrees(t) {
		tests = append(tests,
			tc{"workspace " + k, pol(func(p *runtime.Policy) { p.Workspace = k }), "Workspace"},
			tc{"writable " + k, pol(func(p *runtime.Policy) {
				mkdirs(t, p.Workspace, "ok")
				p.Writable = []string{"ok", k}
			}), "Writable[1]"},
		)
	}
	for _, name := range refusedEnv {
		tests = append(tests, tc{"env " + name, pol(func(p *runtime.Policy) {
			p.Env = []string{"OK=1", name + "=/tmp/x"}
		}), "Env[" + name + "]"})
	}
	// An empty value is refused too: LD_PRELOAD= is still a choice the
	// caller does not get to make.
	tests = append(tests, tc{"env empty LD_PRELOAD", pol(func(p *runtime.Policy) { p.Env = []string{"LD_PRELOAD="} }), "Env[LD_PRELOAD]"})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p(t.TempDir())
			noSpawn(t, func() {
				sb, err := runtime.New(p)
				if sb != nil {
					t.Errorf("New returned a Sandbox with the error %v", err)
				}
				wantPolicyError(t, err, tt.field)
				checkAgrees(t, p, err)
			})
		})
	}
}

// refusedTrees are existing paths that may be neither the workspace nor a
// writable path: the kernel trees and paths in them (by name, or through
// a symlink), and /tmp.
func refusedTrees(t *testing.T) []string {
	link := filepath.Join(t.TempDir(), "shm")
	if err := os.Symlink("/dev/shm", link); err != nil {
		t.Fatal(err)
	}
	return []string{
		"/sys", "/sys/fs/cgroup", "/proc", "/proc/self", "/proc/self/cwd", "/proc/1/root/etc",
		"/dev", "/dev/shm", "/dev/pts", "/dev/../proc", link, "/tmp", "/tmp/",
	}
}

// TestNewRefusesBadNumbers: every numeric field refuses values that are
// not finite, negative, absurdly large, or too small to mean what they
// say, naming the field, before anything is started.
func TestNewRefusesBadNumbers(t *testing.T) {
	type tc struct {
		name  string
		set   func(p *runtime.Policy)
		field string
	}
	var tests []tc
	// -1 is Unlimited; every other negative value is refused.
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -2, -0.5, 0.0001, 0.009, 4097, 1e300} {
		tests = append(tests, tc{fmt.Sprint("CPUs ", v), func(p *runtime.Policy) { p.CPUs = v }, "CPUs"})
	}
	for _, v := range []int64{-2, math.MinInt64, 1, 4<<20 - 1, 1<<50 + 1, math.MaxInt64} {
		tests = append(tests, tc{fmt.Sprint("Memory ", v), func(p *runtime.Policy) { p.Memory = v }, "Memory"})
	}
	for _, v := range []int64{-2, math.MinInt64, 1<<50 + 1, math.MaxInt64} {
		tests = append(tests, tc{fmt.Sprint("FileSize ", v), func(p *runtime.Policy) { p.FileSize = v }, "FileSize"})
	}
	for _, v := range []int64{-2, math.MinInt64, 1, 4095, 1<<50 + 1, math.MaxInt64} {
		tests = append(tests, tc{fmt.Sprint("TmpSize ", v), func(p *runtime.Policy) { p.TmpSize = v }, "TmpSize"})
	}
	for _, v := range []int64{-2, math.MinInt64, 1, 1<<22 + 1, math.MaxInt64} {
		tests = append(tests, tc{fmt.Sprint("Pids ", v), func(p *runtime.Policy) { p.Pids = v }, "Pids"})
	}
	for _, v := range []time.Duration{-2, -time.Second, math.MinInt64, 1, 30, time.Millisecond - 1} {
		tests = append(tests, tc{fmt.Sprint("Timeout ", int64(v)), func(p *runtime.Policy) { p.Timeout = v }, "Timeout"})
	}
	for _, v := range []int64{-2, math.MinInt64, 1<<50 + 1, math.MaxInt64} {
		tests = append(tests, tc{fmt.Sprint("OutputLimit ", v), func(p *runtime.Policy) { p.OutputLimit = v }, "OutputLimit"})
	}
	for _, v := range []int{-1, math.MinInt, 65, math.MaxInt} {
		tests = append(tests, tc{fmt.Sprint("Prewarm ", v), func(p *runtime.Policy) { p.Prewarm = v }, "Prewarm"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := runtime.DefaultPolicy(t.TempDir())
			tt.set(&p)
			noSpawn(t, func() {
				sb, err := runtime.New(p)
				if sb != nil {
					sb.Close()
					t.Errorf("New returned a Sandbox with the error %v", err)
				}
				wantPolicyError(t, err, tt.field)
				checkAgrees(t, p, err)
			})
		})
	}
}

// TestNewAcceptsEdgeNumbers: the bounds themselves are valid.
func TestNewAcceptsEdgeNumbers(t *testing.T) {
	for _, set := range []func(p *runtime.Policy){
		func(p *runtime.Policy) { p.CPUs = 0.01 },
		func(p *runtime.Policy) { p.CPUs = 4096 },
		func(p *runtime.Policy) { p.Pids = 2 },
		func(p *runtime.Policy) { p.Pids = 1 << 22 },
		func(p *runtime.Policy) { p.Memory = 4 << 20 },
		func(p *runtime.Policy) { p.Memory = 1 << 50 },
		func(p *runtime.Policy) { p.Memory, p.Pids, p.CPUs = 0, 0, 0 },
		func(p *runtime.Policy) { p.TmpSize, p.FileSize = 4096, 1 },
		func(p *runtime.Policy) { p.TmpSize, p.FileSize = 1<<50, 1<<50 },
		func(p *runtime.Policy) { p.Timeout = time.Millisecond },
		func(p *runtime.Policy) { p.OutputLimit = runtime.Unlimited },
		func(p *runtime.Policy) { p.OutputLimit = 1 << 50 },
		func(p *runtime.Policy) {
			p.Memory, p.Pids, p.CPUs, p.FileSize, p.TmpSize, p.Timeout = runtime.Unlimited, runtime.Unlimited, runtime.Unlimited, runtime.Unlimited, runtime.Unlimited, runtime.Unlimited
		},
	} {
		p := runtime.DefaultPolicy(t.TempDir())
		set(&p)
		sb, err := runtime.New(p)
		if err != nil {
			t.Errorf("New(CPUs %v, Pids %d, Memory %d, TmpSize %d, FileSize %d, Timeout %v, OutputLimit %d): %v",
				p.CPUs, p.Pids, p.Memory, p.TmpSize, p.FileSize, p.Timeout, p.OutputLimit, err)
			continue
		}
		sb.Close()
	}
}

func TestNewAcceptsGoodPolicy(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		name string
		p    func(ws string) runtime.Policy
	}{
		{"default", runtime.DefaultPolicy},
		{"zero output limit and timeout", func(ws string) runtime.Policy { return runtime.Policy{Workspace: ws} }},
		{"workspace with trailing slash", func(ws string) runtime.Policy { return runtime.DefaultPolicy(ws + "/") }},
		{"workspace with spaces and unicode", func(ws string) runtime.Policy {
			return runtime.DefaultPolicy(mkdirs(t, ws, "my wörk space") + "/my wörk space")
		}},
		{"writable containing a denied path", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			mkdirs(t, ws, "data/secret")
			p.Writable, p.Deny = []string{"data"}, []string{"data/secret"}
			return p
		}},
		{"writable project in home", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			mkdirs(t, home, ".ssh")
			mkdirs(t, home, "proj")
			p.Writable = []string{filepath.Join(home, "proj")}
			return p
		}},
		{"deny that does not exist", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			p.Deny = []string{"not/there/yet", "/nonexistent-hutch-test"}
			return p
		}},
		{"degradable layers", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			p.AllowDegraded = []runtime.Layer{runtime.LayerLoopback, runtime.LayerKeyring}
			return p
		}},
		{"a system tree allowed by name", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			p.Writable, p.AllowSystemWrite = []string{"/etc"}, []string{"/etc"}
			return p
		}},
		{"a tree inside a system tree", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			p.Writable = []string{"/var/tmp"}
			return p
		}},
		{"everything else set", func(ws string) runtime.Policy {
			p := runtime.DefaultPolicy(ws)
			p.Env = []string{"A=1", "B=", "C=x=y"}
			p.Tools = "/usr/bin"
			p.Timeout = time.Minute
			p.OutputLimit = runtime.Unlimited
			p.TmpSize = 1 << 20
			p.NoDefaultDeny = true
			p.AllowGitWrite = true
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noSpawn(t, func() {
				p := tt.p(t.TempDir())
				sb, err := runtime.New(p)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer sb.Close()
				r, err := runtime.Check(p)
				if err != nil {
					t.Fatalf("Check: %v, New: nil", err)
				}
				if got, want := r.Policy(), sb.Policy(); !reflect.DeepEqual(got, want) {
					t.Errorf("Check's policy differs from New's:\n%+v\n%+v", got, want)
				}
				if r.Level() == "" {
					t.Error("Check chose no level")
				}
			})
		})
	}
}

// checkAgrees holds Check to what New said of p: the same refusal, word
// for word, and no Resolved with it.
func checkAgrees(t *testing.T, p runtime.Policy, newErr error) {
	t.Helper()
	r, err := runtime.Check(p)
	if r != nil {
		t.Errorf("Check returned a Resolved with the error %v", err)
	}
	if fmt.Sprint(err) != fmt.Sprint(newErr) {
		t.Errorf("Check: %v\nNew:   %v", err, newErr)
	}
}

func TestStartRefusesBadCommand(t *testing.T) {
	ws := t.TempDir()
	mkdirs(t, ws, "sub")
	for _, l := range [][2]string{{"/etc", "etc"}, {"..", "up"}} {
		if err := os.Symlink(l[0], filepath.Join(ws, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type tc struct {
		name  string
		cmd   func() *runtime.Cmd
		field string
	}
	tests := []tc{
		{"empty command", func() *runtime.Cmd { return sb.Command(ctx, "") }, "Cmd.Path"},
		{"empty Path set by hand", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Path = ""; return c }, "Cmd.Path"},
		{"NUL in Path", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Path = "tr\x00ue"; return c }, "Cmd.Path"},
		{"NUL in arg 0", func() *runtime.Cmd { return sb.Command(ctx, "tr\x00ue") }, "Cmd.Args[0]"},
		{"NUL in arg 1", func() *runtime.Cmd { return sb.Command(ctx, "echo", "a\x00b") }, "Cmd.Args[1]"},
		{"NUL in arg 3", func() *runtime.Cmd { return sb.Command(ctx, "echo", "a", "b", "\x00") }, "Cmd.Args[3]"},
		{"env without =", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Env = []string{"A=1", "B"}; return c }, "Cmd.Env"},
		{"env with empty key", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Env = []string{"=1"}; return c }, "Cmd.Env"},
		{"env with NUL", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Env = []string{"A=\x00"}; return c }, "Cmd.Env"},
		{"dir /proc", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/proc"; return c }, "Cmd.Dir"},
		{"dir /proc/self/cwd", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/proc/self/cwd"; return c }, "Cmd.Dir"},
		{"dir /proc/1/root/", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/proc/1/root/"; return c }, "Cmd.Dir"},
		{"dir /proc via ..", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/tmp/../proc/self"; return c }, "Cmd.Dir"},
		{"dir /proc relative to the workspace", func() *runtime.Cmd {
			c := sb.Command(ctx, "true")
			c.Dir = strings.Repeat("../", strings.Count(ws, "/")+2) + "proc/self/fd"
			return c
		}, "Cmd.Dir"},
		{"dir /dev", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/dev/fd"; return c }, "Cmd.Dir"},
		{"dir /etc", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/etc"; return c }, "Cmd.Dir"},
		{"dir /", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/"; return c }, "Cmd.Dir"},
		{"dir /tmp", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "/tmp"; return c }, "Cmd.Dir"},
		{"dir ../..", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "../.."; return c }, "Cmd.Dir"},
		{"dir ..", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "sub/../.."; return c }, "Cmd.Dir"},
		{"dir through a symlink to /etc", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "etc"; return c }, "Cmd.Dir"},
		{"dir below a symlink to /etc", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "etc/ssl"; return c }, "Cmd.Dir"},
		{"dir through a symlink to the parent", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "up"; return c }, "Cmd.Dir"},
		{"dir with NUL", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "sub\x00"; return c }, "Cmd.Dir"},
		{"dir with control character", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = "sub\n"; return c }, "Cmd.Dir"},
		{"dir too long", func() *runtime.Cmd { c := sb.Command(ctx, "true"); c.Dir = strings.Repeat("d", 5000); return c }, "Cmd.Dir"},
	}
	for _, name := range refusedEnv {
		tests = append(tests, tc{"env " + name, func() *runtime.Cmd {
			c := sb.Command(ctx, "true")
			c.Env = []string{"OK=1", name + "=x"}
			return c
		}, "Cmd.Env[" + name + "]"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cmd()
			noSpawn(t, func() {
				wantPolicyError(t, c.Start(), tt.field)
			})
			// Once Start is called a Result exists: here one that says
			// the command never ran, and why.
			if r := c.Result; r == nil || r.ExitCode != -1 || r.Killed || !strings.Contains(r.Error, tt.field) {
				t.Errorf("Result of a refused command = %+v, want exit -1, not killed, Error naming %s", r, tt.field)
			}
			// Nothing runs, so there is nothing to wait for.
			if err := c.Wait(); err == nil {
				t.Error("Wait after a refused Start returned nil")
			}
			// The same refusal through Run, Output and CombinedOutput.
			noSpawn(t, func() {
				wantPolicyError(t, tt.cmd().Run(), tt.field)
				_, err := tt.cmd().Output()
				wantPolicyError(t, err, tt.field)
				_, err = tt.cmd().CombinedOutput()
				wantPolicyError(t, err, tt.field)
			})
		})
	}
}

func TestStartRefusesWithoutSpawning(t *testing.T) {
	sb, err := runtime.New(runtime.DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		cmd  *runtime.Cmd
		want error // errors.Is target, or nil for any non-nil error
	}{
		{"nil context", sb.Command(nil, "true"), nil},
		{"canceled context", sb.Command(canceled, "true"), context.Canceled},
		{"zero Cmd", &runtime.Cmd{Path: "true"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noSpawn(t, func() {
				err := tt.cmd.Start()
				if err == nil {
					t.Fatal("Start: nil error")
				}
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Fatalf("Start: %v, want %v", err, tt.want)
				}
				var pe *runtime.PolicyError
				if errors.As(err, &pe) {
					t.Errorf("Start: %v is a PolicyError", err)
				}
			})
		})
	}
}

func TestNewResolvesPaths(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	real := t.TempDir()
	real, err = filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	mkdirs(t, real, "sub", "target", "denied", "a/b")
	wsLink := filepath.Join(t.TempDir(), "ws-link")
	for _, l := range [][2]string{
		{real, wsLink},
		{"target", filepath.Join(real, "wlink")},
		{filepath.Join(real, "denied"), filepath.Join(real, "dlink")},
	} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	p := runtime.DefaultPolicy(wsLink)
	p.Writable = []string{"sub", "wlink", "./a/../a/b/", other}
	p.Deny = []string{"dlink/secret", "not/there", "~/creds", "/etc/../etc/hutch-test-missing", "sub/../sub/.netrc"}
	wantWritable := []string{
		filepath.Join(real, "sub"),
		filepath.Join(real, "target"),
		filepath.Join(real, "a/b"),
		other,
	}
	wantDeny := []string{
		filepath.Join(real, "denied/secret"),
		filepath.Join(real, "not/there"),
		filepath.Join(home, "creds"),
		"/etc/hutch-test-missing",
		filepath.Join(real, "sub/.netrc"),
	}

	var sb *runtime.Sandbox
	noSpawn(t, func() {
		sb, err = runtime.New(p)
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := sb.Policy()
	if got.Workspace != real {
		t.Errorf("Workspace = %q, want %q (symlink resolved)", got.Workspace, real)
	}
	if !slices.Equal(got.Writable, wantWritable) {
		t.Errorf("Writable = %q, want %q", got.Writable, wantWritable)
	}
	if !slices.Equal(got.Deny, wantDeny) {
		t.Errorf("Deny = %q, want %q", got.Deny, wantDeny)
	}
	if got.OutputLimit != runtime.DefaultOutputLimit || got.Timeout != 0 {
		t.Errorf("OutputLimit, Timeout = %d, %v; want the defaults", got.OutputLimit, got.Timeout)
	}
}

// TestZeroLimitsAreDefaults: a Policy holding only a Workspace has the
// limits DefaultPolicy sets (0 is hutch's default, never "no limit"), and
// its commands run in a cgroup holding them; Unlimited lifts every limit.
// Without cgroups (an unprivileged user) the zero Policy, which does not
// allow the cgroup layer to degrade, fails closed.
func TestZeroLimitsAreDefaults(t *testing.T) {
	ws := t.TempDir()
	def := runtime.DefaultPolicy(ws)
	sb, err := runtime.New(runtime.Policy{Workspace: ws})
	var le *runtime.LayerError
	if errors.As(err, &le) && le.Layer == runtime.LayerCgroup && os.Getuid() != 0 {
		t.Skipf("no cgroups for uid %d, and the zero Policy does not degrade: %v", os.Getuid(), err)
	}
	if err != nil {
		t.Fatalf("New(Policy{Workspace}): %v", err)
	}
	defer sb.Close()
	got := sb.Policy()
	if got.Memory != def.Memory || got.Pids != runtime.DefaultPids || got.OutputLimit != runtime.DefaultOutputLimit ||
		got.CPUs != 0 || got.Timeout != 0 || got.TmpSize != 0 || got.FileSize != 0 {
		t.Errorf("Policy() limits = memory %d, pids %d, output %d, cpus %v, timeout %v, tmp %d, file %d; want DefaultPolicy's memory %d, pids %d, output %d and no others",
			got.Memory, got.Pids, got.OutputLimit, got.CPUs, got.Timeout, got.TmpSize, got.FileSize, def.Memory, runtime.DefaultPids, runtime.DefaultOutputLimit)
	}
	cmd := sb.Command(context.Background(), "true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("true: %v", err)
	}
	if !slices.Contains(cmd.Result.Layers, runtime.LayerCgroup) {
		t.Errorf("zero Policy: layers %v, want the limits in a cgroup", cmd.Result.Layers)
	}

	u := runtime.Policy{Workspace: ws, Memory: runtime.Unlimited, Pids: runtime.Unlimited, OutputLimit: runtime.Unlimited}
	sb, err = runtime.New(u)
	if err != nil {
		t.Fatalf("New(Unlimited): %v", err)
	}
	defer sb.Close()
	if got := sb.Policy(); got.Memory != runtime.Unlimited || got.Pids != runtime.Unlimited || got.OutputLimit != runtime.Unlimited {
		t.Errorf("Policy() of Unlimited = memory %d, pids %d, output %d", got.Memory, got.Pids, got.OutputLimit)
	}
	cmd = sb.Command(context.Background(), "true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("true: %v", err)
	}
	if slices.Contains(cmd.Result.Layers, runtime.LayerCgroup) || len(cmd.Result.Skipped) > 0 {
		t.Errorf("Unlimited: layers %v, skipped %v; want no cgroup, nothing degraded", cmd.Result.Layers, cmd.Result.Skipped)
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := runtime.DefaultPolicy("/some/ws")
	if p.Workspace != "/some/ws" || p.OutputLimit != runtime.DefaultOutputLimit || p.Timeout != 0 ||
		p.NoDefaultDeny || p.AllowGitWrite || len(p.Writable)+len(p.Deny)+len(p.Env) != 0 {
		t.Errorf("DefaultPolicy = %+v", p)
	}
	// Resource limits by default; only the cgroup layer (to rlimits) and
	// Landlock (defense in depth under the namespaces) may degrade.
	if p.Pids != runtime.DefaultPids || p.Memory <= 0 || !slices.Equal(p.AllowDegraded, []runtime.Layer{runtime.LayerCgroup, runtime.LayerLandlock}) {
		t.Errorf("DefaultPolicy limits = memory %d, pids %d, degradable %v", p.Memory, p.Pids, p.AllowDegraded)
	}
	for _, d := range []string{"~/.ssh", "~/.aws", "/etc/shadow", "/etc/sudoers"} {
		if !slices.Contains(runtime.DefaultDeny(), d) {
			t.Errorf("DefaultDeny lacks %s", d)
		}
	}
}

func TestPolicyErrorMessage(t *testing.T) {
	tests := []struct {
		e    runtime.PolicyError
		want string
	}{
		{runtime.PolicyError{Field: "Workspace", Reason: "required"}, "hutch: Workspace: required"},
		{runtime.PolicyError{Field: "Writable[0]", Value: "x", Reason: "does not exist"}, `hutch: Writable[0] "x": does not exist`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestControlCharactersEscapedOnce: a value holding control characters is
// kept as given in PolicyError.Value and escaped once by Error, wherever
// the check that refused it lives.
func TestControlCharactersEscapedOnce(t *testing.T) {
	ws := t.TempDir()
	bad := "/x/a\nb\x1b[31m"
	const esc = `"/x/a\nb\x1b[31m"`
	for _, tt := range []struct {
		field string
		value string
		p     runtime.Policy
	}{
		{"Workspace", bad, runtime.Policy{Workspace: bad}},
		{"Workspace", bad + "\x00", runtime.Policy{Workspace: bad + "\x00"}},
		{"Writable[0]", bad, runtime.Policy{Workspace: ws, Writable: []string{bad}}},
		{"Deny[0]", bad, runtime.Policy{Workspace: ws, Deny: []string{bad}}},
		{"DenyNames[0]", "a\nb", runtime.Policy{Workspace: ws, DenyNames: []string{"a\nb"}}},
		{"DenyNames[0]", "a\x00b", runtime.Policy{Workspace: ws, DenyNames: []string{"a\x00b"}}},
	} {
		_, err := runtime.New(tt.p)
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != tt.field || pe.Value != tt.value {
			t.Errorf("New: %#v, want a PolicyError for %s holding %q as given", err, tt.field, tt.value)
			continue
		}
		if want := "hutch: " + tt.field + " " + strconv.Quote(tt.value) + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Error() = %q, want it to start %q", err.Error(), want)
		}
	}
	// As it reads, for the record: one backslash per escape.
	_, err := runtime.New(runtime.Policy{Workspace: bad})
	if err == nil || !strings.Contains(err.Error(), esc) {
		t.Errorf("Error() = %v, want %s in it", err, esc)
	}
}

// TestPolicyLogger: hutch's records go to the caller's Logger, not to
// slog.Default(): New says at Debug which sandbox it made.
func TestPolicyLogger(t *testing.T) {
	var buf, global strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	p := runtime.DefaultPolicy(t.TempDir())
	p.Network = runtime.NetworkHost
	p.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	for _, want := range []string{`level=DEBUG msg="hutch: sandbox ready"`, `level=INFO msg="hutch: Network is host`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the Logger got %q, want a record %s", buf.String(), want)
		}
	}
	if strings.Contains(global.String(), "hutch:") {
		t.Errorf("slog.Default() got %q, want nothing with a Logger given", global.String())
	}
}
