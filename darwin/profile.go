// Package darwin owns hutch's macOS backend: a sandbox policy compiled to
// a Seatbelt profile (SBPL) and run through /usr/bin/sandbox-exec. The
// profile denies by default; allows processes, signals and process
// information within the sandbox; reads everywhere but the denied paths
// (the caller's, the user's keychains, privacy database and cookies, and
// the deny names in the writable trees); writes only under the workspace and
// writable paths; the null, zero, random and terminal devices and the
// pseudo-terminals the command makes itself; sysctl reads; the few Mach
// services name lookup needs; and no network, or only the host-side
// proxy's port on localhost.
//
// Paths never appear in the profile's text: each is a parameter
// ((param "WRITABLE_0")) whose value travels in sandbox-exec's -D
// arguments, so no path, whatever its characters, can change the profile.
// The generator is plain Go and is tested on every platform; only running
// it needs macOS.
package darwin

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hutchbox/hutch/mounts"
)

// SandboxExec is the one binary the backend runs, by absolute path: never
// looked up in PATH, which the caller's environment controls.
const SandboxExec = "/usr/bin/sandbox-exec"

// Policy is what the profile enforces. Paths must be absolute; Compile
// canonicalizes them.
type Policy struct {
	// Workspace is the tree commands work in, writable but for DenyNames
	// and ReadOnly.
	Workspace string
	// Writable are further trees commands may write.
	Writable []string
	// ReadOnly are paths inside the writable trees that stay read-only:
	// a repository's .git holds code the user runs on the host.
	ReadOnly []string
	// Pins are directories inside the writable trees that may not be
	// renamed or removed; what they hold stays writable.
	Pins []string
	// Deny are paths commands may neither read nor write, even inside a
	// writable tree.
	Deny []string
	// HomeDir is the user's home directory. Its keychains, privacy (TCC)
	// database and cookies are always denied, so it is required.
	HomeDir string
	// DenyNames are base names or path.Match patterns (".env", ".env.*",
	// "id_*") denied at any depth of the workspace and the writable
	// trees, including ones the command creates, with all they hold when
	// they are directories. Character classes ([a-z]) and \ escapes have
	// no Seatbelt mapping and are refused.
	DenyNames []string
	// AllowPTY lets commands create pseudo-terminals (openpty, script,
	// expect). Only the ones they create can be opened, never another
	// terminal of the user's.
	AllowPTY bool
	// ProxyPort, when not 0, allows outbound TCP to localhost on that
	// port only (the host-side egress proxy); 0 means no network.
	ProxyPort int
	// HostNetwork allows every network operation (Network "host").
	HostNetwork bool
}

// Param is one -D NAME=VALUE of sandbox-exec.
type Param struct{ Name, Value string }

// Profile is a compiled policy: SBPL text with parameter references, and
// the parameters' values.
type Profile struct {
	Text   string
	Params []Param
}

// Args is sandbox-exec's argument list (after argv[0]) for running name
// with args under the profile: -p TEXT, a -D NAME=VALUE per parameter,
// then -- and the command.
func (p Profile) Args(name string, args ...string) []string {
	out := make([]string, 0, 2+2*len(p.Params)+2+len(args))
	out = append(out, "-p", p.Text)
	for _, prm := range p.Params {
		out = append(out, "-D", prm.Name+"="+prm.Value)
	}
	out = append(out, "--", name)
	return append(out, args...)
}

// Canonical is the path as the macOS kernel reports it, which is what
// Seatbelt matches: /tmp, /var and /etc are symlinks into /private, and
// symlinks in the part of the path that exists are resolved.
func Canonical(p string) string { return resolveExisting(privatePath(p)) }

// resolveExisting resolves the symlinks in the longest part of p that
// exists, so that a writable path yet to be made names where it will be.
func resolveExisting(p string) string { return mounts.Resolve(p, "/") }

// privatePath is p cleaned, with /tmp, /var and /etc spelled as their
// targets under /private: the part of Canonical that needs no file system.
func privatePath(p string) string {
	p = filepath.Clean(p)
	for _, top := range []string{"/tmp", "/var", "/etc"} {
		if p == top || strings.HasPrefix(p, top+"/") {
			return "/private" + p
		}
	}
	return p
}

// homeDeny are paths under HomeDir that are always denied, in addition to
// the policy's Deny: the macOS stores of secrets that are not in any
// portable deny-list.
var homeDeny = []string{
	"Library/Keychains",
	"Library/Application Support/com.apple.TCC",
	"Library/Cookies",
}

