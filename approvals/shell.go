package approvals

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// maxShellDepth bounds how deep strings given to sh -c or eval are
// parsed in turn; deeper ones cannot be seen through.
const maxShellDepth = 4

// What a command line may cost to judge: its length, and the bytes of
// its commands printed back (a command inside n nested substitutions is
// printed inside each of them: a line of 3 KB nested 1000 deep printed
// 1.5 MB and took 0.7 s, nested 10000 deep minutes). A line past either
// bound cannot be seen through.
const (
	maxShellLine    = 64 << 10
	maxShellPrinted = 1 << 20
)

// maxShellNesting bounds how deep the syntax tree is walked (a command
// in ten nested substitutions is about 80 nodes deep): syntax.Walk
// recurses, and took 1.4 s over a line nested 20000 deep.
const maxShellNesting = 512

// maxReasonWord bounds a word quoted in a Reason.
const maxReasonWord = 80

// shellNames are the programs whose -c string is shell code, parsed in
// turn when it is literal. fish's syntax is not bash's: a string of it
// that does not parse as bash cannot be seen through, like any other.
var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true, "fish": true}

// shellSplit is a shell command line split into its simple commands.
type shellSplit struct {
	// parts are the simple commands, in order, each once.
	parts []shellPart
	// opaque says why the parser cannot see through the line ("" when
	// it can): what it says cannot be approved by a pattern.
	opaque string
}

// shellPart is one simple command of a shell command line.
type shellPart struct {
	// text is the command printed back by the shell printer on one line
	// (a here-document's body on the lines after), with its
	// redirections and those of the compound commands around it: what
	// remembered grants match.
	text string
	// bare are other forms of a command whose words are literal, which
	// remembered denials also match: its words without quotes,
	// assignments or redirections, and the same with the command name's
	// directory dropped (so \sudo, 'sudo', X=1 sudo and /usr/bin/sudo do
	// not escape a denial of sudo *).
	bare []string
}

// splitShell splits src into its simple commands: every command
// anywhere in it (lists, pipelines, subshells, blocks, the bodies of
// if, while, for, case and functions, $(...), backticks, process and
// arithmetic substitutions, here-documents), and in turn those of the
// literal strings it gives to sh -c (and the other shellNames) or eval.
func splitShell(src string) shellSplit {
	s := splitter{seen: map[string]bool{}, printer: syntax.NewPrinter(syntax.SingleLine(true))}
	if len(src) > maxShellLine {
		s.blind(fmt.Sprintf("it is longer than %d bytes", maxShellLine))
		return shellSplit{opaque: s.opaque}
	}
	s.split(src, 0)
	return shellSplit{parts: s.parts, opaque: s.opaque}
}

type splitter struct {
	parts   []shellPart
	seen    map[string]bool
	opaque  string
	printer *syntax.Printer
	// printed counts the bytes printed back; past maxShellPrinted the
	// walk stops (over).
	printed int
	over    bool
}

func (s *splitter) blind(why string) {
	if s.opaque == "" {
		s.opaque = why
	}
}

// short is w as a Reason quotes it: at most maxReasonWord bytes.
func short(w string) string {
	if len(w) <= maxReasonWord {
		return w
	}
	return w[:maxReasonWord] + "..."
}

func (s *splitter) add(text string, bare ...string) {
	if text != "" && !s.seen[text] {
		s.seen[text] = true
		s.parts = append(s.parts, shellPart{text: text, bare: bare})
	}
}

func (s *splitter) split(src string, depth int) {
	if depth > maxShellDepth {
		s.blind(fmt.Sprintf("shell strings nested more than %d deep", maxShellDepth))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		s.blind("it does not parse as a shell command line: " + err.Error())
		return
	}
	// stack is the path from f to the node being visited: Walk calls
	// f(nil) once it is done with a node's children.
	var stack []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if s.over {
			return false
		}
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		if len(stack) > maxShellNesting {
			s.over = true
			s.blind(fmt.Sprintf("it is nested more than %d deep", maxShellNesting))
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			s.call(n, stack, depth)
		case *syntax.DeclClause, *syntax.LetClause, *syntax.TestClause, *syntax.ArithmCmd:
			// export, declare, let, [[ ]], (( )): commands too (they set
			// variables a later command may run on).
			s.add(s.text(n.(syntax.Command), stack))
		}
		return true
	})
}

// text prints cmd back with its statement's redirections and those of
// the statements around it, up to the substitution it is in (a compound
// command's redirections apply to every command in it).
func (s *splitter) text(cmd syntax.Command, stack []syntax.Node) string {
	st := &syntax.Stmt{Cmd: cmd}
outer:
	for i := len(stack) - 2; i >= 0; i-- {
		switch a := stack[i].(type) {
		case *syntax.Stmt:
			st.Redirs = append(st.Redirs, a.Redirs...)
		case *syntax.CmdSubst, *syntax.ProcSubst:
			break outer
		}
	}
	var b strings.Builder
	if err := s.printer.Print(&b, st); err != nil {
		s.blind("it does not print back: " + err.Error())
	}
	s.count(b.Len())
	return strings.TrimSpace(b.String())
}

func (s *splitter) word(w *syntax.Word) string {
	var b strings.Builder
	s.printer.Print(&b, w)
	s.count(b.Len())
	return b.String()
}

// count adds n bytes printed back; past maxShellPrinted the walk stops.
func (s *splitter) count(n int) {
	if s.printed += n; s.printed > maxShellPrinted && !s.over {
		s.over = true
		s.blind(fmt.Sprintf("its commands printed back pass %d bytes (substitutions nested too deep)", maxShellPrinted))
	}
}

