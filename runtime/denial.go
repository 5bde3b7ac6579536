package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// DenialMode is Policy.Denials.
type DenialMode string

const (
	// DenialsRecord (the default) records every refusal a source below
	// sees in Result.Denials.
	DenialsRecord DenialMode = "record"
	// DenialsOff records none: refused system calls are answered by the
	// kernel alone, as without hutch's listener.
	DenialsOff DenialMode = "off"
)

// DenialSource is what saw a refusal, one word each, stable in JSON.
type DenialSource string

const (
	// DenialSeccomp: a system call the seccomp profile refuses. The
	// profile hands each refused call (and only those) to the host,
	// which answers it with the profile's own errno and counts it.
	DenialSeccomp DenialSource = "seccomp"
	// DenialUnixWall: a connect to a unix socket outside the writable
	// trees, or a unix datagram socket, refused by the unix wall.
	DenialUnixWall DenialSource = "unix-wall"
	// DenialNetwork: a connection the egress proxy refused.
	DenialNetwork DenialSource = "network"
	// DenialFile: a file operation the command reported failing (its
	// error output names the path and the error), whose path the
	// sandbox's view refuses for that access. It is the command's own
	// report judged by its plan: it cannot make up a refusal the plan
	// does not make, but a command can print one it did not meet, and
	// one that prints nothing leaves none (see reported.go).
	DenialFile DenialSource = "file"
	// DenialPidNamespace: a process outside the sandbox's pid namespace,
	// named by pid (ptrace, a signal), which the sandbox cannot see.
	DenialPidNamespace DenialSource = "pid-namespace"
)

// More rules, for what no path decides (see Rule).
const (
	// RuleSeccomp: the seccomp profile refuses the system call.
	RuleSeccomp Rule = "seccomp"
	// RuleUnixWall: the unix wall (Result.UnixSocketWall).
	RuleUnixWall Rule = "unix-wall"
	// RuleNetwork: the network policy (Policy.Network, Domains).
	RuleNetwork Rule = "network"
	// RuleOutsideSandbox: the object is outside the sandbox.
	RuleOutsideSandbox Rule = "outside-sandbox"
)

// A Denial is one kind of refusal a command ran into while it ran,
// counted: the same operation on the same object refused for the same
// rule is one Denial with a Count.
type Denial struct {
	Source DenialSource `json:"source"`
	// Op is the operation: a system call ("bpf", "connect"), or a file
	// access ("write", "read").
	Op string `json:"op"`
	// Object is what it was done to, when there is one: a path, an
	// address, a pid.
	Object string `json:"object,omitempty"`
	// Errno is the error the command got ("EPERM"), when known.
	Errno string `json:"errno,omitempty"`
	Count int    `json:"count"`
	Rule  Rule   `json:"rule"`
	// Reason says the rule in words a model reads ("bpf is refused by
	// the seccomp profile").
	Reason string `json:"reason"`
	// Allow is how the caller could allow it, when a policy can.
	Allow *Remedy `json:"allow,omitempty"`
}

// String is d in one line: what was refused, how often, and why.
func (d Denial) String() string {
	s := d.Op
	if d.Object != "" {
		s += " " + d.Object
	}
	if d.Count > 1 {
		s += fmt.Sprintf(" (%d times)", d.Count)
	}
	s += ": " + d.Reason
	if h := d.Allow.how(); h != "" {
		s += " (allow: " + h + ")"
	}
	return s
}

// how is r as the ways a caller could allow something, in the words of
// both Explanation.String and Denial.String, or "".
func (r *Remedy) how() string {
	if r == nil {
		return ""
	}
	var how []string
	if r.Flag != "" {
		how = append(how, r.Flag)
	}
	if r.Key != "" {
		how = append(how, "policy file: "+r.Key)
	}
	if r.Grant != "" {
		how = append(how, "grant: "+r.Grant)
	}
	return strings.Join(how, "; ")
}

// maxDenials caps the kinds of Denial one command records: beyond it,
// more kinds are only counted (Result.DenialsDropped). Each kind is a
// count, so a command refused a million times costs what it costs
// refused once.
const maxDenials = 64

// denialKey is what makes two refusals the same Denial.
type denialKey struct {
	source    DenialSource
	op, obj   string
	errno     string
	rule      Rule
	hasRemedy bool
}

// denials counts a command's refusals; its sources add to it from their
// own goroutines while the command runs.
type denials struct {
	mu      sync.Mutex
	index   map[denialKey]int
	list    []Denial
	dropped int
}

// add counts d (its Count ignored: one refusal, or n when n > 0).
func (s *denials) add(d Denial, n int) {
	if s == nil {
		return
	}
	if n <= 0 {
		n = 1
	}
	k := denialKey{d.Source, d.Op, d.Object, d.Errno, d.Rule, d.Allow != nil}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[k]; ok {
		s.list[i].Count += n
		return
	}
	if len(s.list) >= maxDenials {
		s.dropped += n
		return
	}
	if s.index == nil {
		s.index = make(map[denialKey]int)
	}
	d.Count = n
	s.index[k] = len(s.list)
	s.list = append(s.list, d)
}

// result is what s counted so far, in the order first seen, and the
// refusals beyond the cap.
func (s *denials) result() ([]Denial, int) {
	if s == nil {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list), s.dropped
}

// resolveDenials checks Policy.Denials and Explain, and names the
// default.
func resolveDenials(p *Policy) error {
	switch p.Denials {
	case "":
		p.Denials = DenialsRecord
	case DenialsRecord, DenialsOff:
	default:
		return &PolicyError{Field: "Denials", Value: string(p.Denials), Reason: "not record or off"}
	}
	if p.Explain && p.Denials == DenialsOff {
		return &PolicyError{Field: "Explain", Reason: "explains the recorded denials, and Denials is off"}
	}
	return nil
}
