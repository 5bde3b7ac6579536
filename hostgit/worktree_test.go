package hostgit

import (
	"errors"
	"github.com/hutchbox/hutch/runtime"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitRepoWithCommit makes a repository with one commit on main in a new
// directory, with the host's git.
func gitRepoWithCommit(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", args, err, out)
		}
	}
	return repo
}

// TestAddWorktree: a worktree is made in parent on a new branch, its git
// directory in the repository's worktrees; an existing branch is checked
// out as it is; Apply makes exactly the worktree's parts writable.
func TestAddWorktree(t *testing.T) {
	repo := gitRepoWithCommit(t)
	parent := t.TempDir()
	ctx := t.Context()
	w, err := AddWorktree(ctx, repo, "", parent)
	if err != nil {
		t.Fatal(err)
	}
	common, _ := filepath.EvalSymlinks(filepath.Join(repo, ".git"))
	if filepath.Dir(w.Dir) != parent || !strings.HasPrefix(w.Branch, "hutch/") || w.CommonDir != common || filepath.Dir(w.GitDir) != filepath.Join(common, "worktrees") {
		t.Errorf("worktree %+v; want one in %s on hutch/..., git directory in %s/worktrees", w, parent, common)
	}
	if b, err := hostGit(ctx, w.Dir, "branch", "--show-current"); err != nil || b != w.Branch {
		t.Errorf("checked out %q (%v); want %s", b, err, w.Branch)
	}

	p := runtime.DefaultPolicy("")
	p.Writable = []string{t.TempDir()}
	if err := w.Apply(&p); err != nil {
		t.Fatal(err)
	}
	// The git rule of runtime allows the parts Apply makes writable:
	// the two lists of them agree.
	if _, err := runtime.Check(p); err != nil {
		t.Errorf("Check of the policy Apply made: %v", err)
	}
	want := []string{p.Writable[0], filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs"), w.GitDir}
	if p.Workspace != w.Dir || !slices.Equal(p.Writable, want) {
		t.Errorf("Apply: workspace %s, writable %q; want %s, %q", p.Workspace, p.Writable, w.Dir, want)
	}

	// The branch exists now (and has a commit of its own): a second
	// worktree on it is refused, as git refuses a branch checked out
	// elsewhere; once the first is gone it is checked out as it is.
	if _, err := hostGit(ctx, w.Dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "mine"); err != nil {
		t.Fatal(err)
	}
	head, _ := hostGit(ctx, repo, "rev-parse", w.Branch)
	var pe *runtime.PolicyError
	if _, err := AddWorktree(ctx, repo, w.Branch, parent); !errors.As(err, &pe) || pe.Field != "Worktree" {
		t.Errorf("a branch checked out in another worktree: %v; want a PolicyError for Worktree", err)
	}
	if _, err := hostGit(ctx, repo, "worktree", "remove", "--force", w.Dir); err != nil {
		t.Fatal(err)
	}
	w2, err := AddWorktree(ctx, repo, w.Branch, parent)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := hostGit(ctx, w2.Dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("existing branch: HEAD %s; want %s, the branch as it was", got, head)
	}
}

// TestAddWorktreeRefused: what AddWorktree and Apply refuse, each a
// PolicyError naming the field, the value and why.
func TestAddWorktreeRefused(t *testing.T) {
	repo := gitRepoWithCommit(t)
	ctx := t.Context()
	plain := t.TempDir()
	file := filepath.Join(plain, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		repo, branch, value, reason string
	}{
		{plain, "", plain, "not a git repository"},
		{file, "", file, "not a directory"},
		{filepath.Join(plain, "missing"), "", filepath.Join(plain, "missing"), "no such directory"},
		{repo, "-x", "-x", "not a valid branch name"},
		{repo, "a..b", "a..b", "not a valid branch name"},
	} {
		parent := t.TempDir()
		_, err := AddWorktree(ctx, tt.repo, tt.branch, parent)
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Worktree" || pe.Value != tt.value || !strings.Contains(pe.Reason, tt.reason) {
			t.Errorf("AddWorktree(%q, %q): %v; want a PolicyError for Worktree %q: %s", tt.repo, tt.branch, err, tt.value, tt.reason)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("AddWorktree(%q, %q) left %d entries in its parent", tt.repo, tt.branch, len(ents))
		}
	}

	var noParent *runtime.PolicyError
	if _, err := AddWorktree(ctx, repo, "", ""); !errors.As(err, &noParent) || noParent.Field != "AddWorktree parent" {
		t.Errorf("AddWorktree with no parent: %v; want a PolicyError naming it", err)
	}

	w, err := AddWorktree(ctx, repo, "b", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := runtime.Policy{Writable: []string{t.TempDir(), filepath.Dir(repo)}}
	var pe *runtime.PolicyError
	if err := w.Apply(&p); !errors.As(err, &pe) || pe.Field != "Writable[1]" || p.Workspace != "" {
		t.Errorf("Apply with a writable tree holding the repository: %v, workspace %q; want a PolicyError for Writable[1] and p unchanged", err, p.Workspace)
	}
}
