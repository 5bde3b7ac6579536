// Package approvals owns the decisions taken before a tool call runs:
// per tool a default (ALLOW, PROMPT or DENY) with a danger level, an
// approval hook for PROMPT, and the approvals a user chose to remember,
// kept in SQLite (table remembered_permissions) with a scope (agent,
// tool, argument pattern, workspace) and an expiry, listable and
// revocable.
//
// It is a layer of consent and convenience in front of the sandbox, not
// a boundary: a pattern on a command line never bounds a model that can
// write a script. What a command can do is what its runtime.Policy lets
// the kernel enforce, whatever was decided here.
package approvals
