// Package landlock owns hutch's Landlock layer: the ruleset a sandbox's
// policy implies (which trees are read-only, which writable, which denied,
// which TCP ports may be reached, which scopes are closed), cut down to what
// the running kernel's Landlock ABI can express (Build), as data: the rules
// it lists (Ruleset.Rules) and a ruleset begun on the host with those the
// host can open (Ruleset.Create). The sandbox init, in C, finishes the
// ruleset and enforces it (nsinit's STEP_LL_* steps); Go decides, C
// executes.
//
// Inside the namespaces Landlock is defense in depth: the mount table
// already hides and write-protects what the policy says. Where user
// namespaces are not available (an AppArmor-restricted host) it is the
// filesystem boundary itself.
//
// Landlock only grants: a ruleset says what is handled and what is allowed
// beneath each path; everything handled and not allowed is denied. So a
// denied path inside a read-only tree is expressed by granting its
// siblings, down the path to it (see Spec.Deny), and a denied path inside a
// writable tree cannot be expressed without making new files there
// unusable: Restrict reports such paths as not enforced.
//
// Enforcement is per thread: the init restricts the thread that forks
// the command, which inherits the thread's domain; nothing of the host
// process is ever restricted.
package landlock
