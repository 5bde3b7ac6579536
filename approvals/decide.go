package approvals

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Decision is what a call gets.
type Decision string

// The decisions: run it, ask the user, refuse it.
const (
	Allow  Decision = "allow"
	Prompt Decision = "prompt"
	Deny   Decision = "deny"
)

// Danger is how much harm a tool can do, for the prompt to show.
type Danger string

const (
	DangerLow    Danger = "low"    // reads
	DangerMedium Danger = "medium" // writes inside the sandbox's writable trees
	DangerHigh   Danger = "high"   // runs code, or unknown
)

// Call is one tool call to decide on.
type Call struct {
	// Agent is who calls (an agent or sub-agent name).
	Agent string `json:"agent"`
	// Tool is the tool's name (bash, read, write...).
	Tool string `json:"tool"`
	// Arg is the call's argument as remembered grants match it: the
	// command line of a shell tool, the path of a file tool.
	Arg string `json:"arg"`
	// Workspace is the workspace the call acts in.
	Workspace string `json:"workspace"`
}

// Rule is a tool's default.
type Rule struct {
	Decision Decision `json:"decision"`
	Danger   Danger   `json:"danger"`
}

// DefaultRules are the defaults of the agents hutch serves: reading and
// searching allowed, writing allowed (the sandbox bounds where), running
// commands prompted; a tool not named here is prompted at high danger.
func DefaultRules() map[string]Rule {
	return map[string]Rule{
		"read": {Allow, DangerLow}, "glob": {Allow, DangerLow}, "grep": {Allow, DangerLow}, "ls": {Allow, DangerLow},
		"write": {Allow, DangerMedium}, "edit": {Allow, DangerMedium},
		"bash": {Prompt, DangerHigh},
	}
}

var unknownTool = Rule{Prompt, DangerHigh}

// Verdict is the decision on a call and why.
type Verdict struct {
	Decision Decision `json:"decision"`
	Danger   Danger   `json:"danger"`
	Reason   string   `json:"reason"`
	// Grant is the remembered grant that decided, if one did.
	Grant int64 `json:"grant,omitempty"`
}

// Answer is the approval hook's: allow or not, and whether to remember
// it, for which arguments (a pattern where * matches anything; "" is the
// call's argument exactly) and for how long (0: until revoked).
type Answer struct {
	Allow    bool
	Remember bool
	Pattern  string
	For      time.Duration
}

// Engine decides calls: a remembered grant first, then the tool's rule,
// and for PROMPT the approval hook.
type Engine struct {
	// Rules are the tools' defaults (DefaultRules when nil).
	Rules map[string]Rule
	// Approve is asked for every call that a rule prompts for and no
	// remembered grant decides; nil denies them.
	Approve func(context.Context, Call, Verdict) (Answer, error)
	// Store keeps the remembered grants; nil remembers nothing.
	Store *Store
	// Now is the clock (time.Now when nil), for expiry.
	Now func() time.Time
}

// ErrDenied is what a denied call's error matches.
var ErrDenied = errors.New("approvals: denied")

// Decide decides on call. A PROMPT is resolved through Approve, so the
// Verdict it returns is Allow or Deny, with the reason.
func (e *Engine) Decide(ctx context.Context, call Call) (Verdict, error) {
	return e.decide(ctx, call, true)
}

// Lookup decides call as Decide does but asks no one: a PROMPT that no
// remembered grant decides comes back as it is, for a caller that puts
// it to the user itself (and remembers the answer with Store.Add).
func (e *Engine) Lookup(call Call) (Verdict, error) {
	return e.decide(context.Background(), call, false)
}

func (e *Engine) decide(ctx context.Context, call Call, ask bool) (Verdict, error) {
	now := time.Now()
	if e.Now != nil {
		now = e.Now()
	}
	rules := e.Rules
	if rules == nil {
		rules = DefaultRules()
	}
	rule, ok := rules[call.Tool]
	if !ok {
		rule = unknownTool
	}
	v := Verdict{Decision: rule.Decision, Danger: rule.Danger, Reason: fmt.Sprintf("the %s rule for %s", rule.Decision, call.Tool)}
	if !ok {
		v.Reason = "an unknown tool: " + call.Tool
	}
	if rule.Decision != Prompt {
		return v, nil
	}
	if e.Store != nil {
		g, err := e.Store.Match(call, now)
		if err != nil {
			return v, err
		}
		if g != nil {
			return Verdict{Decision: g.Decision, Danger: rule.Danger, Reason: fmt.Sprintf("remembered grant %d (%s)", g.ID, g.Pattern), Grant: g.ID}, nil
		}
	}
	if !ask {
		v.Reason = "no remembered grant decides it: ask"
		return v, nil
	}
	if e.Approve == nil {
		return Verdict{Decision: Deny, Danger: rule.Danger, Reason: "prompted, with no one to ask"}, nil
	}
	a, err := e.Approve(ctx, call, v)
	if err != nil {
		return v, err
	}
	d := Deny
	if a.Allow {
		d = Allow
	}
	out := Verdict{Decision: d, Danger: rule.Danger, Reason: "approved"}
	if !a.Allow {
		out.Reason = "refused"
	}
	if a.Remember && e.Store != nil {
		pattern := a.Pattern
		if pattern == "" {
			pattern = escapePattern(call.Arg)
		}
		var expires time.Time
		if a.For > 0 {
			expires = now.Add(a.For)
		}
		id, err := e.Store.Add(Grant{Agent: call.Agent, Tool: call.Tool, Pattern: pattern, Workspace: call.Workspace, Decision: d, Created: now, Expires: expires})
		if err != nil {
			return out, err
		}
		out.Grant = id
		out.Reason += ", remembered as grant " + fmt.Sprint(id)
	}
	return out, nil
}

// matchPattern says whether arg matches pattern: * matches any run of
// characters, \* a star; everything else is itself.
func matchPattern(pattern, arg string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\' && i+1 < len(pattern):
			i++
			re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		case c == '*':
			re.WriteString("(?s:.*)")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	ok, err := regexp.MatchString(re.String(), arg)
	return err == nil && ok
}

// escapePattern is the pattern matching arg exactly.
func escapePattern(arg string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`).Replace(arg)
}
