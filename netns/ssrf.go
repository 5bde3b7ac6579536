package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// blockedPrefixes are the address ranges the proxy never dials for an
// allowed domain: whatever a name resolves to, the connection must go to
// the public internet, not to the host, its network or a cloud's
// metadata service (SSRF and DNS rebinding).
var blockedPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("fc00::/7"), "unique local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
}

// blockedNames are refused by name, before any lookup.
var blockedNames = []string{"metadata.google.internal", "metadata", "metadata.aws.internal", "instance-data", "instance-data.ec2.internal"}

// addrRefusal says why the proxy must not connect to a, or "" when it
// may. IPv4 addresses hidden in IPv6 forms (v4-mapped, v4-compatible,
// NAT64 64:ff9b::/96, 6to4 2002::/16) are judged as the IPv4 address they
// carry.
func addrRefusal(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a), netip.MustParsePrefix("::/96").Contains(a) && !a.IsUnspecified() && a != netip.IPv6Loopback():
			return wrap(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case netip.MustParsePrefix("2002::/16").Contains(a):
			return wrap(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	for _, p := range blockedPrefixes {
		if p.prefix.Contains(a) {
			return p.what
		}
	}
	return ""
}

func wrap(v4 netip.Addr) string {
	if w := addrRefusal(v4); w != "" {
		return w + " (as " + v4.String() + " inside an IPv6 address)"
	}
	return ""
}

// nameRefusal says why a host name, in its canonical form
// (canonicalName), is refused outright, or "".
func nameRefusal(host string) string {
	for _, n := range blockedNames {
		if host == n {
			return fmt.Sprintf("%s names a cloud metadata service", n)
		}
	}
	return ""
}

// AddrError is a destination refused as a server-side request forgery
// would use it: the host, its network or a cloud's metadata service.
type AddrError struct {
	Addr   string // the address or name refused
	Reason string
}

// Error implements error.
func (e *AddrError) Error() string { return fmt.Sprintf("netns: %s: %s", e.Addr, e.Reason) }

// CheckAddr refuses an address the egress proxy would never dial for an
// allowed name (loopback, private, link-local, CGNAT, broadcast,
// unspecified, multicast, reserved, cloud metadata; IPv4 inside IPv6
// judged as itself): the proxy's own check, for the host's tools.
func CheckAddr(a netip.Addr) error {
	if why := addrRefusal(a); why != "" {
		return &AddrError{Addr: a.String(), Reason: why}
	}
	return nil
}

// DialControl is a net.Dialer Control function refusing what CheckAddr
// refuses, on the address the socket is about to connect to, after every
// lookup: a name that resolved to a public address once and to the host
// the next time (DNS rebinding) is refused then. The egress proxy dials
// through the same check.
func DialControl(_, address string, _ syscall.RawConn) error {
	return checkDialed(address, nil)
}

// checkDialed is DialControl's check, with the proxy's exceptions
// (AllowLocal) when allow says so.
func checkDialed(address string, allow func(netip.AddrPort) bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddrError{Addr: address, Reason: "not an address to dial"}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if allow != nil && allow(ap) {
		return nil
	}
	if why := addrRefusal(ap.Addr()); why != "" {
		return &AddrError{Addr: ap.Addr().String(), Reason: why}
	}
	return nil
}

// Dialer is a net.Dialer whose every connection passes DialControl.
func Dialer() *net.Dialer { return &net.Dialer{Control: DialControl} }

// CheckURL refuses a URL the host's own fetch or browser tools must not
// request: a scheme other than http or https, a cloud metadata name, or
// an address CheckAddr refuses, however it is written (decimal, octal or
// hex IPv4 as inet_aton reads them, IPv4 in IPv6, a trailing dot). A name
// is judged again on the address dialed: use Dialer or DialControl.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &AddrError{Addr: raw, Reason: "not a URL: " + err.Error()}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return &AddrError{Addr: raw, Reason: fmt.Sprintf("scheme %q: only http and https", u.Scheme)}
	}
	host := u.Hostname()
	if host == "" {
		return &AddrError{Addr: raw, Reason: "no host"}
	}
	if a, ok := literalAddr(host); ok {
		return CheckAddr(a)
	}
	name, err := canonicalName(host)
	if err != nil {
		return &AddrError{Addr: host, Reason: err.Error()}
	}
	if why := nameRefusal(name); why != "" {
		return &AddrError{Addr: host, Reason: why}
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return &AddrError{Addr: host, Reason: "loopback"}
	}
	return nil
}

// literalAddr reads host as an IP address the way resolvers do: an IPv6
// or dotted-quad literal, or the inet_aton forms (1 to 4 parts, each
// decimal, octal with a leading 0, or hex with 0x), with one trailing dot.
func literalAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, err := parseInetPart(p)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	// The last part fills the bytes the others leave.
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

var errNotNumber = errors.New("not a number")

func parseInetPart(p string) (uint64, error) {
	if p == "" {
		return 0, errNotNumber
	}
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" {
		return 0, nil // "0x" alone, as inet_aton reads it
	}
	return strconv.ParseUint(p, base, 32)
}
