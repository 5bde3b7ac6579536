package processes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hutchbox/hutch/runtime"
)

// Restart says when a durable process is started again after it ended by
// itself (never after Stop), as systemd's Restart= does.
type Restart string

const (
	// RestartAlways restarts it whatever its exit status: a service.
	RestartAlways Restart = "always"
	// RestartOnFailure restarts it unless it exited with status 0.
	RestartOnFailure Restart = "on-failure"
	// RestartNever lets it end: the record stays, status exited.
	RestartNever Restart = "never"
)

// The defaults of Spec's zero values.
const (
	DefaultRestartDelay    = 2 * time.Second
	DefaultMaxRestartDelay = 60 * time.Second
	DefaultStopGrace       = 10 * time.Second
	DefaultLogMaxBytes     = 8 << 20
	// MinLogMaxBytes is the smallest LogMaxBytes accepted: a page.
	MinLogMaxBytes = 4096
	// StableRun is the least a run must last to end a crash loop, however
	// short MaxRestartDelay is: building a sandbox alone can take a good
	// part of a second on a loaded host.
	StableRun = 10 * time.Second
)

// Spec says which command to keep running, in which sandbox, and how.
type Spec struct {
	// Name is a label for people (the process is known by its ID); it
	// need not be unique.
	Name string `json:"name,omitempty"`
	// Policy is the sandbox the process runs in for its whole life,
	// restarts included, exactly as a command of runtime.New(Policy)
	// would: the same zero-permission default (no network, no write
	// outside the workspace and Writable). Two things differ: the
	// process's output goes to its log, capped by LogMaxBytes, so
	// OutputLimit does not apply; and the manager's data directory is
	// added to Deny, so that no durable process reads another's records
	// or logs. Timeout, if set, ends each run (which Restart may follow).
	// LeakValues are refused: the supervisor reads the policy from the
	// process's record, where secrets are never written.
	Policy runtime.Policy `json:"policy"`
	// Args is the command and its arguments; Args[0] is looked up in the
	// sandbox's PATH as Sandbox.Command does.
	Args []string `json:"args"`
	// Dir is the working directory (default: the workspace); Env is
	// added to the sandbox's environment.
	Dir string   `json:"dir,omitempty"`
	Env []string `json:"env,omitempty"`
	// Restart says whether it is started again when it ends by itself
	// (default RestartAlways).
	Restart Restart `json:"restart"`
	// RestartDelay is the wait before the first restart after a short
	// run; each further restart after a short run waits twice as long,
	// up to MaxRestartDelay. A run that lasted MaxRestartDelay or longer,
	// and StableRun at least, was no crash loop: the next wait is
	// RestartDelay again. Defaults DefaultRestartDelay and
	// DefaultMaxRestartDelay (2 s and 60 s).
	RestartDelay    time.Duration `json:"restart_delay"`
	MaxRestartDelay time.Duration `json:"max_restart_delay"`
	// StopGrace is how long Stop leaves the process between its SIGTERM
	// and the SIGKILL of its whole sandbox (default DefaultStopGrace).
	StopGrace time.Duration `json:"stop_grace"`
	// LogMaxBytes caps process.log: a write that would pass it moves the
	// log to process.log.1 (replacing the one there) and starts a new
	// one, so the log takes at most twice this on disk (default
	// DefaultLogMaxBytes, at least MinLogMaxBytes).
	LogMaxBytes int64 `json:"log_max_bytes"`
}

// withDefaults checks s and fills in its defaults. Errors are
// *runtime.PolicyError naming the Spec field.
// maxName bounds Spec.Name: a label for people.
const maxName = 256

