package approvals

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

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

// Store is the remembered grants, in a SQLite database.
type Store struct {
	db   *sql.DB
	path string
}

// ErrNoGrant is Revoke's error for an id with no live grant.
var ErrNoGrant = errors.New("approvals: no such grant")

const schema = `CREATE TABLE IF NOT EXISTS remembered_permissions (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	agent     TEXT NOT NULL,
	tool      TEXT NOT NULL,
	pattern   TEXT NOT NULL,
	workspace TEXT NOT NULL,
	decision  TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
	created   INTEGER NOT NULL,
	expires   INTEGER,
	revoked   INTEGER
)`

// OpenStore opens (creating it, mode 0600 in a directory of mode 0700)
// the grants database at path.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	} else {
		f.Close()
	}
	db, err := sql.Open("sqlite", "file:"+abs+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("approvals: %s: %w", abs, err)
	}
	return &Store{db: db, path: abs}, nil
}

// Path is the database's path.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func unix(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// Add remembers g and returns its id.
func (s *Store) Add(g Grant) (int64, error) {
	if g.Decision != Allow && g.Decision != Deny {
		return 0, fmt.Errorf("approvals: a grant decides allow or deny, not %q", g.Decision)
	}
	if g.Created.IsZero() {
		g.Created = time.Now()
	}
	r, err := s.db.Exec(`INSERT INTO remembered_permissions (agent, tool, pattern, workspace, decision, created, expires) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		g.Agent, g.Tool, g.Pattern, g.Workspace, string(g.Decision), g.Created.UnixNano(), unix(g.Expires))
	if err != nil {
		return 0, err
	}
	return r.LastInsertId()
}

// List returns the grants, live ones only unless all.
func (s *Store) List(now time.Time, all bool) ([]Grant, error) {
	q := `SELECT id, agent, tool, pattern, workspace, decision, created, expires, revoked FROM remembered_permissions`
	var args []any
	if !all {
		q += ` WHERE revoked IS NULL AND (expires IS NULL OR expires > ?)`
		args = append(args, now.UnixNano())
	}
	rows, err := s.db.Query(q+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var gs []Grant
	for rows.Next() {
		var g Grant
		var created int64
		var expires, revoked sql.NullInt64
		var d string
		if err := rows.Scan(&g.ID, &g.Agent, &g.Tool, &g.Pattern, &g.Workspace, &d, &created, &expires, &revoked); err != nil {
			return nil, err
		}
		g.Decision, g.Created = Decision(d), time.Unix(0, created)
		if expires.Valid {
			g.Expires = time.Unix(0, expires.Int64)
		}
		if revoked.Valid {
			g.Revoked = time.Unix(0, revoked.Int64)
		}
		gs = append(gs, g)
	}
	return gs, rows.Err()
}

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
func (s *Store) Revoke(id int64, now time.Time) error {
	r, err := s.db.Exec(`UPDATE remembered_permissions SET revoked = ? WHERE id = ? AND revoked IS NULL`, now.UnixNano(), id)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("approvals: grant %d: %w", id, ErrNoGrant)
	}
	return nil
}

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
