//go:build linux

package runtime

import (
	"io"
	"path"
)

// reportedFor is the scanner of the refusals a command's error output
// names, or nil when none is read: denials off, or a level whose plan
// Explain cannot answer from (landlock has no view of its own).
func (sb *Sandbox) reportedFor() *reportScanner {
	if sb.policy.Denials == DenialsOff || sb.level == LevelLandlock || sb.level == LevelUnsandboxed {
		return nil
	}
	return &reportScanner{}
}

// scanReported puts the command's refusal scanner beside out, the copy
// of its stream name: stderr, or the one stream both share.
func (c *Cmd) scanReported(name string, out io.Writer) io.Writer {
	if c.reported == nil || name == "stdout" {
		return out
	}
	return io.MultiWriter(out, c.reported)
}

// judgeReported adds to the command's Denials each refusal its error
// output named that its own plan makes: the view of c.sb (the Sandbox it
// ran in, a grant's included) with the deny-name matches and
// repositories its init was built with.
func (c *Cmd) judgeReported() {
	if c.reported == nil || c.in.denied == nil {
		return
	}
	order, counts := c.reported.flush()
	if len(order) == 0 {
		return
	}
	e := c.sb.explainer(c.in.fresh)
	for _, r := range order {
		if c.sb.leaks != nil && len(c.sb.leaks.Scan([]byte(r.path))) > 0 {
			// A path holding a secret: the Result and the summary
			// (which go around the redactor) never repeat it.
			continue
		}
		if d, ok := e.judge(r, c.Dir); ok {
			c.in.denied.add(d, counts[r])
		}
	}
}

// judge is the Denial of reported refusal r, a path relative to dir (the
// command's working directory) or absolute, when the plan refuses it:
// EROFS a write; EACCES or EPERM a write where the line says one was
// tried, a read otherwise (a path the plan refuses to read it refuses
// every access to, under the same rule); ENOENT a read, and only when a
// rule hides the path (a mask, a hidden directory, a listed view
// without it). Whether the host has something there is never looked at:
// the answer would go back to the command (Explain's summary on its
// stderr), and a command printing made-up errors would learn through it
// which files exist behind a mask, looked up with the host's privileges.
func (e *explainer) judge(r reported, dir string) (Denial, bool) {
	p := path.Clean(r.path)
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	access := AccessRead
	if r.errno == "EROFS" || r.write && r.errno != "ENOENT" {
		access = AccessWrite
	}
	x, err := e.explain(p, access)
	if err != nil || x.Allowed {
		return Denial{}, false
	}
	if r.errno == "ENOENT" {
		switch x.Rule {
		case RuleDefaultDeny, RuleDeny, RuleDenyName, RuleHiddenSockets, RuleAppIsolation, RuleNotInView:
		default:
			return Denial{}, false
		}
	}
	return Denial{Source: DenialFile, Op: string(access), Object: p, Errno: r.errno, Rule: x.Rule, Reason: x.Reason, Allow: x.Allow}, true
}

// explainRefusals writes the summary of r's denials that Policy.Explain
// or Cmd.Explain asks for to the caller's Stderr, after everything the
// command wrote there: nothing when there are none. A StderrPipe has had
// its end of stream by now and gets none.
func (c *Cmd) explainRefusals(r *Result) {
	if !c.sb.policy.Explain && !c.Explain || c.Stderr == nil {
		return
	}
	if _, pipe := c.Stderr.(*outputPipe); pipe {
		return
	}
	s := explainSummary(r.Denials, r.DenialsDropped)
	if s == "" {
		return
	}
	// A copy that outlived WaitDelay may still write to the same writer.
	c.output.wmu.Lock()
	defer c.output.wmu.Unlock()
	io.WriteString(c.Stderr, s)
}
