package policyfile

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/hutchbox/hutch/internal/smallfile"
	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

//go:embed default.toml
var defaultTOML []byte

// Version is the schema version files carry (version = 1).
const Version = 1

// settings are the keys of [sandbox] and of each [profiles.NAME], each
// nil when the file leaves it out.
type settings struct {
	Mode            *string    `toml:"mode"`
	Writable        *[]string  `toml:"writable"`
	ReadOnly        *[]string  `toml:"read_only"`
	Deny            *[]string  `toml:"deny"`
	Reads           *string    `toml:"reads"`
	Read            *[]string  `toml:"read"`
	Root            *string    `toml:"root"`
	Binds           *[]string  `toml:"binds"`
	DenyNames       *[]string  `toml:"deny_names"`
	DefaultDeny     *bool      `toml:"default_deny"`
	AllowGitWrite   *bool      `toml:"allow_git_write"`
	AllowNested     *bool      `toml:"allow_nested"`
	AllowSystem     *[]string  `toml:"allow_system_write"`
	Env             *[]string  `toml:"env"`
	Home            *string    `toml:"home"`
	Tools           *string    `toml:"tools"`
	Apps            *apps      `toml:"apps"`
	Network         *string    `toml:"network"`
	AllowDomains    *[]string  `toml:"allow_domains"`
	PackageManagers *[]string  `toml:"package_managers"`
	AllowLocal      *[]string  `toml:"allow_local"`
	Leaks           *string    `toml:"leaks"`
	Denials         *string    `toml:"denials"`
	Explain         *bool      `toml:"explain"`
	Timeout         *any       `toml:"timeout"`
	OutputLimit     *any       `toml:"output_limit"`
	Memory          *any       `toml:"memory"`
	Pids            *any       `toml:"pids"`
	CPUs            *any       `toml:"cpus"`
	TmpSize         *any       `toml:"tmp_size"`
	FileSize        *any       `toml:"file_size"`
	Seccomp         *string    `toml:"seccomp"`
	SeccompAllow    *[]string  `toml:"seccomp_allow"`
	SeccompDeny     *[]string  `toml:"seccomp_deny"`
	AllowDegraded   *[]string  `toml:"allow_degraded"`
	SkipLayers      *[]string  `toml:"skip_layers"`
	MinLevel        *string    `toml:"min_level"`
	Backend         *string    `toml:"backend"`
	Prewarm         *int       `toml:"prewarm"`
	Grantable       *grantable `toml:"grantable"`
}

// grantable is [sandbox.grantable]: runtime.Grant, whole.
type grantable struct {
	Network         bool     `toml:"network"`
	Domains         []string `toml:"domains"`
	PackageManagers []string `toml:"package_managers"`
	HostNetwork     bool     `toml:"host_network"`
	Writable        []string `toml:"writable"`
	GitWrite        bool     `toml:"git_write"`
}

type apps struct {
	Dir string `toml:"dir"`
	ID  string `toml:"id"`
}

type document struct {
	Version  *int                `toml:"version"`
	Sandbox  settings            `toml:"sandbox"`
	Profiles map[string]settings `toml:"profiles"`
}

// File is a parsed policy file.
type File struct {
	// Name is where it was read from (Default's is "default.toml").
	Name string
	doc  document
	// lines are the line of each key, by dotted path
	// (sandbox.writable, profiles.ci.network), values the values as
	// written.
	lines  map[string]int
	values map[string]string
	// raw is the file's content as read (ReadFileStable compares two).
	raw []byte
}

