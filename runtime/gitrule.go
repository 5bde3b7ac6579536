package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
)

// The one rule for git directories and writable trees. A repository's git
// directory holds what the host's git runs (hooks, the config's programs),
// so a writable tree that is one, or lies in one, would let a command
// plant code the host runs at its next git command, whatever guard the
// repository around it gets. Every writable tree passes this rule, wherever
// it comes from: Policy.Writable, Home, a grant's write:, a policy layer,
// the workspace itself. Two kinds of writable tree may lie in a git
// directory:
//   - the parts a worktree workspace commits to (hostgit.Worktree.Apply): its own
//     git directory and its repository's objects, refs and logs;
//   - with AllowGitWrite, a part of a git directory that neither is nor
//     holds nor lies in what git reads as configuration or runs as code
//     (gitCodePaths): what @git-write itself makes writable.

// gitDirOf is the git directory p (absolute, clean) is or lies in: the
// nearest of p and its ancestors named .git, or laid out as a bare
// repository (HEAD, objects, refs); "" when none is.
func gitDirOf(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if filepath.Base(d) == ".git" || isBareGitDir(d) {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// isBareGitDir says whether d is laid out as a git directory: a HEAD file
// beside objects and refs directories.
func isBareGitDir(d string) bool {
	fi, err := os.Stat(filepath.Join(d, "HEAD"))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	for _, n := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(d, n)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// worktreeParts are the parts of the common git directory a linked
// worktree's commands write to: hostgit.Worktree.Apply makes them
// writable, and the rule above allows exactly these.
var worktreeParts = []string{"objects", "refs", "logs"}

// worktreeWritable are the writable trees a linked worktree at ws commits
// to (see hostgit.Worktree), read from its .git file: none when ws is not one.
func worktreeWritable(ws string) []string {
	gitDir := readGitPath(filepath.Join(ws, ".git"), "gitdir: ")
	if gitDir == "" {
		return nil
	}
	common := readGitPath(filepath.Join(gitDir, "commondir"), "")
	if common == "" {
		return nil
	}
	out := []string{resolve(gitDir, "/")}
	for _, n := range worktreeParts {
		out = append(out, resolve(filepath.Join(common, n), "/"))
	}
	return out
}

// checkGitTree refuses the writable tree given (field names it; lex made
// absolute and clean, res resolved) when it is or lies in a git directory,
// but for what the rule above allows; ws is the workspace, "" when the
// tree is the workspace itself.
func checkGitTree(field, given, lex, res, ws string, allowGitWrite bool) error {
	for _, p := range []string{lex, res} {
		g := gitDirOf(p)
		if g == "" {
			continue
		}
		if ws != "" && slices.Contains(worktreeWritable(ws), res) {
			return nil
		}
		refuse := &PolicyError{Field: field, Value: given, Reason: "lies in the git directory " + g + ": the host's git runs what a command plants there (hooks, config)"}
		if p == g || !allowGitWrite {
			if allowGitWrite {
				refuse.Reason = "is the git directory " + g + ", whose hooks and config would be writable; AllowGitWrite makes the rest of it writable already"
			} else {
				refuse.Reason += "; to let commands commit, use AllowGitWrite (--allow-git-write, the @git-write grant)"
			}
			return refuse
		}
		for _, code := range gitCodePaths(g) {
			if mounts.Within(p, code) || mounts.Within(code, p) {
				refuse.Reason = "is or holds " + strings.TrimPrefix(code, g+"/") + " of the git directory " + g + ", what the host's git reads as configuration or runs as code"
				return refuse
			}
		}
	}
	return nil
}
