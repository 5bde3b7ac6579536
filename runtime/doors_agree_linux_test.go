//go:build linux

package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/darwin"
	"github.com/hutchbox/hutch/mounts"
)

// verdict is what a door lets a command or the caller do with a path.
type verdict string

const (
	writable verdict = "writable"
	readOnly verdict = "read-only"
	masked   verdict = "masked"
)

// agreeTree is the host tree TestDoorsAgree's policies are drawn over:
// the workspace, a second tree that may be writable, and one outside
// both. Every probe is a file holding a token of its own.
type agreeTree struct {
	ws, extra, outside string
	probes             []string
}

func newAgreeTree(t *testing.T) agreeTree {
	t.Helper()
	// Not under /tmp: the sandbox's /tmp is its own, and a tree there
	// outside the workspace would be out of view, not read-only.
	base, err := os.MkdirTemp("/var/tmp", "hutch-agree-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	tr := agreeTree{ws: filepath.Join(base, "ws"), extra: filepath.Join(base, "extra"), outside: filepath.Join(base, "outside")}
	files := []string{
		"ws/a.txt", "ws/.env", "ws/sub/b.txt", "ws/sub/.env.local", "ws/keys/k.pem", "ws/secret/s.txt",
		"ws/ro/r.txt", "ws/ro/deeper/d.txt", "ws/.git/config", "ws/.git/hooks/pre-commit", "ws/.git/HEAD",
		"extra/e.txt", "extra/priv/p.txt", "extra/x.pem",
		"outside/o.txt", "outside/b.txt",
	}
	for _, f := range files {
		p := filepath.Join(base, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(token(p)+"\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o666)
		tr.probes = append(tr.probes, p)
	}
	return tr
}

// token is the content that proves a read of p reached p.
func token(p string) string { return "TOKEN-" + strings.ReplaceAll(p, "/", "_") }

// randomPolicy draws a policy over tr: which trees are writable, which
// paths denied, read-only or masked by name, and whether git may write.
func randomPolicy(rnd *rand.Rand, tr agreeTree) Policy {
	p := DefaultPolicy(tr.ws)
	p.OutputLimit = Unlimited
	some := func(from ...string) []string {
		var out []string
		for _, s := range from {
			if rnd.IntN(2) == 0 {
				out = append(out, s)
			}
		}
		return out
	}
	if rnd.IntN(2) == 0 {
		p.Writable = []string{tr.extra}
	}
	p.Deny = some(filepath.Join(tr.ws, "secret"), filepath.Join(tr.extra, "priv"), filepath.Join(tr.outside, "o.txt"), "sub/b.txt")
	p.ReadOnly = some("ro", filepath.Join(tr.ws, "ro/deeper"))
	p.DenyNames = some("*.pem", "b.txt", "deeper")
	p.NoDefaultDeny = rnd.IntN(4) == 0
	p.AllowGitWrite = rnd.IntN(2) == 0
	return p
}

// planVerdict is what a mount plan makes of p.
func planVerdict(plan mounts.Plan, p string) verdict {
	pl := plan.Lookup(p)
	switch {
	case pl.Reach == mounts.Masked:
		return masked
	case pl.Writable:
		return writable
	}
	return readOnly
}

// seatbeltVerdict is what the Seatbelt profile of dp makes of p, by the
// rules darwin.Policy documents (its SBPL cannot run on this host): a
// denied path, or one below a deny name in the writable trees, is masked;
// the writable trees are writable but for ReadOnly; the rest read-only.
func seatbeltVerdict(dp darwin.Policy, p string) verdict {
	for _, d := range dp.Deny {
		if mounts.Within(p, d) {
			return masked
		}
	}
	trees := append([]string{dp.Workspace}, dp.Writable...)
	in := false
	for _, tree := range trees {
		if !mounts.Within(p, tree) {
			continue
		}
		in = true
		rel, _ := filepath.Rel(tree, p)
		for _, part := range strings.Split(rel, "/") {
			if part == ".git" {
				break // names are not masked in a git directory
			}
			for _, n := range dp.DenyNames {
				if ok, _ := path.Match(n, part); ok {
					return masked
				}
			}
		}
	}
	if !in {
		return readOnly
	}
	for _, ro := range dp.ReadOnly {
		if mounts.Within(p, ro) {
			return readOnly
		}
	}
	return writable
}

// TestDoorsAgree (issue 42): for random policies, every door decides
// from the one resolution: the plan a command gets, the OCI export's,
// and the Seatbelt policy give each path the same verdict, and the kernel
// enforces it through both doors that run here, as seen from the host:
// a command appends to every path and reads every one, the file door
// does the same, and the host finds its files changed exactly where the
// verdict is "writable", and a path's token in what was read exactly
// where it is not "masked".
func TestDoorsAgree(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 3
	}
	home, _ := os.UserHomeDir()
	seed := uint64(os.Getpid())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 42))
	for round := range rounds {
		tr := newAgreeTree(t)
		p := randomPolicy(rnd, tr)
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			desc := fmt.Sprintf("Writable %v Deny %v ReadOnly %v DenyNames %v NoDefaultDeny %v AllowGitWrite %v",
				p.Writable, p.Deny, p.ReadOnly, p.DenyNames, p.NoDefaultDeny, p.AllowGitWrite)
			want := doorVerdicts(t, p, tr, home)
			count := map[verdict]int{}
			for _, v := range want {
				count[v]++
			}
			t.Logf("%v: %s", count, desc)
			sb, err := New(p)
			if err != nil {
				t.Fatalf("New(%s): %v", desc, err)
			}
			defer sb.Close()
			for door, got := range map[string]map[string]verdict{
				"command":   commandVerdicts(t, sb, tr),
				"file door": fileDoorVerdicts(t, sb, tr),
			} {
				for _, f := range tr.probes {
					if got[f] != want[f] {
						t.Errorf("%s: %s is %s, the plan says %s (%s)", door, f, got[f], want[f], desc)
					}
				}
			}
		})
	}
}

