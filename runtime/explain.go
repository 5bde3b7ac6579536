package runtime

import (
	"fmt"
)

// Explaining a path: Sandbox.Explain and Resolved.Explain answer which
// rule decides a path for an access, in words an agent's model reads, and
// how the caller could allow it where a policy can. They answer from the
// decision itself (the view the mounts build, mounts.Plan.Lookup, and
// where each of its masks and read-only paths came from), never by trying
// the access: the kernel enforces the same plan, which the tests check
// from the host. The Rule names are the vocabulary a command's denials
// are reported in.

// Access is what a command would do to a path.
type Access string

const (
	// AccessRead reads a file or lists a directory.
	AccessRead Access = "read"
	// AccessWrite creates, changes, renames or removes it.
	AccessWrite Access = "write"
	// AccessExecute runs it as a program: a read, on a mount that is not
	// noexec (the sandbox's /dev and /proc, a masked or hidden path are).
	AccessExecute Access = "execute"
)

// ParseAccess reads "read", "write" or "execute"; anything else is an
// error saying what is taken.
func ParseAccess(s string) (Access, error) {
	switch a := Access(s); a {
	case AccessRead, AccessWrite, AccessExecute:
		return a, nil
	}
	return "", fmt.Errorf("%q is not an access: read, write or execute", s)
}

// Rule is the kind of rule that decides a path, one word each, stable in
// JSON.
type Rule string

const (
	// RuleDefaultDeny: masked by the default deny-list (DefaultDeny).
	RuleDefaultDeny Rule = "default-deny"
	// RuleDeny: masked by the policy's own deny-list (Policy.Deny).
	RuleDeny Rule = "deny"
	// RuleDenyName: masked because its name matches a deny name in a
	// writable tree (DefaultDenyNames, Policy.DenyNames).
	RuleDenyName Rule = "deny-name"
	// RuleHiddenSockets: in a directory of the host's sockets (/run),
	// which every view replaces by an empty one.
	RuleHiddenSockets Rule = "hidden-sockets"
	// RuleAppIsolation: hidden by app isolation (Policy.Apps).
	RuleAppIsolation Rule = "app-isolation"
	// RuleGitGuard: a repository's git directory, or its configuration
	// and hooks, kept read-only in a writable tree.
	RuleGitGuard Rule = "git-guard"
	// RuleReadOnly: kept read-only in a writable tree by the policy
	// (Policy.ReadOnly).
	RuleReadOnly Rule = "read-only"
	// RuleOutsideWritable: on the host's read-only tree, outside every
	// writable one.
	RuleOutsideWritable Rule = "outside-writable"
	// RuleReadOnlyTree: a host tree shown read-only (a read-only bind, a
	// listed tree, an app's directory).
	RuleReadOnlyTree Rule = "read-only-tree"
	// RuleNotInView: a listed view does not show it at all.
	RuleNotInView Rule = "not-in-view"
	// RuleImageRoot: the root file system of the caller's (Policy.Root),
	// read-only.
	RuleImageRoot Rule = "image-root"
	// RuleViewRoot: a directory of a listed view's own read-only root, on
	// the way to what it shows.
	RuleViewRoot Rule = "view-root"
	// RulePrivateTmp: the sandbox's own /tmp, new for every command.
	RulePrivateTmp Rule = "private-tmp"
	// RuleKernelTree: /proc, /sys or /dev, the sandbox's own or the host
	// kernel's, never writable as a tree.
	RuleKernelTree Rule = "kernel-tree"
	// RuleWritableTree: in a writable tree (the workspace, Writable, Home,
	// a writable bind).
	RuleWritableTree Rule = "writable-tree"
	// RuleUnsandboxed: the policy runs commands without a sandbox.
	RuleUnsandboxed Rule = "unsandboxed"
)

// Explanation is which rule decides a path for an access.
type Explanation struct {
	// Path is the path as asked; View is it as the command's kernel would
	// reach it: absolute, relative to the workspace, every symlink
	// followed in the sandbox's view.
	Path string `json:"path"`
	View string `json:"view"`
	// HostPath is the host's file the view shows there, if it shows one.
	HostPath string `json:"host_path,omitempty"`
	Access   Access `json:"access"`
	Allowed  bool   `json:"allowed"`
	Rule     Rule   `json:"rule"`
	// Reason says the rule in a sentence, naming the path the rule is
	// on ("~/.aws is masked: default deny-list").
	Reason string `json:"reason"`
	// Allow is how the caller could allow a refused access, when a
	// policy can; nil when it cannot, or when it is allowed.
	Allow *Remedy `json:"allow,omitempty"`
}

// Remedy is what would allow a refused access: a flag of hutch run, the
// key of a policy file, and the permission tag of a grant when the
// Sandbox's Grantable covers it (Cmd.Grant, one command at a time).
type Remedy struct {
	Flag  string `json:"flag,omitempty"`
	Key   string `json:"key,omitempty"`
	Grant string `json:"grant,omitempty"`
}

// String is e in one or two lines: the verdict and the rule, then how to
// allow it.
func (e Explanation) String() string {
	verdict := "allowed"
	if !e.Allowed {
		verdict = "refused"
	}
	s := fmt.Sprintf("%s: %s %s: %s", verdict, e.Access, e.Path, e.Reason)
	if h := e.Allow.how(); h != "" {
		s += "\nto allow it: " + h
	}
	return s
}