// Error is a policy file's error: the file, the line (0 when no line is
// to blame), the key, and what is wrong. Err is the library's error
// underneath, if any (a *runtime.PolicyError for errors.As).
type Error struct {
	File   string
	Line   int
	Key    string
	Reason string
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// DefaultTOML is the embedded default policy file's text.
func DefaultTOML() []byte { return slices.Clone(defaultTOML) }

// Default is the embedded default policy file.
func Default() *File {
	f, err := Parse("default.toml", defaultTOML)
	if err != nil {
		panic(err) // a test reads it
	}
	return f
}

// MaxFileSize bounds a policy file: a policy is a few hundred bytes, a
// large one a few KiB.
const MaxFileSize = 1 << 20

// ReadFile reads and parses the policy file at path: a regular file of at
// most MaxFileSize bytes. Anything else (a FIFO, a device, a directory) is
// refused without being read, and without blocking.
func ReadFile(path string) (*File, error) {
	f, err := openNonblocking(path)
	if err != nil {
		return nil, err
	}
	return readOpened(path, f)
}

// ReadFileStable is ReadFile for a file that may be being written: it is
// read twice, a moment apart, and parsed only when both readings are the
// same bytes; otherwise it is refused, and whatever policy is in effect
// stays. A rename into place is the way to change a file at once.
func ReadFileStable(path string) (*File, error) {
	first, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	pause(stableWait)
	second, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(first.raw, second.raw) {
		return nil, fmt.Errorf("%s: changed while it was read (written in place?): not loaded", path)
	}
	return second, nil
}

// stableWait is how long apart ReadFileStable's two readings are.
const stableWait = 50 * time.Millisecond

// pause is time.Sleep; a test puts a write between the two readings.
var pause = time.Sleep

// readOpened reads and parses f, opened at path, and closes it.
func readOpened(path string, f *os.File) (*File, error) {
	defer f.Close()
	b, err := smallfile.Read(f, MaxFileSize, "a policy file")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f2, err := Parse(path, b)
	if f2 != nil {
		f2.raw = b
	}
	return f2, err
}

// Parse parses a policy file's content; name is what errors call it.
// Unknown keys, values of the wrong type and a missing or other version
// are errors naming the line.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Name: name}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.doc); err != nil {
		return nil, f.decodeError(err)
	}
	lines, values, err := keyLines(data)
	if err != nil {
		return nil, f.decodeError(err)
	}
	f.lines, f.values = lines, values
	switch {
	case f.doc.Version == nil:
		return nil, &Error{File: name, Line: 1, Key: "version", Reason: fmt.Sprintf("missing: a policy file starts with version = %d", Version)}
	case *f.doc.Version != Version:
		return nil, f.keyError("version", fmt.Sprintf("%d: this hutch reads version %d", *f.doc.Version, Version), nil)
	}
	return f, nil
}

// decodeError says a TOML error with its file and line.
func (f *File) decodeError(err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		var errs []error
		for _, e := range strict.Errors {
			line, _ := e.Position()
			errs = append(errs, &Error{File: f.Name, Line: line, Key: strings.Join(e.Key(), "."), Reason: "not a key of a policy file"})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		return &Error{File: f.Name, Line: line, Key: strings.Join(de.Key(), "."), Reason: strings.TrimPrefix(de.Error(), "toml: ")}
	}
	return &Error{File: f.Name, Reason: err.Error()}
}

// keyError is an Error on key (a dotted path), at its line.
func (f *File) keyError(key, reason string, err error) *Error {
	return &Error{File: f.Name, Line: f.lines[key], Key: key, Reason: reason, Err: err}
}

