package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/runtime"
)

// typed is a flag kept as the user typed it, so that an error can quote
// it back; kind is what --help shows it takes.
type typed struct {
	s    *string
	kind string
}

func (t typed) String() string     { return *t.s }
func (t typed) Set(v string) error { *t.s = v; return nil }
func (t typed) Type() string       { return t.kind }

// repeated is a repeatable flag, each use one value (pflag's stringArray).
// It is pflag's own but for its default's rendering, which goes through an
// encoding/csv writer per flag: with run's flags on every command that
// takes them, hutch paid for that at every start, whatever it ran.
type repeated struct{ list *[]string }

func (r repeated) Set(v string) error { *r.list = append(*r.list, v); return nil }
func (r repeated) Type() string       { return "stringArray" }

// String is "" while the list is empty: --help shows no default then.
func (r repeated) String() string {
	if len(*r.list) == 0 {
		return ""
	}
	return "[" + strings.Join(*r.list, ",") + "]"
}

// flagErr is a flag's value refused: the CLI's word for a PolicyError.
type flagErr struct {
	flag, value, reason string
}

func (e *flagErr) Error() string {
	return e.flag + " " + quote(e.value) + ": " + e.reason
}

// quote shows a value as typed, quoted (and its control characters
// escaped, once) only when it would not read back as one word.
func quote(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune("\"'\\`$;&|<>(){}", r)
	}) {
		return strconv.Quote(v)
	}
	return v
}

// limits sets p's limits from the flags. On the command line every limit
// has one rule, 0 means none, so 0 becomes the library's Unlimited (a 0
// there would be its default); an unset flag keeps DefaultPolicy's value.
// Negative values are refused here: the library reads -1 as Unlimited.
// The ranges are the library's to check, and flagError names the flag.
func (f runFlags) limits(p *runtime.Policy) error {
	for _, s := range []struct {
		flag, v string
		dst     *int64
	}{
		{"--output-limit", f.outputLimit, &p.OutputLimit},
		{"--memory", f.memory, &p.Memory},
		{"--tmp-size", f.tmpSize, &p.TmpSize},
	} {
		if s.v == "" || !f.given(s.flag[2:], s.v) {
			continue
		}
		n, err := units.ParseSize(s.v)
		if err != nil {
			return &flagErr{s.flag, s.v, err.Error()}
		}
		*s.dst = orUnlimited(n)
	}
	if f.pids != "" && f.given("pids", f.pids) {
		n, err := strconv.ParseInt(strings.TrimSpace(f.pids), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return &flagErr{"--pids", f.pids, "out of range"}
		case err != nil:
			return &flagErr{"--pids", f.pids, "not a whole number of processes"}
		case n < 0:
			return &flagErr{"--pids", f.pids, "negative (0 means no limit)"}
		}
		p.Pids = orUnlimited(n)
	}
	if f.cpus != "" && f.given("cpus", f.cpus) {
		c, err := strconv.ParseFloat(strings.TrimSpace(f.cpus), 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(c), math.IsInf(c, 0):
			return &flagErr{"--cpus", f.cpus, "not a number of cores (1.5, 0.5)"}
		case c < 0:
			return &flagErr{"--cpus", f.cpus, "negative (0 means no limit)"}
		}
		p.CPUs = orUnlimited(c)
	}
	if f.timeout != "" && f.given("timeout", f.timeout) {
		d, err := time.ParseDuration(strings.TrimSpace(f.timeout))
		switch {
		case err != nil:
			return &flagErr{"--timeout", f.timeout, "not a duration (30s, 5m, 1h30m)"}
		case d < 0:
			return &flagErr{"--timeout", f.timeout, "negative (0 means none)"}
		}
		p.Timeout = orUnlimited(d)
	}
	return nil
}

// gracePeriod is --kill-after: the command's grace between SIGTERM and
// the SIGKILL of its sandbox, which must be some time (0 would be the
// library's default, not none).
func (f runFlags) gracePeriod() (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(f.killAfter))
	switch {
	case err != nil:
		return 0, &flagErr{"--kill-after", f.killAfter, "not a duration (5s, 500ms, 1m)"}
	case d <= 0:
		return 0, &flagErr{"--kill-after", f.killAfter, "not a positive duration (the command's grace before SIGKILL)"}
	}
	return d, nil
}

// orUnlimited is a limit flag's value for the library: 0, none on the
// command line, is its Unlimited.
func orUnlimited[T int64 | float64 | time.Duration](v T) T {
	if v == 0 {
		return runtime.Unlimited
	}
	return v
}

// typedFlag is the flag that sets a Policy field and what the user typed
// for it: one value, or the values of a repeatable flag, which the field's
// index ([2]) picks from.
type typedFlag struct {
	name string
	one  *string // nil for a repeatable flag
	list []string
}

