package runtime

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/leaks"
)

// LeakAction is Policy.Leaks: what hutch does with a secret found in a
// command's output or in a file the file door reads. Under every action
// but LeaksOff, a command whose arguments or environment hold a secret is
// refused before anything starts (a *LeakError).
type LeakAction string

const (
	// LeaksReport (the default) lists each secret found in
	// Result.Leaks (rule, stream, offset; never the secret itself) and
	// passes the output on as it is.
	LeaksReport LeakAction = "report"
	// LeaksRedact also replaces each secret, in whatever encoding it was
	// found, by [REDACTED:rule] in the output the caller receives, and in
	// the text ReadFile returns (a binary file holding one is refused).
	LeaksRedact LeakAction = "redact"
	// LeaksKill redacts as LeaksRedact does and kills the command at the
	// first secret (KilledLeak); ReadFile refuses a file holding one.
	LeaksKill LeakAction = "kill"
	// LeaksOff scans nothing.
	LeaksOff LeakAction = "off"
)

// KilledLeak: the command printed a secret under LeaksKill.
const KilledLeak KillReason = "secret leak"

// ErrLeak is matched (errors.Is) by a *LeakError.
var ErrLeak = errors.New("holds a secret")

// LeakError refuses a command, a policy or a file read that holds a
// secret: Where names what held it ("Cmd.Args[2]",
// "Cmd.Env[GITHUB_TOKEN]", "Policy.Env[NAME]" from New, or "ReadFile
// PATH"), Rule the kind of secret (a rule of package leaks, or
// leaks.HostValue and Name for a value the host registered). It never
// holds the secret.
type LeakError struct {
	Where    string
	Rule     string
	Name     string
	Encoding leaks.Encoding
}

// Error implements error.
func (e *LeakError) Error() string {
	return fmt.Sprintf("hutch: %s holds a secret (%s): refused (Policy.Leaks off allows it)", e.Where, e.What())
}

// What says which secret it was, in words: "rule github", "the value of
// the host's OPENAI_API_KEY, base64-encoded".
func (e *LeakError) What() string {
	what := "rule " + e.Rule
	if e.Rule == leaks.HostValue {
		what = "the value of the host's " + e.Name
	}
	if e.Encoding != leaks.Raw {
		what += ", " + string(e.Encoding) + "-encoded"
	}
	return what
}

// Is makes a LeakError match ErrLeak (errors.Is).
func (e *LeakError) Is(target error) bool { return target == ErrLeak }

// Leak is a secret found in a command's output or a file read: where
// (Stream: "stdout", "stderr", "output" when both went to one writer, or
// "file"), and the Finding: the rule, the offset and length in the bytes
// the caller received (for a redacted secret, where its marker stands),
// and the encoding. Never the secret.
type Leak struct {
	Stream string `json:"stream"`
	leaks.Finding
}

// maxLeaks bounds Result.Leaks: a command printing secrets in a loop must
// not grow the Result without bound. LeaksDropped counts the rest.
const maxLeaks = 256

// leakValueMin is the shortest Policy.LeakValues value: shorter ones
// would be found in ordinary text.
const leakValueMin = 8

// resolveLeaks checks Leaks and LeakValues and builds the scanner every
// command's arguments, environment and output go through: package leaks'
// rules, the host's environment variables named like secrets, and
// LeakValues. nil for LeaksOff.
func resolveLeaks(p *Policy) (*leaks.Scanner, error) {
	switch p.Leaks {
	case "":
		p.Leaks = LeaksReport
	case LeaksReport, LeaksRedact, LeaksKill, LeaksOff:
	default:
		return nil, &PolicyError{Field: "Leaks", Value: string(p.Leaks), Reason: "not report, redact, kill or off"}
	}
	names := slices.Sorted(maps.Keys(p.LeakValues))
	for _, name := range names {
		switch v := p.LeakValues[name]; {
		case name == "":
			return nil, &PolicyError{Field: "LeakValues", Reason: "a value with an empty name"}
		case len(v) < leakValueMin:
			return nil, &PolicyError{Field: "LeakValues[" + name + "]", Reason: fmt.Sprintf("shorter than %d bytes: it would be found in ordinary text", leakValueMin)}
		}
	}
	if p.Leaks == LeaksOff {
		return nil, nil
	}
	s := leaks.New(nil)
	s.AddEnv(os.Environ())
	for _, name := range names {
		s.AddValue(name, p.LeakValues[name])
	}
	// The policy's own environment goes to every command: a secret there
	// is refused once, here, not at every Start.
	if err := checkLeaksIn(s, "Policy.Env", nil, p.Env); err != nil {
		return nil, err
	}
	return s, nil
}