// Profiles are the names of the file's [profiles.NAME] tables.
func (f *File) Profiles() []string {
	var names []string
	for n := range f.doc.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Apply sets p's fields from the file's [sandbox] table and then, if
// profile is not "", from [profiles.<profile>]: a key the file names
// replaces the field, lists included; the others stay. Values are read
// here (sizes, durations, names); whether the policy they make holds is
// runtime.New's to say, and Explain names the line of a field it refuses.
func (f *File) Apply(p *runtime.Policy, profile string) error {
	if err := f.apply(p, f.doc.Sandbox, "sandbox"); err != nil {
		return err
	}
	if profile == "" {
		return nil
	}
	s, ok := f.doc.Profiles[profile]
	if !ok {
		have := f.Profiles()
		if len(have) == 0 {
			return &Error{File: f.Name, Key: "profiles." + profile, Reason: "no such profile: the file has none"}
		}
		return &Error{File: f.Name, Key: "profiles." + profile, Reason: "no such profile (the file has " + strings.Join(have, ", ") + ")"}
	}
	return f.apply(p, s, "profiles."+profile)
}

// fields map the Policy's field names (as a *runtime.PolicyError names
// them, before any index) to the keys that set them.
var fields = map[string]string{
	"Writable": "writable", "ReadOnly": "read_only", "Deny": "deny", "Reads": "reads", "Read": "read", "Root": "root", "Binds": "binds", "DenyNames": "deny_names",
	"NoDefaultDeny": "default_deny", "AllowGitWrite": "allow_git_write", "AllowNested": "allow_nested", "AllowSystemWrite": "allow_system_write", "Env": "env", "Home": "home",
	"Tools": "tools", "Apps.Dir": "apps.dir", "Apps.ID": "apps.id", "Apps": "apps",
	"Network": "network", "AllowDomains": "allow_domains", "PackageManagers": "package_managers",
	"AllowLocal": "allow_local", "Leaks": "leaks", "Denials": "denials", "Explain": "explain", "Timeout": "timeout", "OutputLimit": "output_limit", "Memory": "memory",
	"Pids": "pids", "CPUs": "cpus", "TmpSize": "tmp_size", "FileSize": "file_size", "Seccomp": "seccomp",
	"SeccompAllow": "seccomp_allow", "SeccompDeny": "seccomp_deny", "AllowDegraded": "allow_degraded",
	"SkipLayers": "skip_layers", "MinLevel": "min_level", "Backend": "backend", "Prewarm": "prewarm",
	"Unsandboxed": "mode", "Grantable": "grantable", "Grantable.Domains": "grantable.domains", "Grantable.Writable": "grantable.writable",
}

// orEmpty is the value v names, "" when it names def: the default, which
// a Policy says with "".
func orEmpty[T ~string](v string, def T) T {
	if T(v) == def {
		return ""
	}
	return T(v)
}

func (f *File) apply(p *runtime.Policy, s settings, table string) error {
	def := runtime.DefaultPolicy("")
	key := func(k string) string { return table + "." + k }
	list := func(dst *[]string, v *[]string) {
		if v != nil {
			*dst = nilIfEmpty(*v)
		}
	}
	list(&p.Writable, s.Writable)
	list(&p.AllowSystemWrite, s.AllowSystem)
	list(&p.ReadOnly, s.ReadOnly)
	list(&p.Deny, s.Deny)
	list(&p.Read, s.Read)
	list(&p.DenyNames, s.DenyNames)
	list(&p.Env, s.Env)
	list(&p.AllowDomains, s.AllowDomains)
	list(&p.PackageManagers, s.PackageManagers)
	list(&p.AllowLocal, s.AllowLocal)
	list(&p.SeccompAllow, s.SeccompAllow)
	list(&p.SeccompDeny, s.SeccompDeny)
	if s.DefaultDeny != nil {
		p.NoDefaultDeny = !*s.DefaultDeny
	}
	if s.AllowGitWrite != nil {
		p.AllowGitWrite = *s.AllowGitWrite
	}
	if s.AllowNested != nil {
		p.AllowNested = *s.AllowNested
	}
	if s.Root != nil {
		p.Root = *s.Root
	}
	if s.Home != nil {
		p.Home = *s.Home
	}
	if s.Binds != nil {
		p.Binds = nil
		for _, v := range *s.Binds {
			b, err := runtime.ParseBind(v)
			if err != nil {
				return f.keyError(key("binds"), fmt.Sprintf("%q: %v", v, err), err)
			}
			p.Binds = append(p.Binds, b)
		}
	}
	if s.Reads != nil {
		p.Reads = orEmpty(*s.Reads, runtime.ReadsHost)
	}
	if s.Tools != nil {
		p.Tools = *s.Tools
	}
	if s.Apps != nil {
		p.Apps = &runtime.AppIsolation{Dir: s.Apps.Dir, ID: s.Apps.ID}
	}
	if s.Network != nil {
		p.Network = runtime.NetworkMode(*s.Network)
	}
	if s.Leaks != nil {
		p.Leaks = runtime.LeakAction(*s.Leaks)
	}
	if s.Denials != nil {
		p.Denials = orEmpty(*s.Denials, runtime.DenialsRecord)
	}
	if s.Explain != nil {
		p.Explain = *s.Explain
	}
	if s.MinLevel != nil {
		p.MinLevel = runtime.Level(*s.MinLevel)
	}
	if s.Backend != nil {
		p.Backend = runtime.Backend(*s.Backend)
	}
	if s.Prewarm != nil {
		p.Prewarm = *s.Prewarm
	}
	if s.Mode != nil {
		switch *s.Mode {
		case "enabled":
			p.Unsandboxed = false
		case "disabled":
			// Only this: the host program's consent is not a file's.
			p.Unsandboxed = true
		default:
			return f.keyError(key("mode"), fmt.Sprintf("%q: not enabled or disabled", *s.Mode), nil)
		}
	}
	if g := s.Grantable; g != nil {
		p.Grantable = runtime.Grant{Network: g.Network, Domains: nilIfEmpty(g.Domains), PackageManagers: nilIfEmpty(g.PackageManagers),
			HostNetwork: g.HostNetwork, Writable: nilIfEmpty(g.Writable), GitWrite: g.GitWrite}
	}
	if s.AllowDegraded != nil {
		p.AllowDegraded = layers(*s.AllowDegraded)
	}
	if s.SkipLayers != nil {
		p.SkipLayers = layers(*s.SkipLayers)
	}
	if s.Seccomp != nil {
		p.Seccomp = nil
		if *s.Seccomp != "" {
			path := *s.Seccomp
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(f.Name), path)
			}
			prof, err := seccomp.ParseFile(path)
			if err != nil {
				return f.keyError(key("seccomp"), err.Error(), err)
			}
			p.Seccomp = prof
		}
	}
	for _, l := range []struct {
		k   string
		v   *any
		dst *int64
		def int64
	}{
		{"output_limit", s.OutputLimit, &p.OutputLimit, def.OutputLimit},
		{"memory", s.Memory, &p.Memory, def.Memory},
		{"tmp_size", s.TmpSize, &p.TmpSize, def.TmpSize},
		{"file_size", s.FileSize, &p.FileSize, def.FileSize},
	} {
		if l.v == nil {
			continue
		}
		n, err := size(*l.v, l.def)
		if err != nil {
			return f.keyError(key(l.k), err.Error(), nil)
		}
		*l.dst = n
	}
	if s.Pids != nil {
		n, err := count(*s.Pids, def.Pids)
		if err != nil {
			return f.keyError(key("pids"), err.Error(), nil)
		}
		p.Pids = n
	}
	if s.CPUs != nil {
		c, err := cores(*s.CPUs, def.CPUs)
		if err != nil {
			return f.keyError(key("cpus"), err.Error(), nil)
		}
		p.CPUs = c
	}
	if s.Timeout != nil {
		d, err := duration(*s.Timeout, def.Timeout)
		if err != nil {
			return f.keyError(key("timeout"), err.Error(), nil)
		}
		p.Timeout = d
	}
	return nil
}

