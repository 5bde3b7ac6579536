package netns

import (
	"fmt"
	"net/netip"
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
var blockedNames = []string{"metadata.google.internal", "metadata"}

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
