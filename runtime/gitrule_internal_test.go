//go:build linux

package runtime

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/mounts"
)

// TestNoPolicyWritesAGuard (issue 40, must show 2): for random policies
// assembled from Writable trees, Home, grants (Grant.apply, what a
// command's grant and Narrow build a Sandbox from) and AllowGitWrite, the
// view of every Sandbox New accepts keeps each repository's configuration
// and code (hooks, config, info, ...) read-only, and, without git writes
// asked for, the whole git directory; and masks every deny-named file.
// Whatever assembled the policy, New is the one door: a policy layer
// produces a Policy too.
func TestNoPolicyWritesAGuard(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	out := filepath.Join(base, "out")
	git := func(dir string, args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	for _, d := range []string{ws, out, filepath.Join(ws, "sub"), filepath.Join(ws, "home"), filepath.Join(out, "w")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(ws, "init", "-q")
	git(filepath.Join(ws, "sub"), "init", "-q")
	git(out, "init", "-q", "--bare", "bare.git")
	git(filepath.Join(out, "w"), "init", "-q")
	for _, f := range []string{"ws/.env", "ws/sub/deep/id_rsa", "out/w/.env"} {
		p := filepath.Join(base, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	candidates := []string{
		"sub", "sub/deep", ".git", ".git/hooks", ".git/objects", ".git/refs", "sub/.git", "sub/.git/config",
		out, filepath.Join(out, "w"), filepath.Join(out, "w", ".git"), filepath.Join(out, "w", ".git", "objects"),
		filepath.Join(out, "bare.git"), filepath.Join(out, "bare.git", "hooks"), filepath.Join(out, "bare.git", "objects"),
		ws + "/.git/info", ws + "/sub/.git/hooks",
	}
	pick := func(rng *rand.Rand) []string {
		var out []string
		for k := rng.Intn(3); k > 0; k-- {
			c := candidates[rng.Intn(len(candidates))]
			if !filepath.IsAbs(c) {
				c = filepath.Join(ws, c)
			}
			out = append(out, c)
		}
		return out
	}
	rng := rand.New(rand.NewSource(40))
	accepted, refused := 0, 0
	for i := 0; i < 150; i++ {
		p := DefaultPolicy(ws)
		p.Writable = pick(rng)
		p.AllowGitWrite = rng.Intn(3) == 0
		if rng.Intn(4) == 0 {
			p.Home = filepath.Join(ws, "home")
		}
		if rng.Intn(2) == 0 {
			p = Grant{Writable: pick(rng), GitWrite: rng.Intn(3) == 0}.apply(p)
		}
		sb, err := New(p)
		if err != nil {
			refused++
			continue
		}
		accepted++
		f, err := sb.scanFresh()
		if err != nil {
			sb.Close()
			t.Fatal(err)
		}
		plan := sb.plan(f)
		sb.Close()
		for _, g := range []string{filepath.Join(ws, ".git"), filepath.Join(ws, "sub", ".git"), filepath.Join(out, "bare.git"), filepath.Join(out, "w", ".git")} {
			check := gitCodePaths(g)
			if !sb.policy.AllowGitWrite {
				check = append(check, g, filepath.Join(g, "objects"), filepath.Join(g, "HEAD"))
			}
			for _, c := range check {
				if pl := plan.Lookup(c); pl.Writable && pl.Reach == mounts.OnHost {
					t.Fatalf("policy %d (Writable %v, Home %q, AllowGitWrite %v): %s is writable", i, sb.policy.Writable, sb.policy.Home, sb.policy.AllowGitWrite, c)
				}
			}
		}
		for _, s := range []string{filepath.Join(ws, ".env"), filepath.Join(ws, "sub", "deep", "id_rsa"), filepath.Join(out, "w", ".env")} {
			if writableTree(sb.policy, s) && plan.Lookup(s).Reach != mounts.Masked {
				t.Fatalf("policy %d (Writable %v): %s is not masked", i, sb.policy.Writable, s)
			}
		}
	}
	t.Logf("%d random policies: %d accepted, %d refused", accepted+refused, accepted, refused)
	if accepted < 30 || refused < 30 {
		t.Errorf("a weak sample: %d accepted, %d refused", accepted, refused)
	}
}

// writableTree says whether p lies in one of pol's writable trees.
func writableTree(pol Policy, p string) bool {
	for _, r := range append([]string{pol.Workspace, pol.Home}, pol.Writable...) {
		if r != "" && (p == r || strings.HasPrefix(p, r+"/")) {
			return true
		}
	}
	return false
}