func nilIfEmpty(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

func layers(names []string) []runtime.Layer {
	if len(names) == 0 {
		return nil
	}
	ls := make([]runtime.Layer, len(names))
	for i, n := range names {
		ls[i] = runtime.Layer(n)
	}
	return ls
}

// A limit is "none", "default", or a value of its own kind; 0 is refused
// as ambiguous (the CLI's none, the library's default). keyword reads
// the two words.
func keyword[T int64 | float64 | time.Duration](v any, def T) (T, bool) {
	switch s, _ := v.(string); strings.TrimSpace(s) {
	case "none":
		return runtime.Unlimited, true
	case "default":
		return def, true
	}
	return 0, false
}

const zeroLimit = `0 is ambiguous here: write "none" or "default"`

func size(v any, def int64) (int64, error) {
	if n, ok := keyword(v, def); ok {
		return n, nil
	}
	switch v := v.(type) {
	case string:
		n, err := units.ParseSize(v)
		if err == nil && n == 0 {
			return 0, errors.New(zeroLimit)
		}
		return n, err
	case int64:
		if v == 0 {
			return 0, errors.New(zeroLimit)
		}
		if v < 0 {
			return 0, fmt.Errorf("%d: negative (\"none\" means no limit)", v)
		}
		return v, nil
	}
	return 0, fmt.Errorf("%v: not a size (\"512MiB\", a number of bytes, \"none\" or \"default\")", v)
}

func count(v any, def int64) (int64, error) {
	if n, ok := keyword(v, def); ok {
		return n, nil
	}
	n, ok := v.(int64)
	switch {
	case !ok:
		return 0, fmt.Errorf("%v: not a whole number (or \"none\", \"default\")", v)
	case n == 0:
		return 0, errors.New(zeroLimit)
	case n < 0:
		return 0, fmt.Errorf("%d: negative (\"none\" means no limit)", n)
	}
	return n, nil
}

func cores(v any, def float64) (float64, error) {
	if c, ok := keyword(v, def); ok {
		return c, nil
	}
	var c float64
	switch v := v.(type) {
	case float64:
		c = v
	case int64:
		c = float64(v)
	default:
		return 0, fmt.Errorf("%v: not a number of cores (1.5, or \"none\", \"default\")", v)
	}
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0):
		return 0, fmt.Errorf("%v: not a number of cores", c)
	case c == 0:
		return 0, errors.New(zeroLimit)
	case c < 0:
		return 0, fmt.Errorf("%v: negative (\"none\" means no limit)", c)
	}
	return c, nil
}

