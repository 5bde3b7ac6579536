// Package darwin owns hutch's macOS backend: a sandbox policy compiled to
// a Seatbelt profile (SBPL) and run through /usr/bin/sandbox-exec. The
// profile denies by default; allows processes, signals and process
// information within the sandbox; reads everywhere but the denied paths;
// writes only under the workspace and writable paths; the null, zero,
// random and terminal devices; sysctl reads; the few Mach services name
// lookup needs; and no network, or only the host-side proxy's port on
// localhost.
//
// Paths never appear in the profile's text: each is a parameter
// ((param "WRITABLE_0")) whose value travels in sandbox-exec's -D
// arguments, so no path, whatever its characters, can change the profile.
// The generator is plain Go and is tested on every platform; only running
// it needs macOS.
package darwin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SandboxExec is the one binary the backend runs, by absolute path: never
// looked up in PATH, which the caller's environment controls.
const SandboxExec = "/usr/bin/sandbox-exec"

// Policy is what the profile enforces. Paths are absolute; Compile
// canonicalizes them.
type Policy struct {
	// Workspace and Writable are the trees commands may write.
	Workspace string
	Writable  []string
	// Deny are paths commands may neither read nor write, even inside a
	// writable tree.
	Deny []string
	// ProxyPort, when not 0, allows outbound TCP to localhost on that
	// port only (the host-side egress proxy); 0 means no network.
	ProxyPort int
	// HostNetwork allows every network operation (Network "host").
	HostNetwork bool
}

// Param is one -D KEY=VALUE of sandbox-exec.
type Param struct{ Name, Value string }

// Profile is a compiled policy: SBPL text with parameter references, and
// the parameters' values.
type Profile struct {
	Text   string
	Params []Param
}

// Args is sandbox-exec's argument list (after argv[0]) for running name
// with args under the profile.
func (p Profile) Args(name string, args ...string) []string {
	out := []string{"-p", p.Text}
	for _, prm := range p.Params {
		out = append(out, "-D", prm.Name+"="+prm.Value)
	}
	return append(append(out, "--", name), args...)
}

// Canonical is the path as the macOS kernel reports it, which is what
// Seatbelt matches: /tmp, /var and /etc are symlinks into /private, and
// any other symlink on the way is resolved where the path exists.
func Canonical(p string) string {
	p = filepath.Clean(p)
	for _, top := range []string{"/tmp", "/var", "/etc"} {
		if p == top || strings.HasPrefix(p, top+"/") {
			p = "/private" + p
			break
		}
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// fixedReadDeny are paths under the user's home never readable, in
// addition to the policy's Deny: keychains and the privacy (TCC) database.
var fixedReadDeny = []string{"Library/Keychains", "Library/Application Support/com.apple.TCC", "Library/Cookies"}

// machServices are the Mach services commands may look up: what getpwnam,
// getaddrinfo and notifications need, nothing that acts for the user.
var machServices = []string{
	"com.apple.system.opendirectoryd.libinfo", // getpwnam and friends
	"com.apple.system.notification_center",    // notify(3), used by libc
	"com.apple.system.logger",                 // os_log from libc
	"com.apple.SystemConfiguration.configd",   // proxy and DNS settings
	"com.apple.system.DirectoryService.libinfo_v1",
}

// Compile turns p into a profile. home is the user's home directory (for
// the keychain and TCC denials); canon canonicalizes paths (Canonical
// when nil; tests pass their own).
func Compile(p Policy, home string, canon func(string) string) (Profile, error) {
	if canon == nil {
		canon = Canonical
	}
	check := func(field, v string) (string, error) {
		if !filepath.IsAbs(v) {
			return "", fmt.Errorf("darwin: %s %q: not an absolute path", field, v)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", fmt.Errorf("darwin: %s %q: holds a NUL or control character", field, v)
		}
		return canon(v), nil
	}
	var prof Profile
	param := func(kind string, i int, v string) string {
		name := kind + "_" + strconv.Itoa(i)
		prof.Params = append(prof.Params, Param{Name: name, Value: v})
		return `(param "` + name + `")`
	}
	var writable, deny []string
	ws, err := check("Workspace", p.Workspace)
	if err != nil {
		return Profile{}, err
	}
	writable = append(writable, param("WRITABLE", 0, ws))
	for i, w := range p.Writable {
		c, err := check(fmt.Sprintf("Writable[%d]", i), w)
		if err != nil {
			return Profile{}, err
		}
		writable = append(writable, param("WRITABLE", i+1, c))
	}
	denies := append([]string(nil), p.Deny...)
	if home != "" {
		for _, d := range fixedReadDeny {
			denies = append(denies, filepath.Join(home, d))
		}
	}
	for i, d := range denies {
		c, err := check(fmt.Sprintf("Deny[%d]", i), d)
		if err != nil {
			return Profile{}, err
		}
		deny = append(deny, param("DENY", i, c))
	}
	if p.ProxyPort < 0 || p.ProxyPort > 65535 {
		return Profile{}, fmt.Errorf("darwin: ProxyPort %d: not a port", p.ProxyPort)
	}

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("(version 1)")
	w("(deny default)")
	w("")
	w("; Processes: run programs, fork, and signal or inspect only each other.")
	w("(allow process-exec)")
	w("(allow process-fork)")
	w("(allow signal (target same-sandbox))")
	w("(allow process-info* (target same-sandbox))")
	w("")
	w("; Reading: everywhere but the denied paths (later rules win).")
	w("(allow file-read*)")
	for _, d := range deny {
		w("(deny file-read* (subpath %s))", d)
	}
	w("")
	w("; Writing: the workspace and the writable paths, never a denied path.")
	w("(allow file-write*")
	for _, x := range writable {
		w("  (subpath %s)", x)
	}
	w(")")
	for _, d := range deny {
		w("(deny file-write* (subpath %s))", d)
	}
	w("")
	w("; Devices: the harmless ones and terminals.")
	w(`(allow file-read* file-write* file-ioctl (literal "/dev/null") (literal "/dev/zero") (literal "/dev/random") (literal "/dev/urandom") (literal "/dev/tty") (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$"))`)
	w("(allow pseudo-tty)")
	w("")
	w("; System information and name lookup.")
	w("(allow sysctl-read)")
	w("(allow mach-lookup")
	for _, m := range machServices {
		w(`  (global-name "%s")`, m)
	}
	w(")")
	w("")
	switch {
	case p.HostNetwork:
		w("; Network: the host's, without restriction (Network \"host\").")
		w("(allow network*)")
	case p.ProxyPort != 0:
		w("; Network: only the host-side egress proxy.")
		w(`(allow network-outbound (remote tcp "localhost:%d"))`, p.ProxyPort)
	default:
		w("; Network: none.")
	}
	prof.Text = b.String()
	return prof, nil
}

// homeDir is the user's home, for callers that have none at hand.
func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}
