package approvals

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/hutchbox/hutch/internal/smallfile"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// MaxRulesFileSize is the most bytes a rules file may have.
const MaxRulesFileSize = 1 << 20

// RulesError is a mistake in a rules file: the file, the line when it is
// known (0 otherwise), the tool and the field (decision, danger, shell;
// "" for the tool's table, or the key that is not one) it is about.
type RulesError struct {
	File   string
	Line   int
	Tool   string
	Field  string
	Reason string
}

// Error says where the mistake is and what it is: file:line: tools.T.field: reason.
func (e *RulesError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Tool != "" || e.Field != "" {
		b.WriteString(": ")
		if e.Tool != "" {
			fmt.Fprintf(&b, "tools.%s", tomlKey(e.Tool))
			if e.Field != "" {
				b.WriteString(".")
			}
		}
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// tomlKey is name as a TOML key: bare when it can be, quoted otherwise.
func tomlKey(name string) string {
	if name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return name
	}
	return fmt.Sprintf("%q", name)
}

// rulesDoc is a rules file as TOML.
type rulesDoc struct {
	Tools map[string]ruleDoc `toml:"tools"`
}

type ruleDoc struct {
	Decision *string `toml:"decision"`
	Danger   *string `toml:"danger"`
	Shell    *bool   `toml:"shell"`
}

// LoadRules reads the tools' rules from the TOML file at path, on top of
// DefaultRules:
//
//	[tools.NAME]
//	decision = "allow" | "prompt" | "deny"
//	danger = "low" | "medium" | "high"
//	shell = true | false
//
// A table for a tool of DefaultRules replaces the fields it sets and
// keeps the others (so a bash made "deny" stays a shell tool unless the
// table says shell = false); a table for another tool adds it, and must
// set decision and danger (shell is false unless set). A tool not named
// keeps its default, and a tool in neither is an unknown tool (prompt,
// high).
//
// It is strict: a key other than these, a decision or danger not among
// the values above, a value of the wrong type, a tool's table setting
// nothing, an empty tool name, and a file that is not regular (refused
// unread, without blocking on a FIFO) or has more than MaxRulesFileSize
// bytes are errors. A mistake in the file is a *RulesError (or several,
// joined) naming the file, the line, the tool and the field.
func LoadRules(path string) (map[string]Rule, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := smallfile.Read(f, MaxRulesFileSize, "a rules file")
	if err != nil {
		return nil, &RulesError{File: path, Reason: err.Error()}
	}
	return parseRules(path, b)
}

// parseRules parses a rules file's content on top of DefaultRules; name
// is what errors call it.
func parseRules(name string, data []byte) (map[string]Rule, error) {
	var doc rulesDoc
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, decodeRulesError(name, err)
	}
	lines, err := ruleLines(data)
	if err != nil {
		return nil, decodeRulesError(name, err)
	}
	rules := DefaultRules()
	var errs []error
	fail := func(tool, field, reason string) {
		line, ok := lines[[2]string{tool, field}]
		if !ok {
			line = lines[[2]string{tool, ""}] // a missing field: its tool's table
		}
		errs = append(errs, &RulesError{File: name, Line: line, Tool: tool, Field: field, Reason: reason})
	}
	for _, tool := range sortedKeys(doc.Tools) {
		d := doc.Tools[tool]
		if tool == "" {
			fail(tool, "", `an empty tool name (tools."")`)
			continue
		}
		r, known := rules[tool]
		if d.Decision == nil && d.Danger == nil && d.Shell == nil {
			fail(tool, "", "sets none of decision, danger, shell")
			continue
		}
		// set sets *to from a field's value, which must be one of values;
		// a field not set keeps the default, and a new tool has none.
		ok := true
		set := func(to *string, field string, v *string, values ...string) {
			switch {
			case v != nil && slices.Contains(values, *v):
				*to = *v
			case v != nil:
				fail(tool, field, fmt.Sprintf("%q is not %s", *v, orList(values)))
				ok = false
			case !known:
				fail(tool, field, fmt.Sprintf("missing: a tool hutch has no default for needs a %s (%s)", field, orList(values)))
				ok = false
			}
		}
		decision, danger := string(r.Decision), string(r.Danger)
		set(&decision, "decision", d.Decision, string(Allow), string(Prompt), string(Deny))
		set(&danger, "danger", d.Danger, string(DangerLow), string(DangerMedium), string(DangerHigh))
		r.Decision, r.Danger = Decision(decision), Danger(danger)
		if d.Shell != nil {
			r.Shell = *d.Shell
		}
		if ok {
			rules[tool] = r
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// orList is "a, b or c".
func orList(values []string) string {
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// decodeRulesError says a TOML error with its file, line, tool and key.
func decodeRulesError(name string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		var errs []error
		for _, e := range strict.Errors {
			line, _ := e.Position()
			tool, field := splitRuleKey(e.Key())
			why := "not a key of a rules file (decision, danger, shell)"
			if tool == "" {
				why = "not a key of a rules file (only [tools.NAME] tables)"
			}
			errs = append(errs, &RulesError{File: name, Line: line, Tool: tool, Field: field, Reason: why})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		tool, field := splitRuleKey(de.Key())
		why := strings.TrimPrefix(de.Error(), "toml: ")
		if msg, typ, ok := strings.Cut(why, "cannot decode TOML "); ok && msg == "" {
			// Say what was wanted, not which Go field it was for.
			typ, _, _ = strings.Cut(typ, " ")
			want := map[string]string{"decision": "a string (allow, prompt or deny)", "danger": "a string (low, medium or high)", "shell": "true or false", "": "a table of decision, danger, shell"}[field]
			if tool == "" {
				want = "a table of [tools.NAME] tables"
			}
			why = fmt.Sprintf("a TOML %s, not %s", typ, want)
		}
		return &RulesError{File: name, Line: line, Tool: tool, Field: field, Reason: why}
	}
	return &RulesError{File: name, Reason: err.Error()}
}

// splitRuleKey is a key's tool and field: tools.NAME.FIELD, tools.NAME,
// or (for a key outside [tools]) no tool and the key as the field.
func splitRuleKey(key []string) (tool, field string) {
	switch {
	case len(key) >= 3 && key[0] == "tools":
		return key[1], strings.Join(key[2:], ".")
	case len(key) == 2 && key[0] == "tools":
		return key[1], ""
	}
	return "", strings.Join(key, ".")
}

// ruleLines maps each tool's table (field "") and each of its fields to
// the line it is first on, however the file writes them ([tools.NAME]
// tables, dotted keys, inline tables).
func ruleLines(data []byte) (map[[2]string]int, error) {
	lines := map[[2]string]int{}
	var p unstable.Parser
	p.Reset(data)
	note := func(path []string, line int) {
		tool, field := splitRuleKey(path)
		if len(path) < 2 || path[0] != "tools" {
			return
		}
		for _, k := range [][2]string{{tool, ""}, {tool, field}} {
			if _, ok := lines[k]; !ok {
				lines[k] = line
			}
		}
	}
	var keyValue func(table []string, kv *unstable.Node)
	keyValue = func(table []string, kv *unstable.Node) {
		path, line := keyPath(&p, table, kv.Key())
		note(path, line)
		if v := kv.Value(); v != nil && v.Kind == unstable.InlineTable {
			for it := v.Children(); it.Next(); {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					keyValue(path, c)
				}
			}
		}
	}
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var line int
			table, line = keyPath(&p, nil, e.Key())
			note(table, line)
		case unstable.KeyValue:
			keyValue(table, e)
		}
	}
	return lines, p.Error()
}

// keyPath is prefix followed by key's parts, and the line key is on.
func keyPath(p *unstable.Parser, prefix []string, key unstable.Iterator) ([]string, int) {
	path := append([]string(nil), prefix...)
	line := 0
	for key.Next() {
		n := key.Node()
		if line == 0 && n.Raw.Length > 0 {
			line = p.Shape(n.Raw).Start.Line
		}
		path = append(path, string(n.Data))
	}
	return path, line
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RuleRow is one tool's rule as hutch grants rules --json prints it and
// the local API's GET /v1/approvals/rules lists it: one definition, so
// that the two never differ.
type RuleRow struct {
	Tool     string   `json:"tool"`
	Decision Decision `json:"decision"`
	Danger   Danger   `json:"danger"`
	Shell    bool     `json:"shell"`
}

// RuleRows are rules as rows sorted by tool (DefaultRules' when rules is
// nil, as Engine reads a nil Rules); never nil, so that none is an empty
// JSON array rather than null.
func RuleRows(rules map[string]Rule) []RuleRow {
	if rules == nil {
		rules = DefaultRules()
	}
	rows := make([]RuleRow, 0, len(rules))
	for _, tool := range sortedKeys(rules) {
		r := rules[tool]
		rows = append(rows, RuleRow{tool, r.Decision, r.Danger, r.Shell})
	}
	return rows
}