// machServices are the Mach services commands may look up: what libc's
// user, group and host lookups need, nothing that acts for the user.
var machServices = []string{
	"com.apple.system.opendirectoryd.libinfo", // getpwuid, getgrnam, /etc/hosts lookups
	"com.apple.system.notification_center",    // notify(3): libc hears of time zone and resolver changes
	"com.apple.system.logger",                 // syslog(3)
	"com.apple.SystemConfiguration.configd",   // the resolver and proxy settings libc and curl read
}

// CheckDenyName reports whether name, a DenyNames entry called field, can
// be spelled in a profile.
func CheckDenyName(field, name string) error {
	_, err := nameRegexes(field, name)
	return err
}

// nameRegexes are the regular expressions matching a path whose last
// component, or one of its directories, matches the pattern name: the
// name is spelled in the profile's text (a regex cannot be a parameter),
// so only printable ASCII other than ", \, /, ], ^ and [ gets there,
// and every character but letters and digits is bracketed, which makes it
// literal.
func nameRegexes(field, name string) ([]string, error) {
	var b strings.Builder
	for _, c := range name {
		switch {
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			b.WriteRune(c)
		case c == '[' || c == '\\':
			return nil, &FieldError{Field: field, Value: name, Reason: "character classes and \\ escapes have no Seatbelt mapping"}
		case c < ' ' || c > '~' || c == '"' || c == ']' || c == '^' || c == '/':
			return nil, &FieldError{Field: field, Value: name, Reason: "only printable ASCII other than \", /, ] and ^ can be spelled in a profile"}
		default:
			b.WriteString("[" + string(c) + "]")
		}
	}
	re := "/" + b.String()
	return []string{`#"` + re + `$"`, `#"` + re + `/"`}, nil
}

// Compile turns p into a profile, canonicalizing its paths with Canonical.
func Compile(p Policy) (Profile, error) { return compile(p, Canonical) }

