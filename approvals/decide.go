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
	// command line of a shell tool (a Rule with Shell set), the path of
	// a file tool.
	Arg string `json:"arg"`
	// Workspace is the workspace the call acts in.
	Workspace string `json:"workspace"`
}

// Rule is a tool's default.
type Rule struct {
	Decision Decision `json:"decision"`
	Danger   Danger   `json:"danger"`
	// Shell says the tool's argument is a shell command line, which
	// remembered grants then judge command by command (see the package
	// documentation): a grant for "npm test*" does not let "npm test;
	// rm -rf ~" ride on it. Whether an argument is shell code is a
	// property of the tool, stated where its rule is (and with it when
	// rules come from elsewhere than DefaultRules); a tool whose rule
	// does not say so has its argument matched whole, as a path is. A
	// tool that runs an argv rather than a shell string (Spacebot's
	// exec) is better marked too: the split only adds commands to
	// approve, never removes one.
	Shell bool `json:"shell,omitempty"`
}

// DefaultRules are the defaults of the agents hutch serves: reading and
// searching allowed, writing allowed (the sandbox bounds where), running
// commands prompted; a tool not named here is prompted at high danger.
//
// The tools that run commands are shell tools (Rule.Shell): bash
// (attocode's and most agents'), sh, shell (Spacebot's ShellTool, sh
// -c), exec (Daycare's, a command line run by a shell, and Spacebot's
// ExecTool), process_start (Daycare's durable processes, a command line
// too) and run_command (the name other agents give the same tool).
//
// The table includes attocode's documented one (its PolicyEngine, in
// the sandbox documentation) under attocode's own tool names: read_file,
// glob and grep allowed at its danger Safe; write_file, edit_file and
// spawn_agent allowed at Low; bash prompted at Medium; an unknown tool
// prompted at Medium. attocode's danger scale starts one step lower
// than hutch's (Safe for reads where hutch says low, Low for writes
// where hutch says medium, Medium for running commands where hutch says
// high), so its levels are here one step up: Safe is DangerLow, Low is
// DangerMedium, Medium is DangerHigh. Read that way, attocode's table
// and hutch's agree on every name they share (glob, grep, bash, an
// unknown tool) and on their synonyms (read_file and read, write_file
// and write, edit_file and edit): no decision differs. spawn_agent (a
// sub-agent, whose own calls are decided one by one) is allowed at
// medium; its argument, a task, is matched whole.
func DefaultRules() map[string]Rule {
	shell := Rule{Decision: Prompt, Danger: DangerHigh, Shell: true}
	read := Rule{Decision: Allow, Danger: DangerLow}
	write := Rule{Decision: Allow, Danger: DangerMedium}
	return map[string]Rule{
		"read": read, "glob": read, "grep": read, "ls": read, "read_file": read,
		"write": write, "edit": write, "write_file": write, "edit_file": write, "spawn_agent": write,
		"bash": shell, "sh": shell, "shell": shell, "exec": shell, "process_start": shell, "run_command": shell,
	}
}

var unknownTool = Rule{Decision: Prompt, Danger: DangerHigh}

// Verdict is the decision on a call and why.
type Verdict struct {
	Decision Decision `json:"decision"`
	Danger   Danger   `json:"danger"`
	Reason   string   `json:"reason"`
	// Grant is the remembered grant that decided, if one did.
	Grant int64 `json:"grant,omitempty"`
	// Grants are all those that did, when a shell call's commands were
	// allowed by several (Grant is the first), or when an approval was
	// remembered as one grant per command.
	Grants []int64 `json:"grants,omitempty"`
}

