// Package hostgit owns the host's git in trees a sandbox wrote to: Command
// runs the host's git in a workspace with nothing a sandboxed command
// planted in its repositories able to run on the host (hooks, filters,
// fsmonitor, pagers, includes, a redirected commondir), and AddWorktree
// makes a linked worktree for an agent's branch, whose Worktree.Apply
// turns a runtime.Policy into one for that worktree: writable where its
// commits go, the repository's hooks and config out of reach.
//
// What a command may do to a repository inside the sandbox is runtime's
// decision (Policy.AllowGitWrite, the git guards in every mount plan);
// this package is what runs on the host afterwards, as the user, and
// trusts nothing in the repository it was given.
package hostgit
