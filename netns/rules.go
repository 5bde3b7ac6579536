package netns

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Presets are the registries each package manager needs, by name
// (Policy.PackageManagers).
var Presets = map[string][]string{
	"node":   {"registry.npmjs.org", "registry.yarnpkg.com", "repo.yarnpkg.com", "bun.sh"},
	"python": {"pypi.org", "files.pythonhosted.org", "pypi.python.org"},
	"rust":   {"crates.io", "index.crates.io", "static.crates.io"},
	"go":     {"proxy.golang.org", "sum.golang.org", "index.golang.org", "golang.org"},
	"java":   {"repo.maven.apache.org", "repo1.maven.org", "plugins.gradle.org", "services.gradle.org"},
	"ruby":   {"rubygems.org"},
	"php":    {"packagist.org", "repo.packagist.org"},
	"dotnet": {"nuget.org", "api.nuget.org", "globalcdn.nuget.org"},
	"dart":   {"pub.dev", "storage.googleapis.com"},
}

// RuleError is a pattern or preset that cannot be used, and why.
type RuleError struct {
	Input  string
	Reason string
}

// Error implements error.
func (e *RuleError) Error() string { return fmt.Sprintf("netns: %q: %s", e.Input, e.Reason) }

// rule is one parsed allow-list entry.
type rule struct {
	pattern  string
	any      bool       // "*": every domain
	wildcard bool       // "*.example.com": subdomains of host, not host itself
	host     string     // lower case, no trailing dot
	ip       netip.Addr // an IP literal entry: matches only that address
	port     int        // 0: every port
}

// Rules is a parsed allow-list. The zero value (and an empty list) allows
// nothing.
type Rules struct{ rules []rule }

// ParseRules parses allow-list patterns and package-manager presets:
// "example.com" (that host), "*.example.com" (its subdomains, not
// example.com itself), "*" (any domain: the address checks still apply),
// an IP literal (that address only; IPv6 in brackets when a port
// follows), each with an optional ":port". Names are compared as
// canonicalName makes them: ASCII case-insensitive, internationalised
// names as their punycode, one trailing dot dropped.
func ParseRules(patterns, presets []string) (*Rules, error) {
	var rs Rules
	for _, name := range presets {
		hosts, ok := Presets[name]
		if !ok {
			names := make([]string, 0, len(Presets))
			for n := range Presets {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, &RuleError{Input: name, Reason: "unknown package manager preset (one of " + strings.Join(names, ", ") + ")"}
		}
		patterns = append(slices.Clone(patterns), hosts...)
	}
	for _, p := range patterns {
		r, err := parseRule(p)
		if err != nil {
			return nil, err
		}
		rs.rules = append(rs.rules, r)
	}
	return &rs, nil
}

func parseRule(p string) (rule, error) {
	r := rule{pattern: p}
	bad := func(reason string) (rule, error) { return rule{}, &RuleError{Input: p, Reason: reason} }
	if p == "" {
		return bad("empty")
	}
	if strings.Contains(p, "://") || strings.ContainsAny(p, "/?#@") {
		return bad("a host name with an optional :port, not a URL")
	}
	host := p
	// IPv6 literals: "[::1]:443" or a bare "::1".
	if strings.HasPrefix(host, "[") {
		end := strings.Index(host, "]")
		if end < 0 {
			return bad("unclosed [")
		}
		rest := host[end+1:]
		host = host[1:end]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return bad("junk after ]")
			}
			port, err := parsePort(rest[1:])
			if err != nil {
				return bad(err.Error())
			}
			r.port = port
		}
	} else if strings.Count(host, ":") == 1 {
		h, port, _ := strings.Cut(host, ":")
		n, err := parsePort(port)
		if err != nil {
			return bad(err.Error())
		}
		host, r.port = h, n
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		r.ip = ip.Unmap()
		return r, nil
	}
	if strings.Contains(host, ":") {
		return bad("not a host name or IP address")
	}
	if host == "*" {
		r.any = true
		return r, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard = true
		host = rest
	}
	host, err := canonicalName(host)
	if err != nil {
		return bad(err.Error())
	}
	if r.wildcard && !strings.Contains(host, ".") {
		return bad("a wildcard needs at least two labels after it (*.example.com), not a whole top-level domain")
	}
	r.host = host
	return r, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: not a number from 1 to 65535", s)
	}
	return n, nil
}

