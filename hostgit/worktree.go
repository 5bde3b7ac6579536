package hostgit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
)

// Worktree is a linked worktree of a repository on the host, made by
// AddWorktree for a sandbox's workspace: the command works on its own
// branch, in its own directory, and what it commits lands in the
// repository, where the host sees it at once (git log BRANCH).
//
// Apply makes it the Policy's workspace and makes writable exactly what
// git needs to add, commit and stash there: the repository's object
// store, refs and logs (the branch moves; stash writes refs/stash and its
// reflog) and the worktree's own git directory, CommonDir/worktrees/<id>
// (its HEAD, index and logs). Everything else of the repository stays
// read-only as the rest of the host: its config, hooks, info, modules,
// packed-refs, the other worktrees' git directories and the main working
// tree. In the worktree's own git directory, as in any git directory a
// command may write (see Policy.AllowGitWrite), what git reads as
// configuration or follows to another directory stays read-only: above
// all commondir, which names the repository whose config the host's next
// git run reads, and gitdir. Each writable part is a mount point, which
// cannot be renamed away or replaced.
//
// What needs the repository's own directory writable fails: deleting a
// ref (git branch -d, git tag -d; git stash drop and pop of the last
// entry print "Unable to create .../packed-refs.lock" and leave
// refs/stash behind, with an empty reflog, which git stash list shows as
// no entries), git gc, git pack-refs, git maintenance, and adding a
// worktree or a submodule.
type Worktree struct {
	// Dir is the worktree: the workspace.
	Dir string
	// Branch is the branch checked out in it.
	Branch string
	// GitDir is the worktree's own git directory, in CommonDir's
	// worktrees; CommonDir is the repository's git directory.
	GitDir, CommonDir string
}

// worktreeParts are the parts of the common git directory a worktree's
// commands write to: exactly what runtime's rule for writable trees in a
// git directory allows a worktree workspace (TestAddWorktree has New
// accept the policy Apply makes).
var worktreeParts = []string{"objects", "refs", "logs"}

// AddWorktree adds a linked worktree of the repository at repo (any
// directory in it) with the host's git, on branch: an existing branch is
// checked out as it is (the work of an earlier run goes on); a missing one
// is made from the repository's HEAD; "" is a new branch hutch/<random>.
// The worktree is a new directory in parent, which the caller chooses
// (hutch run: the data directory's worktrees): a worktree holds what the
// command did not commit and the host's git keeps track of it, so it
// belongs where state is kept, not in /tmp, which is emptied at boot
// (and inside a sandbox is a private one).
//
// git runs as Command runs it (but for worktree add, with the
// configuration read by git itself): the repository's own configuration and
// hooks (post-checkout runs on worktree add) may have been planted by an
// earlier sandboxed command, and none of it runs. A repo that is not a git
// repository, a branch that is not a valid branch name or one checked out
// in another worktree are refused with a *runtime.PolicyError for "Worktree".
func AddWorktree(ctx context.Context, repo, branch, parent string) (*Worktree, error) {
	if parent == "" {
		return nil, &runtime.PolicyError{Field: "AddWorktree parent", Reason: "empty: the directory to make the worktree in"}
	}
	refuse := func(value, reason string) error {
		return &runtime.PolicyError{Field: "Worktree", Value: value, Reason: reason}
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return nil, refuse(repo, err.Error())
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, refuse(repo, "no such directory")
	} else if !fi.IsDir() {
		return nil, refuse(repo, "not a directory")
	}
	// Not held: held, the common directory is the held copy.
	out, err := hostGitUnheld(ctx, abs, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, refuse(repo, "not a git repository ("+err.Error()+")")
	}
	common, err := filepath.EvalSymlinks(out)
	if err != nil {
		return nil, refuse(repo, err.Error())
	}
	if branch == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		branch = "hutch/" + hex.EncodeToString(b)
	}
	if _, err := hostGit(ctx, abs, "check-ref-format", "--branch", branch); err != nil {
		return nil, refuse(branch, "not a valid branch name")
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, refuse(repo, "no directory for worktrees: "+err.Error())
	}
	dir, err := os.MkdirTemp(parent, filepath.Base(filepath.Dir(common))+"-")
	if err != nil {
		return nil, refuse(repo, "no directory for the worktree: "+err.Error())
	}
	add := []string{"worktree", "add", "--quiet", dir, branch}
	if _, err := hostGit(ctx, abs, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		add = []string{"worktree", "add", "--quiet", "-b", branch, dir}
	}
	// Not held (see gitCommand): the worktree names the common directory
	// git was given.
	if _, err := hostGitUnheld(ctx, abs, add...); err != nil {
		os.Remove(dir)
		return nil, refuse(branch, err.Error())
	}
	if out, err = hostGit(ctx, dir, "rev-parse", "--path-format=absolute", "--git-dir"); err != nil {
		return nil, fmt.Errorf("hutch: worktree %s: %w", dir, err)
	}
	gitDir, err := filepath.EvalSymlinks(out)
	if err != nil {
		return nil, fmt.Errorf("hutch: worktree %s: %w", dir, err)
	}
	// git makes logs when it first writes a reflog; a missing one could
	// not be made through the read-only common directory.
	if err := os.MkdirAll(filepath.Join(common, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("hutch: worktree %s: %w", dir, err)
	}
	return &Worktree{Dir: dir, Branch: branch, GitDir: gitDir, CommonDir: common}, nil
}

// Apply makes w p's workspace, and what git writes in the repository
// writable (see Worktree); call it when p's other writable trees are set.
// One of them that holds CommonDir would make the whole repository
// writable, hooks and config included: it is refused with a *runtime.PolicyError
// naming it.
func (w *Worktree) Apply(p *runtime.Policy) error {
	for i, t := range p.Writable {
		abs, err := filepath.Abs(t)
		if err != nil {
			continue // New refuses it
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if mounts.Within(w.CommonDir, abs) {
			return &runtime.PolicyError{Field: fmt.Sprintf("Writable[%d]", i), Value: t, Reason: "holds the repository of the worktree workspace (" + w.CommonDir + "): its hooks and config would be writable"}
		}
	}
	p.Workspace = w.Dir
	for _, n := range worktreeParts {
		p.Writable = append(p.Writable, filepath.Join(w.CommonDir, n))
	}
	p.Writable = append(p.Writable, w.GitDir)
	return nil
}

// hostGit runs the host's git in dir as Command makes it, and returns
// its output trimmed, or an error with what it said.
func hostGit(ctx context.Context, dir string, args ...string) (string, error) {
	return runHostGit(ctx, dir, true, args...)
}

// hostGitUnheld is hostGit with the configuration read by git from the
// repository's own file.
func hostGitUnheld(ctx context.Context, dir string, args ...string) (string, error) {
	return runHostGit(ctx, dir, false, args...)
}

func runHostGit(ctx context.Context, dir string, hold bool, args ...string) (string, error) {
	ctx, cancel := context.WithCancel(ctx) // removes the held copy
	defer cancel()
	cmd, err := gitCommand(ctx, dir, hold, args...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if msg := strings.TrimSpace(stderr.String()); msg != "" && errors.As(err, &ee) {
			return "", errors.New(strings.TrimPrefix(msg, "fatal: "))
		}
		return "", err
	}
	return strings.TrimSpace(stdout.String()), nil
}
