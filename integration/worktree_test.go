//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorktreeWorkspace: hutch run --worktree REPO:BRANCH makes a linked
// worktree and runs in it. git add, commit, log, stash and stash pop work
// there; the commit lands on the branch in the repository; the
// repository's hooks and config, the worktree's commondir and gitdir, by
// absolute path or relative to the worktree, cannot be written, replaced
// or renamed away; all judged on the host.
func TestWorktreeWorkspace(t *testing.T) {
	needGit(t)
	repo := filepath.Join(dir(t, "wt-repo-"), "main")
	hostRepo(t, repo)
	data := dir(t, "wt-data-")
	t.Setenv("HUTCH_DATA_DIR", data)
	git := filepath.Join(repo, ".git")
	protected := []string{"config", "hooks/pre-commit", "HEAD", "packed-refs"}
	before := map[string]string{}
	for _, n := range protected {
		b, _ := os.ReadFile(filepath.Join(git, n))
		before[n] = string(b)
	}

	script := `set -u
g="` + sandboxGit + `"
echo hello > f && $g add f && $g commit -q -m agent && $g log --oneline | grep -q agent && echo LOG-OK
echo more >> f && $g stash -q && $g stash list | grep -q stash && $g stash pop -q && grep -q more f && echo STASH-OK
gd=$(git rev-parse --git-dir); common=$(git rev-parse --git-common-dir)
for p in "$common/hooks/pre-commit" "$common/config" "$common/HEAD" "$common/packed-refs" "$common/commondir" "$common/config.worktree" \
	"$gd/commondir" "$gd/gitdir" "$gd/hooks/post-checkout" "$PWD/.git" \
	"` + git + `/hooks/pre-commit" "` + git + `/config" "$common/worktrees/other/gitdir"; do
	if (echo planted > "$p") 2>/dev/null; then echo "WROTE $p"; fi
done
for p in "$common/hooks" "$common/config" "$gd/commondir" "$gd/gitdir" "$gd" "$common/objects" "$common/refs" "$PWD/.git"; do
	if mv "$p" "$p.away" 2>/dev/null; then echo "RENAMED $p"; fi
done
if rm -f "$gd/commondir" 2>/dev/null && [ ! -e "$gd/commondir" ]; then echo "REMOVED commondir"; fi
# What no mount keeps from being made is reported: a config.worktree in
# the worktree's git directory (read with extensions.worktreeConfig).
echo "[core]" > "$gd/config.worktree"
echo DONE`
	rj := filepath.Join(t.TempDir(), "result.json")
	r := runCLIArgs(t, "run", "--worktree", repo+":agent/work", "--result-json", rj, "--", "sh", "-c", script)
	for _, want := range []string{"LOG-OK", "STASH-OK", "DONE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %s in the sandbox:\n%s", want, r)
		}
	}
	for _, bad := range []string{"WROTE", "RENAMED", "REMOVED"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the sandbox could change what git reads as configuration (%s):\n%s", bad, r)
		}
	}

	var doc struct {
		Worktree     struct{ Path, Branch string }
		Repositories []struct{ Path, Change string }
	}
	b, err := os.ReadFile(rj)
	if err != nil {
		t.Fatal(err)
	}
	must(json.Unmarshal(b, &doc))
	if doc.Worktree.Branch != "agent/work" || filepath.Dir(doc.Worktree.Path) != filepath.Join(data, "worktrees") {
		t.Errorf("--result-json worktree %+v", doc.Worktree)
	}
	if !strings.Contains(r.stderr, "worktree "+doc.Worktree.Path+" on branch agent/work") {
		t.Errorf("stderr does not say the worktree:\n%s", r)
	}
	wtGit := filepath.Join(git, "worktrees", filepath.Base(doc.Worktree.Path))
	if rs := doc.Repositories; len(rs) != 1 || rs[0].Path != filepath.Join(wtGit, "config.worktree") || rs[0].Change != "redirected" {
		t.Errorf("repositories %+v; want %s/config.worktree redirected", rs, wtGit)
	}

	// On the host: the commit is on the branch, and nothing git reads as
	// configuration changed or appeared.
	if out, err := hostGit(t, repo, "log", "--format=%s", "agent/work"); err != nil || !strings.HasPrefix(out, "agent\n") {
		t.Errorf("host git log agent/work: %v\n%s", err, out)
	}
	for _, n := range protected {
		if b, _ := os.ReadFile(filepath.Join(git, n)); string(b) != before[n] {
			t.Errorf("%s changed on the host: %q", n, b)
		}
	}
	for _, p := range []string{filepath.Join(git, "commondir"), filepath.Join(git, "config.worktree"), filepath.Join(git, "worktrees", "other"), filepath.Join(git, "hooks.away")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("planted on the host: %s", p)
		}
	}
	// What the command tried to rename is where it was, by the host's
	// lookup, not by what the command said.
	for _, p := range []string{filepath.Join(git, "hooks"), filepath.Join(git, "config"), filepath.Join(wtGit, "commondir"), filepath.Join(wtGit, "gitdir"),
		wtGit, filepath.Join(git, "objects"), filepath.Join(git, "refs"), filepath.Join(doc.Worktree.Path, ".git")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("host: %s is gone: %v", p, err)
		}
		if _, err := os.Lstat(p + ".away"); err == nil {
			t.Errorf("host: %s was renamed to %s.away", p, p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(wtGit, "commondir")); err != nil || strings.TrimSpace(string(b)) != "../.." {
		t.Errorf("the worktree's commondir: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(wtGit, "gitdir")); err != nil || strings.TrimSpace(string(b)) != filepath.Join(doc.Worktree.Path, ".git") {
		t.Errorf("the worktree's gitdir: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(doc.Worktree.Path, ".git")); err != nil || strings.TrimSpace(string(b)) != "gitdir: "+wtGit {
		t.Errorf("the worktree's .git file: %q, %v", b, err)
	}
	if out, err := hostGit(t, doc.Worktree.Path, "status", "--short"); err != nil || strings.TrimSpace(out) != "M f" {
		t.Errorf("host git status in the worktree: %v\n%s", err, out)
	}
}

// TestWorktreeRefused: --worktree of a directory that is no repository,
// or with --workspace, is refused naming --worktree, and nothing runs.
func TestWorktreeRefused(t *testing.T) {
	needGit(t)
	plain := dir(t, "wt-plain-")
	for _, args := range [][]string{
		{"run", "--worktree", plain, "--", "touch", filepath.Join(plain, "ran")},
		{"run", "--worktree", plain + ":b", "--workspace", plain, "--", "touch", filepath.Join(plain, "ran")},
	} {
		r := runCLIArgs(t, args...)
		if r.code != 125 || !strings.Contains(r.stderr, "--worktree "+plain) {
			t.Errorf("hutch %q: want exit 125 and an error naming --worktree:\n%s", args, r)
		}
	}
	if r := runCLIArgs(t, "run", "--worktree", plain, "--", "true"); !strings.Contains(r.stderr, "not a git repository") {
		t.Errorf("a non-repository: the reason is not said:\n%s", r)
	}
	if _, err := os.Lstat(filepath.Join(plain, "ran")); err == nil {
		t.Errorf("the command ran")
	}
}