// Answer is the approval hook's: allow or not, and whether to remember
// it, for which arguments (a pattern where * matches anything; "" is the
// call's argument exactly, and for an approved shell call one grant per
// command, each exactly) and for how long (0: until revoked).
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
	var split shellSplit
	undecided := "no remembered grant decides it"
	if rule.Shell {
		split = splitShell(call.Arg)
		var gs []Grant
		if e.Store != nil {
			var err error
			if gs, err = e.Store.scoped(call, now); err != nil {
				return v, err
			}
		}
		j := judgeShell(gs, call.Arg, split)
		if j.decision != "" {
			out := Verdict{Decision: j.decision, Danger: rule.Danger, Reason: j.reason, Grant: j.grants[0]}
			if len(j.grants) > 1 {
				out.Grants = j.grants
			}
			return out, nil
		}
		undecided = j.reason
		v.Reason += ": " + j.reason
	} else if e.Store != nil {
		g, err := e.Store.Match(call, now)
		if err != nil {
			return v, err
		}
		if g != nil {
			return Verdict{Decision: g.Decision, Danger: rule.Danger, Reason: fmt.Sprintf("remembered grant %d (%s)", g.ID, g.Pattern), Grant: g.ID}, nil
		}
	}
	if !ask {
		v.Reason = undecided + ": ask"
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
		patterns := []string{a.Pattern}
		if a.Pattern == "" {
			patterns[0] = escapePattern(call.Arg)
			if rule.Shell && a.Allow {
				// One exact grant per command: the same call is approved
				// next time, and no other command rides on it.
				if split.opaque != "" || len(split.parts) == 0 {
					out.Reason += ", not remembered: " + cannotApprove(split)
					return out, nil
				}
				patterns = patterns[:0]
				for _, p := range split.parts {
					patterns = append(patterns, escapePattern(p.text))
				}
			}
		}
		var expires time.Time
		if a.For > 0 {
			expires = now.Add(a.For)
		}
		for _, pattern := range patterns {
			id, err := e.Store.Add(Grant{Agent: call.Agent, Tool: call.Tool, Pattern: pattern, Workspace: call.Workspace, Decision: d, Created: now, Expires: expires})
			if err != nil {
				return out, err
			}
			out.Grants = append(out.Grants, id)
		}
		out.Grant = out.Grants[0]
		if len(out.Grants) == 1 {
			out.Grants = nil
			out.Reason += ", remembered as grant " + fmt.Sprint(out.Grant)
		} else {
			out.Reason += ", remembered as grants " + strings.Trim(fmt.Sprint(out.Grants), "[]") + ", one per command"
		}
	}
	return out, nil
}

// judgment is judgeShell's: a decision with the grants that took it, or
// none ("") with why.
type judgment struct {
	decision Decision
	grants   []int64
	reason   string
}

// judgeShell judges a shell call by the live grants of its scope (the
// newest first), its command line arg and its split: a denial matching
// any command (or the whole line) denies it; it is allowed if every
// command matches an allowance and the parser saw through all of it;
// otherwise the tool's rule decides.
func judgeShell(gs []Grant, arg string, split shellSplit) judgment {
	for _, p := range split.parts {
		for _, g := range gs {
			if g.Decision != Deny {
				continue
			}
			for _, form := range append([]string{p.text}, p.bare...) {
				if matchPattern(g.Pattern, form) {
					why := fmt.Sprintf("remembered deny grant %d (%s) matches %q", g.ID, g.Pattern, p.text)
					if form != p.text {
						why += fmt.Sprintf(" (as %q)", form)
					}
					return judgment{Deny, []int64{g.ID}, why}
				}
			}
		}
	}
	for _, g := range gs {
		if g.Decision == Deny && matchPattern(g.Pattern, arg) {
			return judgment{Deny, []int64{g.ID}, fmt.Sprintf("remembered deny grant %d (%s) matches the whole command line", g.ID, g.Pattern)}
		}
	}
	if split.opaque != "" || len(split.parts) == 0 {
		return judgment{reason: cannotApprove(split)}
	}
	var ids []int64
	var why []string
parts:
	for _, p := range split.parts {
		for _, g := range gs {
			if g.Decision == Allow && matchPattern(g.Pattern, p.text) {
				ids = append(ids, g.ID)
				why = append(why, fmt.Sprintf("grant %d (%s) allows %q", g.ID, g.Pattern, p.text))
				continue parts
			}
		}
		return judgment{reason: fmt.Sprintf("%q matches no remembered grant", p.text)}
	}
	return judgment{Allow, ids, "remembered " + strings.Join(why, "; ")}
}

// cannotApprove says why a split no pattern can approve cannot be.
func cannotApprove(split shellSplit) string {
	if split.opaque == "" {
		return "no command in it to approve"
	}
	return "no pattern can approve it: " + split.opaque
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