// checkLeaksIn refuses a command whose arguments or environment hold a
// secret, naming the first: Cmd.Args[i], or envField[KEY].
func checkLeaksIn(s *leaks.Scanner, envField string, args, env []string) error {
	if s == nil {
		return nil
	}
	first := func(where, text string) error {
		if fs := s.Scan([]byte(text)); len(fs) > 0 {
			return &LeakError{Where: where, Rule: fs[0].Rule, Name: fs[0].Name, Encoding: fs[0].Encoding}
		}
		return nil
	}
	for i, a := range args {
		if err := first(fmt.Sprintf("Cmd.Args[%d]", i), a); err != nil {
			return err
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if err := first(envField+"["+k+"]", v); err != nil {
			return err
		}
	}
	return nil
}

// leakLog gathers a command's leaks from its output streams.
type leakLog struct {
	mu      sync.Mutex
	leaks   []Leak
	dropped int
}

func (l *leakLog) add(stream string, f leaks.Finding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.leaks) >= maxLeaks {
		l.dropped++
		return
	}
	l.leaks = append(l.leaks, Leak{Stream: stream, Finding: f})
}

// result is what goes into a Result: the leaks in the order found, and
// how many more there were.
func (l *leakLog) result() ([]Leak, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.leaks), l.dropped
}

// leakStage puts the scanner between a command's output stream and w
// (its destination, behind the output limit) as action says; found hears
// of each secret once it is settled. finish is called at the stream's
// end: it passes on what a redactor held back (a secret cut by a write
// boundary must be seen whole before any of it is passed on) and scans
// the end of the stream. held, under LeaksKill, says whether what is
// held back holds a secret already: a command that prints one and then
// waits must not wait with it.
func leakStage(s *leaks.Scanner, action LeakAction, w io.Writer, found func(leaks.Finding)) (out io.Writer, finish func() error, held func() bool) {
	switch {
	case s == nil || action == LeaksOff:
		return w, func() error { return nil }, nil
	case action == LeaksReport:
		// The output is passed on as it is: the scan runs behind it.
		st := newScanBehind(s.Stream(found))
		return io.MultiWriter(w, st), st.Close, nil
	}
	r := s.Redactor(w, found)
	if action == LeaksKill {
		held = r.Held
	}
	return r, r.Close, held
}

// sameWriter says a and b are one writer: as with os/exec, the command
// then gets one pipe for both streams.
func sameWriter(a, b io.Writer) bool {
	if a == nil || b == nil {
		return false
	}
	defer func() { _ = recover() }() // uncomparable writer types
	return a == b
}

// scanRead applies the policy's leak action to what ReadFile read: the
// secrets found go into c.Leaks; under LeaksRedact a text's are replaced,
// and a binary file or image holding one is refused, as LeaksKill
// refuses any.
func scanRead(s *leaks.Scanner, action LeakAction, path string, c *FileContent) error {
	if s == nil || action == LeaksOff {
		return nil
	}
	fs := s.Scan(c.Data)
	if len(fs) == 0 {
		return nil
	}
	refuse := &LeakError{Where: "ReadFile " + path, Rule: fs[0].Rule, Name: fs[0].Name, Encoding: fs[0].Encoding}
	switch {
	case action == LeaksKill, action == LeaksRedact && c.Kind != ContentText:
		return refuse
	case action == LeaksRedact:
		var out strings.Builder
		fs = nil
		r := s.Redactor(&out, func(f leaks.Finding) { fs = append(fs, f) })
		r.Write(c.Data)
		r.Close()
		c.Data = []byte(out.String())
	}
	for _, f := range fs {
		c.Leaks = append(c.Leaks, Leak{Stream: "file", Finding: f})
	}
	return nil
}
