package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/darwin"
)

// resolveSeatbelt resolves p as macOS's New does, with home as "~", and
// maps it onto the Seatbelt backend's policy; the Policy returned is
// what Sandbox.Policy would report.
func resolveSeatbelt(p Policy, home string) (darwin.Policy, Policy, error) {
	r, err := resolvePolicy(p, darwinRules(home))
	if err != nil {
		return darwin.Policy{}, Policy{}, err
	}
	dp, _ := seatbeltPolicy(r)
	return dp, r.policy, nil
}

// TestSeatbeltPolicy maps policies onto the macOS backend's, on any host:
// "~" is the home given, relative paths are the workspace's, and what the
// Linux runtime masks or keeps read-only is denied or read-only there.
func TestSeatbeltPolicy(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "../ws-"+filepath.Base(home))
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	extra := filepath.Join(home, "../extra-"+filepath.Base(home))
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(extra) })
	ws, extra = filepath.Clean(ws), filepath.Clean(extra)

	p := Policy{Workspace: ws, Writable: []string{extra}, Deny: []string{"~/creds", "secret"}, Network: NetworkHost}
	dp, got, err := resolveSeatbelt(p, home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{home + "/.ssh", home + "/.aws", home + "/creds", ws + "/secret", "/etc/shadow"} {
		if !slices.Contains(dp.Deny, want) {
			t.Errorf("Deny %q lacks %s", dp.Deny, want)
		}
	}
	for _, d := range dp.Deny {
		if strings.Contains(d, "~") {
			t.Errorf("Deny holds %q: ~ not expanded", d)
		}
	}
	// The repository's git directory is read-only whole, as on Linux.
	if want := []string{ws + "/.git"}; !slices.Equal(dp.ReadOnly, want) || len(dp.Pins) != 0 {
		t.Errorf("ReadOnly = %q, Pins = %q, want %q and none", dp.ReadOnly, dp.Pins, want)
	}
	if dp.Workspace != ws || !slices.Equal(dp.Writable, []string{extra}) || dp.HomeDir != home ||
		!slices.Equal(dp.DenyNames, DefaultDenyNames()) || !dp.AllowPTY || !dp.HostNetwork {
		t.Errorf("mapped to %+v", dp)
	}
	if !slices.Equal(got.Deny, []string{home + "/creds", ws + "/secret"}) || !slices.Equal(p.Deny, []string{"~/creds", "secret"}) {
		t.Errorf("Policy.Deny resolved to %q, the caller's left %q", got.Deny, p.Deny)
	}

	p = Policy{Workspace: ws, NoDefaultDeny: true, AllowGitWrite: true}
	dp, _, err = resolveSeatbelt(p, home)
	if err != nil {
		t.Fatal(err)
	}
	if len(dp.Deny) != 0 || len(dp.DenyNames) != 0 {
		t.Errorf("NoDefaultDeny and AllowGitWrite mapped to %+v", dp)
	}
	// Committing: .git pinned, what git reads as configuration or code
	// read-only (Seatbelt goes by path: a missing commondir cannot be
	// made either). Resolving makes nothing: New makes the missing
	// directories once every check passed.
	git := ws + "/.git/"
	if want := []string{git + "hooks", git + "info", git + "modules", git + "worktrees", git + "config", git + "commondir", git + "config.worktree", git + "gitdir"}; !slices.Equal(dp.ReadOnly, want) || !slices.Equal(dp.Pins, []string{ws + "/.git"}) {
		t.Errorf("AllowGitWrite: ReadOnly = %q, Pins = %q, want %q and .git", dp.ReadOnly, dp.Pins, want)
	}
	if _, err := os.Stat(git + "worktrees"); err == nil {
		t.Errorf(".git/worktrees was created by resolving the policy")
	}

	p = Policy{Workspace: ws, NoDefaultDeny: true, DenyNames: []string{"*.key", ".env"}}
	if dp, _, err = resolveSeatbelt(p, home); err != nil || !slices.Equal(dp.DenyNames, p.DenyNames) {
		t.Errorf("DenyNames %q mapped to %q, %v", p.DenyNames, dp.DenyNames, err)
	}
	p = Policy{Workspace: ws, DenyNames: []string{"credentials.json", ".env"}}
	if dp, _, err = resolveSeatbelt(p, home); err != nil || !slices.Equal(dp.DenyNames, append(DefaultDenyNames(), "credentials.json")) {
		t.Errorf("NoDefaultDeny and AllowGitWrite mapped to %+v", dp)
	}
}

func TestSeatbeltPolicyRefuses(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(home, "../ws-"+filepath.Base(home))
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.Symlink("/", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		p     Policy
		field string
	}{
		{"no workspace", Policy{}, "Workspace"},
		{"relative workspace", Policy{Workspace: "ws"}, "Workspace"},
		{"home as workspace", Policy{Workspace: home}, "Workspace"},
		{"missing writable", Policy{Workspace: ws, Writable: []string{"/ok-not-there"}}, "Writable[0]"},
		{"writable through a symlink", Policy{Workspace: ws, Writable: []string{"out/usr"}}, "Writable[0]"},
		{"writable home", Policy{Workspace: ws, Writable: []string{home}}, "Writable[0]"},
		{"control character", Policy{Workspace: ws, Deny: []string{"a\nb"}}, "Deny[0]"},
		{"deny the workspace", Policy{Workspace: ws, Deny: []string{"."}}, "Deny[0]"},
		{"deny name with /", Policy{Workspace: ws, DenyNames: []string{"ok", "a/b"}}, "DenyNames[1]"},
		{"deny name with a class", Policy{Workspace: ws, DenyNames: []string{"id_[rd]sa"}}, "DenyNames[0]"},
		{"deny name with a quote", Policy{Workspace: ws, DenyNames: []string{"x", `a"b`}}, "DenyNames[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := resolveSeatbelt(tc.p, home)
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Field != tc.field {
				t.Errorf("seatbeltPolicy = %v, want an error naming %s", err, tc.field)
			}
		})
	}
	if _, _, err := resolveSeatbelt(Policy{Workspace: ws}, ""); err == nil {
		t.Error("no home directory accepted: its keychains would not be denied")
	}
}

// TestSeatbeltLevel: macOS accepts the levels its profile holds, and the
// policy's default, and refuses those that need namespaces.
func TestSeatbeltLevel(t *testing.T) {
	for _, tc := range []struct {
		min Level
		ok  bool
	}{
		{"", true}, {LevelSeatbelt, true}, {LevelLandlock, true},
		{LevelNamespaces, false}, {LevelNamespacesNoProc, false},
	} {
		err := seatbeltLevel(tc.min)
		var le *LevelError
		if tc.ok != (err == nil) || err != nil && !errors.As(err, &le) {
			t.Errorf("MinLevel %q: %v", tc.min, err)
		}
	}
}