// doorVerdicts is every probe's verdict by the plan a command of p gets,
// after checking that the OCI export's plan and the Seatbelt policy give
// the same.
func doorVerdicts(t *testing.T, p Policy, tr agreeTree, home string) map[string]verdict {
	t.Helper()
	sb, err := decide(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.closeTrees()
	f, err := sb.readFresh()
	if err != nil {
		t.Fatal(err)
	}
	plan := sb.plan(f)
	// The OCI form compiles the Resolved Check gives for an OCI runtime.
	forOCI := p
	forOCI.Backend = BackendOCI
	res, err := Check(forOCI)
	if err != nil {
		t.Fatal(err)
	}
	view, err := ociView(res)
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolvePolicy(p, darwinRules(home))
	if err != nil {
		t.Fatal(err)
	}
	dp, _ := seatbeltPolicy(r)
	want := map[string]verdict{}
	for _, f := range tr.probes {
		v := planVerdict(plan, f)
		if o := planVerdict(view.Mounts, f); o != v {
			t.Errorf("OCI export: %s is %s, a command's plan says %s", f, o, v)
		}
		if s := seatbeltVerdict(dp, f); s != v {
			t.Errorf("Seatbelt: %s is %s, a command's plan says %s", f, s, v)
		}
		want[f] = v
	}
	return want
}

// commandVerdicts runs one command that appends a line to every probe and
// prints every probe, and judges each from the host: changed on the host
// is writable, its token in the output readable.
func commandVerdicts(t *testing.T, sb *Sandbox, tr agreeTree) map[string]verdict {
	t.Helper()
	before := contents(t, tr.probes)
	script := `for f; do echo appended 2>/dev/null >>"$f"; cat "$f" 2>/dev/null; done; true`
	cmd := sb.Command(context.Background(), "sh", append([]string{"-c", script, "sh"}, tr.probes...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	return judge(t, tr.probes, before, string(out))
}

// fileDoorVerdicts does through the file door what commandVerdicts does
// through a command.
func fileDoorVerdicts(t *testing.T, sb *Sandbox, tr agreeTree) map[string]verdict {
	t.Helper()
	before := contents(t, tr.probes)
	var read strings.Builder
	for _, f := range tr.probes {
		sb.WriteFile(f, []byte("appended\n"), WriteOptions{Append: true})
		if c, err := sb.ReadFile(f, ReadOptions{}); err == nil {
			read.Write(c.Data)
		}
	}
	return judge(t, tr.probes, before, read.String())
}

func contents(t *testing.T, files []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[f] = string(b)
	}
	return m
}

// judge gives each probe its verdict from the host's side: written is
// writable; else its token read is read-only; else masked. A probe
// written but unread would be a verdict of its own, and is reported.
func judge(t *testing.T, files []string, before map[string]string, read string) map[string]verdict {
	t.Helper()
	after := contents(t, files)
	got := map[string]verdict{}
	for _, f := range files {
		changed, seen := after[f] != before[f], strings.Contains(read, token(f))
		switch {
		case changed && !seen:
			t.Errorf("%s was written but not read", f)
		case changed:
			got[f] = writable
		case seen:
			got[f] = readOnly
		default:
			got[f] = masked
		}
	}
	return got
}
