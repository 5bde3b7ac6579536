//go:build linux || darwin

package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// grantState is what a Sandbox of either platform keeps for grants: the
// policy as given (grants are added to it, not to its resolved form), its
// checked Grantable, and the Sandboxes made for grants so far.
type grantState struct {
	given   Policy
	ceiling ceiling
	granted granted
}

// setupGrants keeps p as given and checks its Grantable against r, its
// resolved form, whose workspace, Writable and Home a grant may make
// writable again below.
func (gs *grantState) setupGrants(p Policy, r Policy) error {
	trees := append([]string{r.Workspace}, r.Writable...)
	if r.Home != "" {
		trees = append(trees, r.Home)
	}
	c, err := newCeiling(p, trees)
	if err != nil {
		return err
	}
	gs.given, gs.ceiling = p.clone(), c
	return nil
}

// granted are the Sandboxes a Sandbox made for its commands' grants,
// one per distinct grant, kept until it closes: one Sandbox serves many
// calls with the same grant without being built again.
type granted struct {
	mu    sync.Mutex
	byKey map[string]*Sandbox
}

// forGrant returns the Sandbox a command of sb asking for g runs in: sb
// itself for nothing, else one built for sb's policy with g added, once
// g is checked against sb's Grantable.
func (sb *Sandbox) forGrant(g Grant) (*Sandbox, error) {
	if g.IsZero() {
		return sb, nil
	}
	if sb.isClosed() {
		return nil, fmt.Errorf("hutch: %w", ErrClosed)
	}
	if err := sb.ceiling.check(g); err != nil {
		return nil, err
	}
	key := strings.Join(g.Tags(), "\x00")
	sb.granted.mu.Lock()
	defer sb.granted.mu.Unlock()
	if child, ok := sb.granted.byKey[key]; ok {
		return child, nil
	}
	child, err := New(g.apply(sb.given))
	if err != nil {
		return nil, err
	}
	// What New resolved must still lie where the check saw it: a tree
	// renamed or a symlink swapped in between is caught here.
	if err := sb.ceiling.check(Grant{Writable: child.extraWritable(sb)}); err != nil {
		child.Close()
		return nil, err
	}
	if sb.granted.byKey == nil {
		sb.granted.byKey = map[string]*Sandbox{}
	}
	sb.granted.byKey[key] = child
	return child, nil
}

// PolicyWith returns the policy a command of sb granted g runs under,
// as given to New rather than resolved, once g is checked against sb's
// Grantable (a *PermissionError names the first tag it does not cover):
// for a runner that builds its own sandbox from a policy, such as a
// durable process's supervisor. The policy in effect is Reload's latest.
func (sb *Sandbox) PolicyWith(g Grant) (Policy, error) {
	cur := sb.inEffect()
	if err := cur.ceiling.check(g); err != nil {
		return Policy{}, err
	}
	if g.IsZero() {
		return cur.given.clone(), nil
	}
	return g.apply(cur.given), nil
}

// extraWritable are the child's resolved writable trees that its parent
// does not have.
func (child *Sandbox) extraWritable(parent *Sandbox) []string {
	var extra []string
	for _, w := range child.policy.Writable {
		if !slices.Contains(parent.policy.Writable, w) {
			extra = append(extra, w)
		}
	}
	return extra
}

// closeGranted closes the Sandboxes made for grants.
func (sb *Sandbox) closeGranted() {
	sb.granted.mu.Lock()
	defer sb.granted.mu.Unlock()
	for k, child := range sb.granted.byKey {
		child.Close()
		delete(sb.granted.byKey, k)
	}
}

// Narrow returns a Sandbox for a sub-agent: sb's policy, whose commands
// may be granted only what g covers, which must lie within sb's own
// Grantable (a *PermissionError names the first tag that does not).
// Closing it leaves sb as it was; closing sb does not close it.
func (sb *Sandbox) Narrow(g Grant) (*Sandbox, error) {
	if err := sb.ceiling.check(g); err != nil {
		return nil, err
	}
	p := sb.given.clone()
	p.Grantable = g
	return New(p)
}
