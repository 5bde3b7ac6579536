// Package grantsdb keeps remembered grants (approvals.Grant) in a SQLite
// database, table remembered_permissions: the approvals.Backend behind a
// Store, opened in the process that imports it. The hutch CLI does not
// import it; its hutch-grants helper does (cmd/hutch-grants says why). A
// Go program that keeps grants itself calls OpenStore.
package grantsdb

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/hutchbox/hutch/approvals"
)

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

// DB is a grants database: an approvals.Backend.
type DB struct {
	db   *sql.DB
	path string
}

// Open opens (creating it, mode 0600 in a directory of mode 0700) the
// grants database at path.
func Open(path string) (*DB, error) {
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
	return &DB{db: db, path: abs}, nil
}

// OpenStore opens the grants database at path as a Store.
func OpenStore(path string) (*approvals.Store, error) {
	db, err := Open(path)
	if err != nil {
		return nil, err
	}
	return approvals.NewStore(db.Path(), db)
}

// Path is the database's absolute path.
func (d *DB) Path() string { return d.path }

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

func unixNano(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// Add remembers g and returns its id.
func (d *DB) Add(g approvals.Grant) (int64, error) {
	r, err := d.db.Exec(`INSERT INTO remembered_permissions (agent, tool, pattern, workspace, decision, created, expires) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		g.Agent, g.Tool, g.Pattern, g.Workspace, string(g.Decision), g.Created.UnixNano(), unixNano(g.Expires))
	if err != nil {
		return 0, err
	}
	return r.LastInsertId()
}

// List returns the grants, live ones only unless all.
func (d *DB) List(now time.Time, all bool) ([]approvals.Grant, error) {
	q := `SELECT id, agent, tool, pattern, workspace, decision, created, expires, revoked FROM remembered_permissions`
	var args []any
	if !all {
		q += ` WHERE revoked IS NULL AND (expires IS NULL OR expires > ?)`
		args = append(args, now.UnixNano())
	}
	rows, err := d.db.Query(q+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var gs []approvals.Grant
	for rows.Next() {
		var g approvals.Grant
		var created int64
		var expires, revoked sql.NullInt64
		var decision string
		if err := rows.Scan(&g.ID, &g.Agent, &g.Tool, &g.Pattern, &g.Workspace, &decision, &created, &expires, &revoked); err != nil {
			return nil, err
		}
		g.Decision, g.Created = approvals.Decision(decision), time.Unix(0, created)
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

// Revoke ends grant id at now.
func (d *DB) Revoke(id int64, now time.Time) error {
	r, err := d.db.Exec(`UPDATE remembered_permissions SET revoked = ? WHERE id = ? AND revoked IS NULL`, now.UnixNano(), id)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("approvals: grant %d: %w", id, approvals.ErrNoGrant)
	}
	return nil
}
