//go:build linux

package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// lateCase is a policy change New refuses, naming field ("" for an error
// that is not a *PolicyError).
type lateCase struct {
	name  string
	set   func(p *runtime.Policy)
	field string
}

// refusedLate are policies refused only after the paths were resolved:
// by the level, the filter or the network, where New used to have made
// things on the host already.
var refusedLate = []lateCase{
	{"unknown network mode", func(p *runtime.Policy) { p.Network = "some" }, "Network"},
	{"unknown system call", func(p *runtime.Policy) { p.SeccompAllow = []string{"no_such_call"} }, ""},
	{"allow-list without allow", func(p *runtime.Policy) { p.AllowDomains = []string{"example.com"} }, "AllowDomains"},
}

// TestNewLeavesNoTempDir: at level landlock New makes a private
// temporary directory; a policy New refuses leaves none behind on the
// host, and Close removes the one a good policy got.
func TestNewLeavesNoTempDir(t *testing.T) {
	if landlock.ABI() < 1 {
		t.Skip("no Landlock: level landlock is out of reach")
	}
	t.Setenv("HUTCH_SIMULATE", "no-userns")
	// The workspaces are made elsewhere than $TMPDIR: t.TempDir would
	// make them in the directory watched.
	wsBase := t.TempDir()
	workspace := func() string {
		ws, err := os.MkdirTemp(wsBase, "ws-")
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp makes the Sandbox's
	left := func() []string {
		t.Helper()
		ents, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	// And what only level landlock refuses.
	cases := append(slices.Clone(refusedLate),
		lateCase{"landlock skipped at level landlock", func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerLandlock} }, "SkipLayers"},
		lateCase{"allow-list at level landlock", func(p *runtime.Policy) {
			p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
		}, "Network"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := runtime.DefaultPolicy(workspace())
			p.MinLevel = runtime.LevelLandlock
			tc.set(&p)
			sb, err := runtime.New(p)
			if sb != nil {
				sb.Close()
				t.Fatal("New accepted the policy")
			}
			if tc.field != "" {
				wantPolicyError(t, err, tc.field)
			} else if err == nil {
				t.Fatal("New accepted the policy")
			}
			if l := left(); len(l) > 0 {
				t.Errorf("New failed (%v) and left %q in $TMPDIR", err, l)
			}
		})
	}

	p := runtime.DefaultPolicy(workspace())
	p.MinLevel = runtime.LevelLandlock
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if l := left(); len(l) != 1 {
		t.Errorf("a level landlock Sandbox holds %q in $TMPDIR, want its one directory", l)
	}
	sb.Close()
	if l := left(); len(l) > 0 {
		t.Errorf("Close left %q in $TMPDIR", l)
	}
}

// TestRefusedPolicyMakesNothing: with AllowGitWrite the view keeps a
// repository's hooks, info, modules and worktrees read-only, so they are
// made where missing; a policy New refuses makes none of them.
func TestRefusedPolicyMakesNothing(t *testing.T) {
	for _, tc := range refusedLate {
		t.Run(tc.name, func(t *testing.T) {
			ws := mkdirs(t, t.TempDir(), ".git/objects", ".git/refs")
			if err := os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := runtime.DefaultPolicy(ws)
			p.AllowGitWrite = true
			tc.set(&p)
			noSpawn(t, func() {
				sb, err := runtime.New(p)
				if sb != nil {
					sb.Close()
					t.Fatal("New accepted the policy")
				}
				if tc.field != "" {
					wantPolicyError(t, err, tc.field)
				}
			})
			for _, d := range []string{"hooks", "info", "modules", "worktrees"} {
				if _, err := os.Lstat(filepath.Join(ws, ".git", d)); err == nil {
					t.Errorf("New refused the policy but made .git/%s", d)
				}
			}
		})
	}
}

// TestDefaultDenyNotShared: what DefaultDeny and DefaultDenyNames return
// is the caller's copy; emptying it masks nothing less in any Sandbox.
func TestDefaultDenyNotShared(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	const secret = "HUTCH-DEFAULT-DENY-SECRET"
	ws := mkdirs(t, t.TempDir())
	mkdirs(t, home, ".ssh")
	for _, f := range []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(ws, ".env")} {
		if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][]string{runtime.DefaultDeny(), runtime.DefaultDenyNames()} {
		for i := range l {
			l[i] = "/nonexistent-hutch"
		}
	}
	if !slices.Contains(runtime.DefaultDeny(), "~/.ssh") || !slices.Contains(runtime.DefaultDenyNames(), ".env") {
		t.Fatalf("the defaults changed: %q, %q", runtime.DefaultDeny(), runtime.DefaultDenyNames())
	}
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	out, _ := sb.Command(context.Background(), "sh", "-c", "cat "+home+"/.ssh/id_ed25519 .env").CombinedOutput()
	if strings.Contains(string(out), secret) {
		t.Errorf("a default-denied file was read: %q", out)
	}
}

// TestCloseLeavesRunningCommandsTmp: Close leaves commands still running
// as they were, at level landlock too, where their TMPDIR is the
// Sandbox's private directory on the host: it goes once the last of them
// has ended, not at Close.
func TestCloseLeavesRunningCommandsTmp(t *testing.T) {
	if landlock.ABI() < 1 {
		t.Skip("no Landlock: level landlock is out of reach")
	}
	t.Setenv("HUTCH_SIMULATE", "no-userns")
	ws := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp makes the Sandbox's
	p := runtime.DefaultPolicy(ws)
	p.MinLevel = runtime.LevelLandlock
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	private, err := filepath.Glob(filepath.Join(tmp, "*"))
	if err != nil || len(private) != 1 {
		t.Fatalf("the Sandbox's private directory: %q, %v", private, err)
	}
	stdin, toCmd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer toCmd.Close()
	c := sb.Command(context.Background(), "sh", "-c", `read x && echo late > "$TMPDIR/late" && cp "$TMPDIR/late" late-copy`)
	c.Dir = ws
	c.Stdin = stdin
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(private[0]); err != nil {
		t.Errorf("host: Close removed the private directory under a running command: %v", err)
	}
	if _, err := toCmd.WriteString("go\n"); err != nil {
		t.Fatalf("%v; the command: %v, %+v, %s", err, c.Wait(), c.Result, stderr.String())
	}
	toCmd.Close()
	if err := c.Wait(); err != nil {
		t.Errorf("the command, after Close: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "late-copy")); err != nil || string(b) != "late\n" {
		t.Errorf("host: what the command wrote in its TMPDIR after Close: %q, %v", b, err)
	}
	if _, err := os.Stat(private[0]); !os.IsNotExist(err) {
		t.Errorf("host: the private directory outlived the Sandbox's last command: %v", err)
	}
}
