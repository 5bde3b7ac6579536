package runtime

// Sandbox is a decided Policy made ready to run commands: the policy in
// effect (what Check's Resolved holds) and this platform's machinery. On
// Linux that is what was learned of the host (the level, the view, the
// compiled filters and Landlock ruleset) and what was started for the
// commands (the spawn server's spare init, the pool, the cgroups, the
// file door's server); on macOS, the Seatbelt profile and a private
// temporary directory. Commands and file operations on it compile that
// one decision. It is safe for concurrent use by many goroutines.
type Sandbox struct {
	policy Policy
	machine
}
