package runtime

// Resolved is what Check decided for a Policy: the policy in effect, its
// paths resolved and its defaults filled in, and the level its commands
// would run at. It holds nothing open and changes nothing; a Sandbox made
// by New from the same Policy on the same host decides the same.
type Resolved struct {
	policy    Policy
	level     Level
	workspace string
	writable  []string
}

// Policy returns the policy in effect, as Sandbox.Policy would.
func (r *Resolved) Policy() Policy { return r.policy.clone() }

// Level returns the isolation level commands would run at.
func (r *Resolved) Level() Level { return r.level }

// WorkDir resolves dir as Sandbox.WorkDir would: the working directory a
// command given Cmd.Dir dir would start in, or a *PolicyError.
func (r *Resolved) WorkDir(dir string) (string, error) {
	return workDir(dir, r.workspace, r.writable)
}