func duration(v any, def time.Duration) (time.Duration, error) {
	if d, ok := keyword(v, def); ok {
		return d, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%v: not a duration (\"30s\", \"5m\", or \"none\", \"default\")", v)
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q: not a duration (\"30s\", \"5m\", or \"none\", \"default\")", s)
	case d == 0:
		return 0, errors.New(zeroLimit)
	case d < 0:
		return 0, fmt.Errorf("%q: negative (\"none\" means no limit)", s)
	}
	return d, nil
}

// Explain turns an error about a Policy field (a *runtime.PolicyError
// from runtime.New) into an *Error at the line of the key that set the
// field, in the profile's table if the profile set it. An error about a
// field no key of the file set comes back as it was.
func (f *File) Explain(err error, profile string) error {
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	name, _, _ := strings.Cut(pe.Field, "[")
	k, ok := fields[name]
	if !ok {
		return err
	}
	for _, table := range []string{"profiles." + profile, "sandbox"} {
		if table == "profiles." || f.lines[table+"."+k] == 0 {
			continue
		}
		// The value as the file has it (memory = "1k", not 1024), but
		// for one entry of a list, which the library names.
		v := f.values[table+"."+k]
		if strings.HasPrefix(v, "[") || v == "" {
			v = strconv.Quote(pe.Value)
		}
		return f.keyError(table+"."+k, v+": "+pe.Reason, err)
	}
	return err
}

// Policy is the policy of the embedded default, then each of files in
// order, each with its [sandbox] table and then the profile's table if
// it has one, for workspace. profile must name a table of at least one
// of files. Errors name the file and the line.
func Policy(workspace, profile string, files ...*File) (runtime.Policy, error) {
	p := runtime.Policy{Workspace: workspace}
	found := profile == ""
	for _, f := range append([]*File{Default()}, files...) {
		prof := ""
		if _, ok := f.doc.Profiles[profile]; ok {
			prof, found = profile, true
		}
		if err := f.Apply(&p, prof); err != nil {
			return p, err
		}
	}
	if !found {
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
		}
		return p, &Error{File: strings.Join(names, ", "), Key: "profiles." + profile, Reason: "no such profile"}
	}
	return p, nil
}
