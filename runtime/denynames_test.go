//go:build linux

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/spawn"
)

func TestCheckDenyNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		field string // "" when valid
	}{
		{nil, ""},
		{[]string{".env", ".env.*", "id_*", "*.key", "secret?.txt", "id_[rd]sa", "a b", `\*literal`}, ""},
		{[]string{""}, "DenyNames[0]"},
		{[]string{"ok", "/"}, "DenyNames[1]"},
		{[]string{"ok", "ok2", "a/b"}, "DenyNames[2]"},
		{[]string{"."}, "DenyNames[0]"},
		{[]string{".."}, "DenyNames[0]"},
		{[]string{"a\x00b"}, "DenyNames[0]"},
		{[]string{"a\nb"}, "DenyNames[0]"},
		{[]string{"[unclosed"}, "DenyNames[0]"},
		{[]string{`trailing\`}, "DenyNames[0]"},
		{[]string{strings.Repeat("x", 256)}, "DenyNames[0]"},
	} {
		err := checkDenyNames(tc.names)
		var pe *PolicyError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("checkDenyNames(%q) = %v, want nil", tc.names, err)
		case tc.field != "" && (!errors.As(err, &pe) || pe.Field != tc.field):
			t.Errorf("checkDenyNames(%q) = %v, want a PolicyError naming %s", tc.names, err, tc.field)
		}
	}
}

func TestMatchName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{".env", true},
		{".env.local", true},
		{".env.", true},
		{".envrc", false},
		{"x.env", false},
		{".ssh", true},
		{"ssh", false},
		{"id_rsa", true},
		{"id_rsa.pub", false},
		{"id_ed25519", true},
		{"id_ecdsa", true},
		{"id_dsa", true},
		{"cacert.pem", false},
		{"ID_RSA", false},
	} {
		if got := matchName(DefaultDenyNames(), tc.name); got != tc.want {
			t.Errorf("matchName(DefaultDenyNames, %q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !matchName([]string{"*.key"}, "tls.key") || matchName([]string{"*.key"}, "tls.key.pub") {
		t.Error("*.key: wrong matches")
	}
}

func TestDenyNamesMerged(t *testing.T) {
	p := Policy{DenyNames: []string{"id_rsa", "*.key", "*.key"}}
	if got, want := denyNames(&p), append(DefaultDenyNames(), "*.key"); !slices.Equal(got, want) {
		t.Errorf("denyNames = %q, want %q", got, want)
	}
	p.NoDefaultDeny = true
	if got := denyNames(&p); !slices.Equal(got, []string{"id_rsa", "*.key"}) {
		t.Errorf("NoDefaultDeny: denyNames = %q", got)
	}
}

// tree makes files (and directories, ending in "/") under root.
func tree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindNamed(t *testing.T) {
	ws, extra := t.TempDir(), t.TempDir()
	tree(t, ws, ".env", "id_rsa", ".ssh/config", "README",
		"sub/.env.production", "sub/.ssh/id_rsa", "sub/deep/er/id_ed25519", "sub/id_rsa.pub",
		"node_modules/x/.env", ".git/id_rsa", "vendor/.hg/.env")
	tree(t, extra, ".env", "a/id_ecdsa")
	if err := os.Symlink("../.env.production", filepath.Join(ws, "sub", "deep", ".env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ws, "sub", ".env.up")); err != nil {
		t.Fatal(err) // a link to the workspace itself: never masked
	}
	roots := []string{ws, extra}

	deep, _ := scanDeep(roots, DefaultDenyNames())
	want := []string{
		ws + "/node_modules/x/.env", ws + "/sub/.env.production", ws + "/sub/.ssh", ws + "/sub/deep/er/id_ed25519",
		extra + "/a/id_ecdsa",
	}
	got := slices.Clone(deep.paths)
	slices.Sort(got)
	slices.Sort(want)
	// The symlink sub/deep/.env resolves to sub/.env.production, already
	// there; sub/.env.up resolves to the workspace and is dropped.
	got = slices.Compact(got)
	if !slices.Equal(got, want) {
		t.Errorf("scanDeep paths = %q, want %q", got, want)
	}
	if !slices.Equal(deep.counts, []int{5, 1}) {
		t.Errorf("scanDeep counts = %v, want [5 1]", deep.counts)
	}

	top := topNamed(roots, DefaultDenyNames())
	want = []string{ws + "/.env", ws + "/.ssh", ws + "/id_rsa", extra + "/.env"}
	if !slices.Equal(top.paths, want) {
		t.Errorf("topNamed paths = %q, want %q", top.paths, want)
	}

	if n, _ := scanDeep(roots, nil); n.total() != 0 {
		t.Errorf("no names: %d found", n.total())
	}
}

// TestScanDeepNestedRoot: a writable tree inside the workspace is
// searched once, as a tree of its own.
func TestScanDeepNestedRoot(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, "cache/.env", "cache/x/.env")
	n, _ := scanDeep([]string{ws, ws + "/cache"}, DefaultDenyNames())
	if !slices.Equal(n.paths, []string{ws + "/cache/x/.env"}) || !slices.Equal(n.counts, []int{0, 1}) {
		t.Errorf("scanDeep = %q %v", n.paths, n.counts)
	}
}

func TestNameMounts(t *testing.T) {
	roots := []string{"/ws", "/extra"}
	for _, tc := range []struct {
		paths []string
		want  int
	}{
		{nil, 0},
		{[]string{"/ws/.env"}, 1},
		{[]string{"/ws/.env", "/ws/.env"}, 1},
		{[]string{"/ws/a/.env"}, 2},
		{[]string{"/ws/a/b/c/.env"}, 4},
		{[]string{"/ws/a/b/.env", "/ws/a/c/.env"}, 5}, // a, a/b, a/c pinned
		{[]string{"/ws/a/.env", "/extra/a/.env"}, 4},
		{[]string{"/home/u/secret.env"}, 1}, // a link's target outside: no pins
	} {
		if got := nameMounts(mounts.Spec{Workspace: roots[0], Writable: roots[1:]}, tc.paths, nil, false); got != tc.want {
			t.Errorf("nameMounts(%q, nil, false) = %d, want %d", tc.paths, got, tc.want)
		}
	}
}

// TestNamesBounded: past MaxNameMounts, by count or by the pins of deep
// matches, the check refuses with a MaskLimitError that names the tree,
// the count and the limit; at the bound it accepts.
func TestNamesBounded(t *testing.T) {
	sb := &Sandbox{machine: machine{names: DefaultDenyNames()}}
	sb.spec.Workspace, sb.spec.Writable = "/ws", []string{"/extra"}
	flat := func(n int) named {
		all := named{counts: []int{0, 0}}
		for i := range n {
			all.add(0, fmt.Sprintf("/ws/.env.%d", i))
		}
		return all
	}
	if err := sb.checkNamed(flat(MaxNameMounts), nil); err != nil {
		t.Errorf("%d matches refused: %v", MaxNameMounts, err)
	}
	for _, n := range []int{MaxNameMounts + 1, 100000} {
		err := sb.checkNamed(flat(n), nil)
		var le *MaskLimitError
		if !errors.As(err, &le) || le.Count != n || le.Limit != MaxNameMounts {
			t.Fatalf("%d matches: %v, want a MaskLimitError", n, err)
		}
		for _, s := range []string{"workspace /ws holds " + fmt.Sprint(n), fmt.Sprint(MaxNameMounts), ".env", "NoDefaultDeny"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%d matches: %q does not say %q", n, err, s)
			}
		}
		if len(le.Trees) != 1 {
			t.Errorf("Trees = %v, want only the workspace", le.Trees)
		}
	}

	// 300 matches, each 3 directories deep in a chain of its own: 1200
	// mounts.
	deep := named{counts: []int{0, 0}}
	for i := range 300 {
		deep.add(1, fmt.Sprintf("/extra/%d/a/b/.env", i))
	}
	err := sb.checkNamed(deep, nil)
	var le *MaskLimitError
	if !errors.As(err, &le) || le.Mounts != 1200 || !strings.Contains(err.Error(), "writable /extra holds 300") {
		t.Errorf("deep matches: %v, want a MaskLimitError of 1200 mounts", err)
	}
}

// TestNewRefusesTooManyNames: matches below the top level past the bound
// fail New, with nothing started.
func TestNewRefusesTooManyNames(t *testing.T) {
	ws := t.TempDir()
	for i := range MaxNameMounts + 1 {
		tree(t, ws, fmt.Sprintf("sub/.env.%d", i))
	}
	before := spawn.Default().Spawned()
	sb, err := New(DefaultPolicy(ws))
	var le *MaskLimitError
	if sb != nil || !errors.As(err, &le) || le.Count != MaxNameMounts+1 {
		t.Fatalf("New = %v, %v; want a MaskLimitError", sb, err)
	}
	if n := spawn.Default().Spawned() - before; n != 0 {
		t.Errorf("%d inits requested", n)
	}
	p := DefaultPolicy(ws)
	p.NoDefaultDeny = true
	if sb, err := New(p); err != nil {
		t.Errorf("NoDefaultDeny: %v", err)
	} else {
		sb.Close()
	}
}

// TestCommandRefusedTooManyNames: top-level matches made after New past
// the bound refuse the command, pooled or not, before an init is asked
// for; removing them makes commands run again.
func TestCommandRefusedTooManyNames(t *testing.T) {
	for _, prewarm := range []int{0, 1} {
		t.Run(fmt.Sprint("prewarm ", prewarm), func(t *testing.T) {
			p := DefaultPolicy(t.TempDir())
			p.Prewarm = prewarm
			sb, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			ws := sb.Policy().Workspace
			if err := sb.Command(context.Background(), "true").Run(); err != nil {
				t.Fatal(err)
			}
			for i := range MaxNameMounts + 1 {
				tree(t, ws, fmt.Sprintf(".env.%d", i))
			}
			if prewarm > 0 {
				time.Sleep(200 * time.Millisecond) // let the pool try to refill
			}
			before := spawn.Default().Spawned()
			c := sb.Command(context.Background(), "true")
			err = c.Run()
			var le *MaskLimitError
			if !errors.As(err, &le) || le.Count != MaxNameMounts+1 {
				t.Fatalf("Run = %v, want a MaskLimitError", err)
			}
			if prewarm == 0 && spawn.Default().Spawned() != before {
				t.Errorf("an init was requested for a refused command")
			}
			if err := os.Remove(filepath.Join(ws, ".env.0")); err != nil {
				t.Fatal(err)
			}
			if err := sb.Command(context.Background(), "true").Run(); err != nil {
				t.Errorf("at the bound: %v", err)
			}
		})
	}
}

// TestMaskTargetOfLinks: a matching symlink masks its target only inside a
// writable tree. A target outside is readable at its own path anyway, and
// masking it would let a command take a host file (its shell) from every
// later command by planting `.env -> /bin/sh`.
func TestMaskTargetOfLinks(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ws, ".env.production"), []byte("S=1"), 0o600))
	must(os.WriteFile(filepath.Join(outside, "tool"), []byte("#!/bin/sh"), 0o755))
	must(os.Symlink(".env.production", filepath.Join(ws, ".env")))
	must(os.Symlink(filepath.Join(outside, "tool"), filepath.Join(ws, ".env.local")))
	must(os.Symlink("/", filepath.Join(ws, "id_rsa")))
	got := map[string][]string{}
	ents, err := os.ReadDir(ws)
	must(err)
	for _, e := range ents {
		got[e.Name()] = maskTarget(filepath.Join(ws, e.Name()), e, []string{ws})
	}
	if want := []string{filepath.Join(ws, ".env.production")}; !slices.Equal(got[".env"], want) {
		t.Errorf(".env -> .env.production: masks %q, want %q", got[".env"], want)
	}
	if got[".env.local"] != nil {
		t.Errorf(".env.local -> a host file outside: masks %q, want nothing", got[".env.local"])
	}
	if got["id_rsa"] != nil {
		t.Errorf("id_rsa -> /: masks %q, want nothing", got["id_rsa"])
	}
}

// TestNameSetMatchesMatchName: the compiled deny names the watch uses
// decide every name as matchName does.
func TestNameSetMatchesMatchName(t *testing.T) {
	names := append(DefaultDenyNames(), "*.key", "secret?", "[ab]c", `lit\*`, "plain")
	set := compileNames(names)
	for _, name := range []string{".env", ".env.local", ".envrc", "env", ".ssh", "id_rsa", "id_rsa.pub",
		"x.key", ".key", "key", "secret1", "secret", "ac", "bc", "cc", "lit*", `lit\*`, "plain", "plainer", ""} {
		if got, want := set.match(name), matchName(names, name); got != want {
			t.Errorf("%q: compiled %v, matchName %v", name, got, want)
		}
	}
}
