package approvals

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// memBackend keeps grants in memory, as package grantsdb keeps them in
// SQLite (which this package does not link): the internal tests' Backend.
type memBackend struct{ gs []Grant }

func (m *memBackend) Add(g Grant) (int64, error) {
	g.ID = int64(len(m.gs) + 1)
	m.gs = append(m.gs, g)
	return g.ID, nil
}

func (m *memBackend) List(now time.Time, all bool) ([]Grant, error) {
	var out []Grant
	for _, g := range m.gs {
		if all || (g.Revoked.IsZero() && (g.Expires.IsZero() || g.Expires.After(now))) {
			out = append(out, g)
		}
	}
	return out, nil
}

func (m *memBackend) Revoke(id int64, now time.Time) error {
	for i := range m.gs {
		if m.gs[i].ID == id && m.gs[i].Revoked.IsZero() {
			m.gs[i].Revoked = now
			return nil
		}
	}
	return fmt.Errorf("approvals: grant %d: %w", id, ErrNoGrant)
}

func (m *memBackend) Close() error { return nil }

// memStore is a Store of no grants yet, over a memBackend, said to be
// kept at path, whose directory it makes as grantsdb.Open does (Protect
// resolves it).
func memStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	return NewStore(abs, &memBackend{})
}
