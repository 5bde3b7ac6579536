package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Resolved is what Check decided for a Policy: the policy in effect, its
// paths resolved and its defaults filled in, and the level its commands
// would run at. It holds nothing open and changes nothing; a Sandbox made
// by New from the same Policy on the same host decides the same.
//
// It is immutable, and its JSON form (MarshalJSON) is versioned: a
// decision taken by one process is carried whole to another (a durable
// process's supervisor runs the Resolved its manager checked, through
// NewResolved), and a reader of another version refuses it rather than
// run a part of it.
type Resolved struct {
	policy       Policy
	level        Level
	levelReasons []string
	workspace    string
	writable     []string
	// explain is the view Check decided, which Explain answers from; nil
	// for a Resolved read from JSON.
	explain *explainer
}

// ResolvedFormat is the version of Resolved's JSON form that this build
// writes and reads: a form of another version, or with a field this build
// does not know, is refused.
const ResolvedFormat = 1

// resolvedJSON is Resolved's JSON form.
type resolvedJSON struct {
	Format int    `json:"format"`
	Policy Policy `json:"policy"`
	Level  Level  `json:"level"`
	// LevelReasons say why no stronger level is reachable here.
	LevelReasons []string `json:"level_reasons,omitempty"`
	// Workspace and Writable are the trees commands may write and
	// start in, resolved (Cmd.Dir is judged against them).
	Workspace string   `json:"workspace"`
	Writable  []string `json:"writable,omitempty"`
}

// Policy returns the policy in effect, as Sandbox.Policy would.
func (r *Resolved) Policy() Policy { return r.policy.clone() }

// Level returns the isolation level commands would run at.
func (r *Resolved) Level() Level { return r.level }

// LevelReasons say why commands would not run at a stronger level than
// Level: what this host lacks, or what the policy chose.
func (r *Resolved) LevelReasons() []string { return slices.Clone(r.levelReasons) }

// WorkDir resolves dir as Sandbox.WorkDir would: the working directory a
// command given Cmd.Dir dir would start in, or a *PolicyError.
func (r *Resolved) WorkDir(dir string) (string, error) {
	return workDir(dir, r.workspace, r.writable)
}

// MarshalJSON writes r with its format's version (ResolvedFormat).
func (r *Resolved) MarshalJSON() ([]byte, error) {
	return json.Marshal(resolvedJSON{Format: ResolvedFormat, Policy: r.policy, Level: r.level, LevelReasons: r.levelReasons, Workspace: r.workspace, Writable: r.writable})
}

// UnmarshalJSON reads what MarshalJSON wrote, refusing another format's
// version and any field this build does not know.
func (r *Resolved) UnmarshalJSON(b []byte) error {
	var v resolvedJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("hutch: a resolved policy this build cannot read whole: %w", err)
	}
	if v.Format != ResolvedFormat {
		return fmt.Errorf("hutch: a resolved policy of format %d; this build reads format %d only", v.Format, ResolvedFormat)
	}
	*r = Resolved{policy: v.Policy.clone(), level: v.Level, levelReasons: slices.Clone(v.LevelReasons), workspace: v.Workspace, writable: slices.Clone(v.Writable)}
	return nil
}