// canonicalName is host as the allow-list matches it and the proxy
// resolves it: the one form both the patterns (at parse time) and each
// request are brought to, so that what matched is what is dialed.
//
// Only ASCII letters are folded: Unicode case mapping would turn the
// Kelvin sign into k or a dotted capital I into i, letting a name the
// resolver treats as another match a pattern. Other names go through
// IDNA's registration profile, which maps nothing: a name that needs
// mapping (fullwidth letters, compatibility forms, non-ASCII capitals,
// text not in NFC) is refused rather than quietly made into another, and
// a punycode label is decoded and encoded again so that it and its
// Unicode form are the same name. One trailing dot is dropped; bytes that
// no host name holds (NUL, spaces, controls) are refused first.
func canonicalName(host string) (string, error) {
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c == 0x7f {
			return "", fmt.Errorf("host name holds the byte %q (NUL, space or control character)", c)
		}
	}
	if !utf8.ValidString(host) {
		return "", fmt.Errorf("host name is not valid UTF-8")
	}
	b := []byte(host)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	name := strings.TrimSuffix(string(b), ".")
	if needsIDNA(name) {
		u, err := idna.Registration.ToUnicode(name)
		if err == nil {
			name, err = idna.Registration.ToASCII(u)
		}
		if err != nil {
			return "", fmt.Errorf("not a valid internationalised host name (%v); give it in lower case, in NFC, or as its punycode (xn--)", err)
		}
	}
	if err := checkHostName(name); err != nil {
		return "", err
	}
	return name, nil
}

// needsIDNA reports whether name has non-ASCII characters or a punycode
// label. All-ASCII names skip IDNA, whose rules would refuse the
// underscores checkHostName tolerates.
func needsIDNA(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, label := range strings.Split(name, ".") {
		if strings.HasPrefix(label, "xn--") {
			return true
		}
	}
	return false
}

// destination is a requested host as the proxy matches and dials it: an
// IP literal (in brackets or not, with a trailing dot or not), or the
// canonical name.
func destination(host string) (name string, ip netip.Addr, err error) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return a.Unmap().String(), a.Unmap(), nil
	}
	if name, err = canonicalName(host); err != nil {
		return "", netip.Addr{}, err
	}
	if a, err := netip.ParseAddr(name); err == nil {
		return a.Unmap().String(), a.Unmap(), nil
	}
	return name, netip.Addr{}, nil
}

// checkHostName applies the DNS rules: 1-253 characters, labels of 1-63
// letters, digits and inner hyphens (underscores are tolerated: some
// registries' CDNs use them).
func checkHostName(h string) error {
	if h == "" {
		return fmt.Errorf("no host name")
	}
	if len(h) > 253 {
		return fmt.Errorf("host name longer than 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		switch {
		case label == "":
			return fmt.Errorf("empty label (two dots in a row, or a leading dot)")
		case len(label) > 63:
			return fmt.Errorf("label %q longer than 63 characters", label)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("label %q starts or ends with a hyphen", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return fmt.Errorf("a wildcard may only be the whole first label (*.example.com)")
				}
				if c > 0x7f {
					return fmt.Errorf("non-ASCII host name: give its punycode (xn--) form")
				}
				return fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	return nil
}

// Match reports whether a destination is allowed, and by which pattern.
// host is a name or an IP literal as the client asked for it; a name that
// is not a valid host name matches nothing.
func (rs *Rules) Match(host string, port int) (pattern string, ok bool) {
	name, ip, err := destination(host)
	if err != nil {
		return "", false
	}
	return rs.match(name, ip, port)
}

// match is Match for a destination already made canonical: ip is set for
// an IP literal, name otherwise.
func (rs *Rules) match(host string, ip netip.Addr, port int) (pattern string, ok bool) {
	if rs == nil {
		return "", false
	}
	for _, r := range rs.rules {
		if r.port != 0 && r.port != port {
			continue
		}
		switch {
		case r.ip.IsValid():
			if ip == r.ip {
				return r.pattern, true
			}
		case ip.IsValid():
			// An IP literal matches only an exact IP entry or "*".
			if r.any {
				return r.pattern, true
			}
		case r.any:
			return r.pattern, true
		case r.wildcard:
			if strings.HasSuffix(host, "."+r.host) {
				return r.pattern, true
			}
		case host == r.host:
			return r.pattern, true
		}
	}
	return "", false
}

// Covers reports whether rs matches every destination pattern matches
// (a pattern as ParseRules takes it): whether granting pattern on top of
// rs would let nothing new through. One rule of rs must cover it alone,
// which is sound and, for the patterns people write, complete.
func (rs *Rules) Covers(pattern string) (bool, error) {
	q, err := parseRule(pattern)
	if err != nil {
		return false, err
	}
	if rs == nil {
		return false, nil
	}
	for _, r := range rs.rules {
		if r.port != 0 && r.port != q.port {
			continue
		}
		switch {
		case r.any:
			return true, nil
		case q.any:
			continue
		case q.ip.IsValid() || r.ip.IsValid():
			if q.ip.IsValid() && q.ip == r.ip {
				return true, nil
			}
		case q.wildcard:
			if r.wildcard && (q.host == r.host || strings.HasSuffix(q.host, "."+r.host)) {
				return true, nil
			}
		case r.wildcard:
			if strings.HasSuffix(q.host, "."+r.host) {
				return true, nil
			}
		case q.host == r.host:
			return true, nil
		}
	}
	return false, nil
}
