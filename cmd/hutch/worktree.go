package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchbox/hutch/hostgit"
)

// addWorktree makes the worktree --worktree asks for, in the data
// directory's worktrees (kept with the records: a worktree holds what
// the command did not commit), makes it f's workspace and says on stderr
// where it is: the user has to find it whatever happens next.
func addWorktree(ctx context.Context, f *runFlags) (*hostgit.Worktree, error) {
	if f.workspace != "" {
		return nil, &flagErr{"--worktree", f.worktree, "and --workspace: the worktree is the workspace; give one of them"}
	}
	// A branch name holds no colon; a path may.
	repo, branch := f.worktree, ""
	if i := strings.LastIndexByte(repo, ':'); i >= 0 {
		repo, branch = repo[:i], repo[i+1:]
	}
	data, err := processDataDir("")
	if err != nil {
		return nil, &flagErr{"--worktree", f.worktree, err.Error()}
	}
	wt, err := hostgit.AddWorktree(ctx, repo, branch, filepath.Join(data, "worktrees"))
	if err != nil {
		return nil, f.flagError(err)
	}
	fmt.Fprintf(os.Stderr, "hutch: worktree %s on branch %s\n", wt.Dir, wt.Branch)
	f.workspace = wt.Dir
	return wt, nil
}