// byField maps the Policy fields the flags set to the flags, for errors.
func (f runFlags) byField() map[string]typedFlag {
	return map[string]typedFlag{
		"Workspace":        {name: "--workspace", one: &f.workspace},
		"Worktree":         {name: "--worktree", one: &f.worktree},
		"Writable":         {name: "--write", list: f.write},
		"AllowSystemWrite": {name: "--allow-system-write", list: f.allowSystem},
		"Deny":             {name: "--deny", list: f.deny},
		"Reads":            {name: "--reads", one: &f.reads},
		"Read":             {name: "--read", list: f.read},
		"Root":             {name: f.rootFlag(), one: f.rootValue()},
		"Binds":            {name: "--bind", list: f.binds},
		"DenyNames":        {name: "--deny-name", list: f.denyNames},
		"Env":              {name: "--env", list: f.env},
		"Seccomp":          {name: "--seccomp", one: &f.seccomp},
		"Home":             {name: "--home", one: &f.home},
		"ReadOnly":         {name: "--read-only", list: f.readOnly},
		"Apps.Dir":         {name: "--apps-dir", one: &f.appsDir},
		"Apps.ID":          {name: "--app", one: &f.app},

		"Timeout":     {name: "--timeout", one: &f.timeout},
		"OutputLimit": {name: "--output-limit", one: &f.outputLimit},
		"Memory":      {name: "--memory", one: &f.memory},
		"Pids":        {name: "--pids", one: &f.pids},
		"CPUs":        {name: "--cpus", one: &f.cpus},
		"TmpSize":     {name: "--tmp-size", one: &f.tmpSize},

		"Network":         {name: "--net", one: &f.network},
		"AllowDomains":    {name: "--allow-domain", list: f.allowDomain},
		"PackageManagers": {name: "--package-managers", list: f.packageMgrs},
		"AllowLocal":      {name: "--allow-local", list: f.allowLocal},
		"Publish":         {name: "--publish", list: f.publish},
		"Reach":           {name: "--reach", list: f.reach},
		"MinLevel":        {name: "--min-level", one: &f.minLevel},
		"Leaks":           {name: "--leaks", one: &f.leaks},
		"Denials":         {name: "--denials", one: &f.denials},
		"Backend":         {name: "--backend", one: &f.backend},
	}
}

// flagError says an error about a Policy field in the command line's
// words: the flag and the value as the user typed it (--memory 1k, not
// Memory "1024"). Too many matches of the deny names say what to do with
// the flags.
func (f runFlags) flagError(err error) error {
	var be *runtime.BackendError
	if errors.As(err, &be) && f.given("backend", f.backend) {
		return &flagErr{"--backend", f.backend, be.Reason}
	}
	var leak *runtime.LeakError
	if errors.As(err, &leak) {
		return errors.New(leakMessage(leak))
	}
	var le *runtime.MaskLimitError
	if errors.As(err, &le) {
		return errors.New(le.Cause() + "; remove them, or run with --no-default-deny and the --deny-name and --deny to keep")
	}
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	name, index, _ := strings.Cut(pe.Field, "[")
	index, part, _ := strings.Cut(index, "]")
	if name == "Explain" && f.explain {
		off := "--denials off"
		if !f.given("denials", f.denials) {
			off = `the policy's denials = "off"`
		}
		return errors.New("--explain explains the recorded denials, and " + off + " records none")
	}
	flag, ok := f.byField()[name]
	if fromFile, i := f.fromFile(name, index, flag); fromFile {
		return f.layer.file.Explain(err, f.profile)
	} else if i != "" {
		index = i
	}
	if !ok {
		return err
	}
	v := pe.Value
	switch {
	case name == "Unsandboxed" && f.backend == string(runtime.BackendNone):
		return &flagErr{"--backend", f.backend, pe.Reason}
	case name == "Workspace" && f.worktree != "":
		return errors.New("the worktree " + quote(pe.Value) + " (see --worktree): " + pe.Reason)
	case name == "Workspace" && f.workspace == "":
		return errors.New("workspace " + quote(pe.Value) + " (the current directory; see --workspace): " + pe.Reason)
	case name == "Env":
		// A refused variable is named by its key: Env[LD_PRELOAD].
		for _, kv := range f.env {
			if k, _, _ := strings.Cut(kv, "="); index != "" && k == index {
				v = kv
			}
		}
	case flag.one != nil:
		v = *flag.one
	default:
		// An index past the flags' values is one of the defaults.
		if i, err := strconv.Atoi(index); err == nil && i >= 0 && i < len(flag.list) {
			v = flag.list[i]
		}
	}
	reason := pe.Reason
	switch part {
	case ".Host":
		reason = "the host's tree: " + reason
	case ".Path":
		reason = "the sandbox's path: " + reason
	}
	return &flagErr{flag.name, v, reason}
}