// compile is Compile with the canonicalization given, so that tests can
// compile macOS paths on any host.
func compile(p Policy, canon func(string) string) (Profile, error) {
	var prof Profile
	path := map[string]string{} // reference -> canonical path
	// param checks v and adds it as the parameter kind_i (kind alone when
	// i < 0), returning the reference to it for the profile text.
	param := func(field, kind string, i int, v string) (string, error) {
		if err := checkPath(field, v); err != nil {
			return "", err
		}
		name := kind
		if i >= 0 {
			name += "_" + strconv.Itoa(i)
		}
		ref := `(param "` + name + `")`
		path[ref] = canon(v)
		prof.Params = append(prof.Params, Param{Name: name, Value: path[ref]})
		return ref, nil
	}
	// params adds each of paths as kind_0, kind_1 ...
	params := func(field, kind string, paths []string) ([]string, error) {
		var refs []string
		for i, v := range paths {
			ref, err := param(fmt.Sprintf("%s[%d]", field, i), kind, i, v)
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
		}
		return refs, nil
	}

	ws, err := param("Workspace", "WORKSPACE", -1, p.Workspace)
	if err != nil {
		return Profile{}, err
	}
	writable, err := params("Writable", "WRITABLE", p.Writable)
	if err != nil {
		return Profile{}, err
	}
	readOnly, err := params("ReadOnly", "READONLY", p.ReadOnly)
	if err != nil {
		return Profile{}, err
	}
	deny, err := params("Deny", "DENY", p.Deny)
	if err != nil {
		return Profile{}, err
	}
	pins, err := params("Pins", "PIN", p.Pins)
	if err != nil {
		return Profile{}, err
	}
	if err := checkPath("HomeDir", p.HomeDir); err != nil {
		return Profile{}, err
	}
	home := make([]string, len(homeDeny))
	for i, d := range homeDeny {
		home[i] = filepath.Join(p.HomeDir, d)
	}
	homeRefs, err := params("HomeDir", "HOME_DENY", home)
	if err != nil {
		return Profile{}, err
	}
	deny = append(deny, homeRefs...)
	// Renaming a directory moves all it holds: a denied or read-only path
	// in a writable tree would be open again under its new name. So no
	// directory on the way to one, in a writable tree, may be renamed.
	var trees, ancestors []string
	for _, r := range append([]string{ws}, writable...) {
		trees = append(trees, path[r])
	}
	for _, r := range append(append(slices.Clone(readOnly), deny...), pins...) {
		first := filepath.Dir(path[r])
		if slices.Contains(pins, r) {
			first = path[r]
		}
		for a := first; a != "/"; a = filepath.Dir(a) {
			if !slices.Contains(ancestors, a) && slices.ContainsFunc(trees, func(t string) bool { return within(a, t) }) {
				ancestors = append(ancestors, a)
			}
		}
	}
	ancestorRefs, err := params("Deny", "ANCESTOR", ancestors)
	if err != nil {
		return Profile{}, err
	}
	var names []string
	for i, n := range p.DenyNames {
		res, err := nameRegexes(fmt.Sprintf("DenyNames[%d]", i), n)
		if err != nil {
			return Profile{}, err
		}
		names = append(names, res...)
	}
	switch {
	case p.ProxyPort < 0 || p.ProxyPort > 65535:
		return Profile{}, &FieldError{Field: "ProxyPort", Value: strconv.Itoa(p.ProxyPort), Reason: "not a port"}
	case p.ProxyPort != 0 && p.HostNetwork:
		return Profile{}, &FieldError{Field: "ProxyPort", Value: strconv.Itoa(p.ProxyPort), Reason: "set with HostNetwork, which allows everything"}
	}

	var b strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	w("(version 1)",
		"(deny default)",
		"",
		"; Processes: run programs, fork, and signal or inspect only each other.",
		"(allow process-exec)",
		"(allow process-fork)",
		"(allow signal (target same-sandbox))",
		"(allow process-info* (target same-sandbox))",
		"",
		"; Reading: everywhere; the denials at the end take back what they name",
		"; (of the rules that match, Seatbelt applies the last).",
		"(allow file-read*)",
		"",
		"; Writing: the workspace and the writable trees only.",
		"(allow file-write*",
		"  (subpath "+ws+")")
	for _, x := range writable {
		w("  (subpath " + x + ")")
	}
	w(")")
	if len(readOnly) > 0 {
		w("; Read-only inside them: code there runs on the host later.")
		for _, x := range readOnly {
			w("(deny file-write* (subpath " + x + "))")
		}
	}
	w("",
		"; Devices: the harmless ones. Opening /dev/fd/N, /dev/stdout or /dev/stderr",
		"; duplicates a descriptor the command already holds.",
		`(allow file-read* file-write* (literal "/dev/null") (literal "/dev/zero") (literal "/dev/random") (literal "/dev/urandom") (literal "/dev/stdout") (literal "/dev/stderr") (regex #"^/dev/fd/[0-9]+$"))`,
		"; Terminals: the command's own (/dev/tty), and ioctls on the one it inherited",
		"; (isatty, window size); never opening another: its input is the user's",
		"; keystrokes. XNU allows TIOCSTI only on one's own controlling terminal.",
		`(allow file-read* file-write* file-ioctl (literal "/dev/tty"))`,
		`(deny file-read* file-write* (regex #"^/dev/ttys[0-9]+$"))`,
		`(allow file-ioctl (regex #"^/dev/ttys[0-9]+$"))`)
	if p.AllowPTY {
		w("; Pseudo-terminals the command makes: the kernel marks those made inside",
			"; the sandbox with the com.apple.sandbox.pty extension.",
			"(allow pseudo-tty)",
			`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))`,
			`(allow file-read* file-write* (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))`)
	}
	w("",
		"; System information and name lookup.",
		"(allow sysctl-read)",
		"(allow mach-lookup")
	for _, m := range machServices {
		w(`  (global-name "` + m + `")`)
	}
	w(")", "")
	switch {
	case p.HostNetwork:
		w(`; Network: the host's, without restriction (Network "host").`,
			"(allow network*)")
	case p.ProxyPort != 0:
		w("; Network: only the host-side egress proxy.",
			`(allow network-outbound (remote tcp "localhost:`+strconv.Itoa(p.ProxyPort)+`"))`)
	default:
		w("; Network: none.")
	}
	w("",
		"; Denied, last so that they override every allow above.")
	for _, d := range deny {
		w("(deny file-read* file-write* (subpath " + d + "))")
	}
	for _, a := range ancestorRefs {
		w("(deny file-write-unlink (literal " + a + "))")
	}
	if len(names) > 0 {
		w("; Deny names in the writable trees, now or later, wherever moved to.",
			"(deny file-read* file-write* (require-all",
			"  (require-any")
		for _, re := range names {
			w("    (regex " + re + ")")
		}
		w("  )", "  (require-any", "    (subpath "+ws+")")
		for _, x := range writable {
			w("    (subpath " + x + ")")
		}
		w(")))")
	}
	prof.Text = b.String()
	return prof, nil
}

// within reports whether p is dir or inside it; both are canonical.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// A FieldError is a field of Policy that cannot be compiled.
type FieldError struct {
	Field  string // as in Go: "Writable[1]"
	Value  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("darwin: %s %q: %s", e.Field, e.Value, e.Reason)
}

// checkPath refuses what cannot be a path the profile should name. No
// file name needs a control character, and sandbox-exec's -D arguments
// are C strings, which end at a NUL.
func checkPath(field, v string) error {
	reason := ""
	switch {
	case v == "":
		reason = "empty"
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		reason = "holds a NUL or control character"
	case !filepath.IsAbs(v):
		reason = "not an absolute path"
	default:
		return nil
	}
	return &FieldError{Field: field, Value: v, Reason: reason}
}