func (s Spec) withDefaults() (Spec, error) {
	bad := func(field, value, reason string) (Spec, error) {
		return Spec{}, &runtime.PolicyError{Field: "Spec." + field, Value: value, Reason: reason}
	}
	switch {
	case len(s.Args) == 0:
		return bad("Args", "[]", "no command given")
	case s.Args[0] == "":
		return bad("Args", `[""]`, "the command is empty")
	case len(s.Name) > maxName:
		return bad("Name", s.Name[:32]+"...", fmt.Sprintf("longer than %d bytes", maxName))
	case !utf8.ValidString(s.Name) || strings.ContainsFunc(s.Name, unicode.IsControl):
		// Names are shown a line each (hutch process list): a newline
		// or an escape sequence in one would forge or hide other lines.
		return bad("Name", s.Name, "holds a control character or invalid UTF-8")
	case len(s.Policy.LeakValues) > 0:
		// The supervisor reads its policy from the process's record,
		// where secrets are never written: it would not scan for them.
		return bad("Policy.LeakValues", fmt.Sprintf("%d values", len(s.Policy.LeakValues)), "not carried to a durable process's supervisor, which reads its policy from disk, where secrets are never written")
	}
	switch s.Restart {
	case "":
		s.Restart = RestartAlways
	case RestartAlways, RestartOnFailure, RestartNever:
	default:
		return bad("Restart", string(s.Restart), "not always, on-failure or never")
	}
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{{"RestartDelay", &s.RestartDelay, DefaultRestartDelay}, {"MaxRestartDelay", &s.MaxRestartDelay, DefaultMaxRestartDelay}, {"StopGrace", &s.StopGrace, DefaultStopGrace}} {
		switch {
		case *d.v < 0:
			return bad(d.field, d.v.String(), "negative")
		case *d.v == 0:
			*d.v = d.def
		case *d.v < time.Millisecond:
			return bad(d.field, d.v.String(), "below a millisecond")
		}
	}
	if s.MaxRestartDelay < s.RestartDelay {
		return bad("MaxRestartDelay", s.MaxRestartDelay.String(), fmt.Sprintf("below the first restart delay (%v)", s.RestartDelay))
	}
	switch {
	case s.LogMaxBytes == 0:
		s.LogMaxBytes = DefaultLogMaxBytes
	case s.LogMaxBytes < MinLogMaxBytes:
		return bad("LogMaxBytes", fmt.Sprint(s.LogMaxBytes), fmt.Sprintf("below %d bytes", MinLogMaxBytes))
	}
	s.Args = slices.Clone(s.Args)
	s.Env = slices.Clone(s.Env)
	return s, nil
}

// stable says a run that lasted d ends a crash loop (see RestartDelay).
func (s Spec) stable(d time.Duration) bool {
	return d >= s.MaxRestartDelay && d >= StableRun
}

// restartDelay is the wait before a restart that follows failures
// consecutive short runs (failures >= 1): base doubled failures-1 times,
// at most max.
func restartDelay(failures int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// wantsRestart says whether a run that ended by itself with status code
// (-1: killed by a signal or never started) is followed by another.
func (r Restart) wantsRestart(code int) bool {
	switch r {
	case RestartAlways:
		return true
	case RestartOnFailure:
		return code != 0
	}
	return false
}

// sandboxDoc is sandbox.json: what the supervisor runs. The policy is the
// decision the manager took (Resolved), carried whole; Spec.Policy is left
// out of the file, so that the policy is written once.
type sandboxDoc struct {
	Spec     Spec              `json:"spec"`
	Resolved *runtime.Resolved `json:"resolved"`
}

func newSandboxDoc(spec Spec, r *runtime.Resolved) sandboxDoc {
	spec.Policy = runtime.Policy{}
	return sandboxDoc{Spec: spec, Resolved: r}
}

// readSandboxDoc reads a sandboxDoc, refusing any field it does not know
// and one without its decision.
func readSandboxDoc(name string) (sandboxDoc, error) {
	var doc sandboxDoc
	f, err := os.Open(name)
	if err != nil {
		return doc, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, err
	}
	if doc.Resolved == nil {
		return doc, errors.New("no resolved policy")
	}
	return doc, nil
}