// sandboxFrom makes the Sandbox the flags describe, as run does, with its
// errors in the command line's words; adjust sets what no flag of run's
// does (serve's pool).
func sandboxFrom(f runFlags, adjust ...func(*runtime.Policy)) (*runtime.Sandbox, error) {
	return sandboxWith(runtime.New, f, adjust...)
}

// filesSandboxFrom is sandboxFrom for the file commands, which run no
// command: runtime.NewFiles starts no spawn server and keeps no spare.
func filesSandboxFrom(f runFlags) (*runtime.Sandbox, error) {
	return sandboxWith(runtime.NewFiles, f)
}

// sandboxWith is sandboxFrom, the Sandbox made by newSandbox.
func sandboxWith(newSandbox func(runtime.Policy) (*runtime.Sandbox, error), f runFlags, adjust ...func(*runtime.Policy)) (*runtime.Sandbox, error) {
	p, err := policyFrom(f)
	if err != nil {
		return nil, f.flagError(err)
	}
	for _, a := range adjust {
		a(&p)
	}
	sb, err := newSandbox(p)
	if err != nil {
		return nil, f.flagError(err)
	}
	return sb, nil
}

// checkedFrom decides what sandboxFrom's Sandbox would be, and makes
// none (runtime.Check): no spawn server, no init, no cgroup.
func checkedFrom(f runFlags) (*runtime.Resolved, error) {
	p, err := policyFrom(f)
	if err != nil {
		return nil, f.flagError(err)
	}
	r, err := runtime.Check(p)
	if err != nil {
		return nil, f.flagError(err)
	}
	return r, nil
}

// fromFile says whether the field a PolicyError names (name, with index
// for a list) got its value from --policy's file rather than a flag; for
// a list it gives the flag's own index otherwise (the file's entries come
// first).
func (f runFlags) fromFile(name, index string, flag typedFlag) (bool, string) {
	if f.layer == nil || f.layer.file == nil {
		return false, ""
	}
	if flag.one != nil || flag.name == "" {
		return flag.name == "" || !f.given(flag.name[2:], *flag.one), ""
	}
	n := len(listField(f.layer.base, name))
	i, err := strconv.Atoi(index)
	if err != nil {
		return !f.given(flag.name[2:], ""), ""
	}
	if i < n {
		return true, ""
	}
	return false, strconv.Itoa(i - n)
}

// listField is p's list field of that name, for fromFile.
func listField(p runtime.Policy, name string) []string {
	switch name {
	case "Writable":
		return p.Writable
	case "ReadOnly":
		return p.ReadOnly
	case "Deny":
		return p.Deny
	case "DenyNames":
		return p.DenyNames
	case "Env":
		return p.Env
	case "AllowDomains":
		return p.AllowDomains
	case "PackageManagers":
		return p.PackageManagers
	case "AllowLocal":
		return p.AllowLocal
	}
	return nil
}

// setLogger sends the library's records to stderr from the level
// HUTCH_LOG names (debug, info, warn, error; default warn), or debug. The
// CLI says itself, once, what every Result reports (a degraded layer, a
// shared network); the library logs those at Info, below the default.
func setLogger(debug bool) error {
	level := slog.LevelWarn
	if v := os.Getenv("HUTCH_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return &flagErr{"HUTCH_LOG", v, "not a log level (debug, info, warn or error)"}
		}
	}
	if debug {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	return nil
}

// leakMessage says a *runtime.LeakError in the command line's words:
// which argument or --env held the secret, never the secret.
func leakMessage(e *runtime.LeakError) string {
	where, verdict := e.Where, "not run"
	field, index, _ := strings.Cut(where, "[")
	index = strings.TrimSuffix(index, "]")
	switch field {
	case "Cmd.Args":
		where = "argument " + index + " of the command"
		if index == "0" {
			where = "the command's name"
		}
	case "Policy.Env", "Cmd.Env":
		where = "--env " + index
	default:
		if path, ok := strings.CutPrefix(where, "ReadFile "); ok {
			where, verdict = path, "not read"
		}
	}
	return fmt.Sprintf("%s holds a secret (%s): %s (--leaks off allows it)", where, e.What(), verdict)
}

// rootFlag is the flag that set Policy.Root: --image, or --rootfs.
func (f runFlags) rootFlag() string {
	if f.image != "" {
		return "--image"
	}
	return "--rootfs"
}

// rootValue is what the user typed for rootFlag.
func (f runFlags) rootValue() *string {
	if f.image != "" {
		return &f.image
	}
	return &f.rootfs
}
