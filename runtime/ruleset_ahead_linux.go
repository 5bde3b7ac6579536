//go:build linux

package runtime

import (
	"os"
	"sync"

	"github.com/hutchbox/hutch/nsinit"
)

// rulesetAhead keeps a Landlock ruleset begun ahead for a Sandbox's next
// cold init: the host's part of an init's ruleset (about 200 rules, one
// system call each, for the carve-outs of /etc and the like) was made
// while the init was cloned, and on two cores it slowed the clone by
// about 0.3 ms. A Sandbox running its commands one after another has
// the next one's made once a command has ended instead. It is made from
// the plan the last init took and handed out only to an init of that
// same plan (planMemo gives a new plan when anything it comes from
// changed): the same rules on the same files as one made then.
type rulesetAhead struct {
	mu      sync.Mutex
	last    *nsinit.Plan // the plan of the last init, to make the next for
	plan    *nsinit.Plan // the plan ruleset was made for
	ruleset *os.File
	making  bool
	closed  bool
	// takes counts the inits given a ruleset: the next is made ahead only
	// for a Sandbox that has run more than one (a hutch run runs one).
	takes int
	// failed is a plan whose ruleset the host could not make: not tried
	// ahead again (its inits begin their rulesets themselves).
	failed *nsinit.Plan
	made   chan struct{} // closed when the making in flight ends
}

// take returns the ruleset made ahead for plan, or nil (the caller makes
// one), dropping one made for another plan. One being made for plan is
// waited for: it has a head start on one made now, which would only
// compete with it for the CPU.
func (a *rulesetAhead) take(plan *nsinit.Plan) *os.File {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.making && a.last == plan {
		made := a.made
		a.mu.Unlock()
		<-made
		a.mu.Lock()
	}
	a.last = plan
	a.takes++
	r, p := a.ruleset, a.plan
	a.ruleset, a.plan = nil, nil
	if r != nil && p != plan {
		r.Close()
		r = nil
	}
	return r
}

// makeNext begins the next init's ruleset in the background, from the
// last init's plan, unless one is held or being made.
func (a *rulesetAhead) makeNext() {
	a.mu.Lock()
	defer a.mu.Unlock()
	plan := a.last
	if a.closed || a.making || a.ruleset != nil || plan == nil || plan == a.failed || a.takes < 2 {
		return
	}
	a.making = true
	made := make(chan struct{})
	a.made = made
	go func() {
		r, err := plan.Ruleset()
		a.mu.Lock()
		defer a.mu.Unlock()
		// Last, what it made kept or closed: close waits for this.
		defer close(made)
		a.making = false
		if err != nil {
			a.failed = plan
		}
		if err != nil || r == nil {
			return // the next init makes its own, and says why not
		}
		if a.closed || a.ruleset != nil {
			r.Close()
			return
		}
		a.ruleset, a.plan = r, plan
	}()
}

// close drops what is held and waits for a making in flight (which,
// finding it closed, drops what it made).
func (a *rulesetAhead) close() {
	a.mu.Lock()
	a.closed = true
	if a.ruleset != nil {
		a.ruleset.Close()
		a.ruleset, a.plan = nil, nil
	}
	var made chan struct{}
	if a.making {
		made = a.made
	}
	a.mu.Unlock()
	if made != nil {
		<-made
	}
}