// call adds c, and the simple commands of the shell strings it runs.
func (s *splitter) call(c *syntax.CallExpr, stack []syntax.Node, depth int) {
	text := s.text(c, stack)
	if len(c.Args) == 0 {
		s.add(text) // assignments only; their substitutions are walked
		return
	}
	args := make([]string, len(c.Args))
	lit := make([]bool, len(c.Args))
	words := make([]string, len(c.Args))
	for i, w := range c.Args {
		args[i], lit[i] = literal(w)
		if words[i] = args[i]; !lit[i] {
			words[i] = s.word(w)
		}
	}
	if s.over {
		return
	}
	bare := bareForms(words)
	// The command a wrapper runs (env, sudo, timeout, nice...) is matched
	// by denials as itself too: env sudo rm and timeout 5 sudo rm are
	// sudo rm to "sudo *". Allows are not: "npm test*" does not approve
	// env X=1 npm test.
	for w, l := unwrap(words, lit); len(w) > 0; w, l = unwrap(w, l) {
		bare = append(bare, bareForms(w)...)
	}
	s.add(text, bare...)
	if !lit[0] {
		s.blind(fmt.Sprintf("the command name %s is an expansion", short(s.word(c.Args[0]))))
		return
	}
	// eval, also as builtin eval or command eval.
	i := 0
	for i < len(args)-1 && lit[i] && (args[i] == "builtin" || args[i] == "command") {
		i++
	}
	if lit[i] && args[i] == "eval" {
		for j := i + 1; j < len(args); j++ {
			if !lit[j] {
				s.blind("eval runs a string built from expansions: " + short(text))
				return
			}
		}
		s.split(strings.Join(args[i+1:], " "), depth+1)
		return
	}
	// A shell given -c, wherever it is in the arguments: sh -c, but also
	// sudo sh -c, env X=1 bash -c, xargs sh -c, find -exec sh -c. A word
	// that only looks like one (echo sh -c x) is parsed too: stricter,
	// never looser.
	for j := range args {
		if !lit[j] || !shellNames[path.Base(args[j])] {
			continue
		}
		k, cmode := j+1, false
	options:
		for ; k < len(args) && lit[k]; k++ {
			a := args[k]
			switch {
			case a == "--":
				k++
				break options
			case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
				k++ // takes the next word
			case strings.HasPrefix(a, "--"):
			case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
				if a[0] == '-' && strings.ContainsRune(a, 'c') {
					cmode = true
				}
			default:
				break options
			}
		}
		if !cmode || k >= len(args) {
			continue
		}
		if !lit[k] {
			s.blind(fmt.Sprintf("%s -c runs a string built from expansions: %s", args[j], short(s.word(c.Args[k]))))
			return
		}
		s.split(args[k], depth+1)
	}
}

// literal is w's value if it is the same whatever the environment: only
// plain and quoted text, no parameter, command, arithmetic or process
// substitution, and none of the characters of globs, brace expansion
// and tilde outside quotes.
func literal(w *syntax.Word) (string, bool) {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[{~") {
				return "", false
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	// Fields removes the quotes (and an unquoted backslash) of a word
	// with nothing left to expand: one field.
	vs, err := expand.Fields(nil, w)
	if err != nil || len(vs) != 1 {
		return "", false
	}
	return vs[0], true
}

// bareForms are words joined, and again with the command name's
// directory dropped when it has one.
func bareForms(words []string) []string {
	forms := []string{strings.Join(words, " ")}
	if base := path.Base(words[0]); base != words[0] {
		forms = append(forms, base+" "+strings.Join(words[1:], " "))
	}
	return forms
}

// wrapper is how a command that runs another is written: its options
// (and which take the next word as their value), then for env NAME=VALUE
// words, then positional words before the command (timeout's duration).
type wrapper struct {
	valued     map[string]bool
	assigns    bool
	positional int
}

// wrappers are the commands that run the command after their own words,
// as denials see through them.
var wrappers = map[string]wrapper{
	"env":     {valued: map[string]bool{"-u": true, "--unset": true, "-C": true, "--chdir": true}, assigns: true},
	"sudo":    {valued: map[string]bool{"-u": true, "-g": true, "-C": true, "-D": true, "-h": true, "-p": true, "-r": true, "-t": true, "-T": true, "-U": true, "--user": true, "--group": true, "--chdir": true, "--prompt": true}},
	"doas":    {valued: map[string]bool{"-u": true, "-C": true}},
	"timeout": {valued: map[string]bool{"-s": true, "--signal": true, "-k": true, "--kill-after": true}, positional: 1},
	"nice":    {valued: map[string]bool{"-n": true, "--adjustment": true}},
	"ionice":  {valued: map[string]bool{"-c": true, "--class": true, "-n": true, "--classdata": true}},
	"stdbuf":  {valued: map[string]bool{"-i": true, "-o": true, "-e": true}},
	"nohup":   {},
	"setsid":  {},
	"time":    {},
	"command": {},
	"builtin": {},
	"exec":    {valued: map[string]bool{"-a": true}},
}

// unwrap is the command a wrapper runs, with its words' literal flags, or
// nothing when words[0] is no wrapper or a word on the way is not literal.
func unwrap(words []string, lit []bool) ([]string, []bool) {
	if len(words) == 0 || !lit[0] {
		return nil, nil
	}
	w, ok := wrappers[path.Base(words[0])]
	if !ok {
		return nil, nil
	}
	i := 1
options:
	for i < len(words) {
		if !lit[i] {
			return nil, nil
		}
		a := words[i]
		switch {
		case a == "--":
			i++
			break options
		case w.valued[a]:
			i += 2
		case len(a) > 1 && a[0] == '-':
			i++
		case w.assigns && strings.Contains(a, "="):
			i++
		default:
			break options
		}
	}
	i += w.positional
	if i >= len(words) {
		return nil, nil
	}
	return words[i:], lit[i:]
}
