package approvals

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
)

// Grant is a remembered approval (or refusal): it decides the calls of
// Agent to Tool whose argument matches Pattern in Workspace until
// Expires (zero: until revoked).
type Grant struct {
	ID        int64     `json:"id"`
	Agent     string    `json:"agent"`
	Tool      string    `json:"tool"`
	Pattern   string    `json:"pattern"`
	Workspace string    `json:"workspace"`
	Decision  Decision  `json:"decision"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires,omitzero"`
	Revoked   time.Time `json:"revoked,omitzero"`
}

// Store is the remembered grants, kept by a Backend: package grantsdb's
// SQLite database, opened in this process (grantsdb.OpenStore) or by the
// hutch-grants helper that the hutch CLI runs, so that SQLite is linked
// only where grants are kept.
type Store struct {
	b    Backend
	path string
}

// A Backend keeps a Store's grants.
type Backend interface {
	// Add remembers g, whose ID it ignores, and returns its id: ids
	// grow with every grant added.
	Add(g Grant) (int64, error)
	// List returns the grants in the order they were added, only those
	// live at now (not revoked, not expired) unless all.
	List(now time.Time, all bool) ([]Grant, error)
	// Revoke ends grant id at now, or returns an error matching
	// ErrNoGrant when no live grant has that id.
	Revoke(id int64, now time.Time) error
	Close() error
}

// ErrNoGrant is Revoke's error for an id with no live grant.
var ErrNoGrant = errors.New("approvals: no such grant")

// NewStore returns the Store of the grants b keeps in the file at path,
// which must be absolute: Protect hides it from sandboxes.
func NewStore(path string, b Backend) (*Store, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("approvals: the grants database %q is not an absolute path", path)
	}
	return &Store{b: b, path: filepath.Clean(path)}, nil
}

// Path is the database's path.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.b.Close() }

// Add remembers g and returns its id.
func (s *Store) Add(g Grant) (int64, error) {
	if g.Decision != Allow && g.Decision != Deny {
		return 0, fmt.Errorf("approvals: a grant decides allow or deny, not %q", g.Decision)
	}
	if g.Created.IsZero() {
		g.Created = time.Now()
	}
	return s.b.Add(g)
}

// List returns the grants, live ones only unless all.
func (s *Store) List(now time.Time, all bool) ([]Grant, error) { return s.b.List(now, all) }

// Match returns the live grant that decides call, the newest first, or
// nil. It matches the argument whole, as for a tool that is not a shell
// tool: Engine judges a shell tool's command line command by command.
func (s *Store) Match(call Call, now time.Time) (*Grant, error) {
	gs, err := s.scoped(call, now)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		if matchPattern(g.Pattern, call.Arg) {
			return &g, nil
		}
	}
	return nil, nil
}

// scoped returns the live grants of call's agent, tool and workspace,
// the newest first.
func (s *Store) scoped(call Call, now time.Time) ([]Grant, error) {
	gs, err := s.List(now, false)
	if err != nil {
		return nil, err
	}
	var out []Grant
	for i := len(gs) - 1; i >= 0; i-- {
		if g := gs[i]; g.Agent == call.Agent && g.Tool == call.Tool && g.Workspace == call.Workspace {
			out = append(out, g)
		}
	}
	return out, nil
}

// Revoke ends grant id: calls it decided are prompted again.
func (s *Store) Revoke(id int64, now time.Time) error { return s.b.Revoke(id, now) }

// Protect keeps the database out of p's sandboxes: it refuses a database
// inside a tree p makes writable (a command could rewrite its grants)
// and masks the database's directory (a command could read them). Call
// it on every policy whose commands the grants are about.
func (s *Store) Protect(p *runtime.Policy) error {
	dir := filepath.Dir(s.path)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	trees := append([]string{p.Workspace, p.Home}, p.Writable...)
	trees = append(trees, p.Grantable.Writable...)
	for _, t := range trees {
		if t == "" {
			continue
		}
		rt, err := filepath.EvalSymlinks(t)
		if err != nil {
			rt = filepath.Clean(t)
		}
		if mounts.Within(real, rt) || mounts.Within(rt, real) {
			return &runtime.PolicyError{Field: "Writable", Value: t, Reason: fmt.Sprintf("the grants database %s would be within a writable tree of the sandbox, or it within the database's directory", s.path)}
		}
	}
	p.Deny = append(p.Deny, real)
	return nil
}
