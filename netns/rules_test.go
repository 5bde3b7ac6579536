package netns

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRulesRefuses(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"*.", "no host name"},
		{"exa mple.com", "not allowed"},
		{"http://x.com", "not a URL"},
		{"a..b", "empty label"},
		{"", "empty"},
		{"example.com:0", "port"},
		{"example.com:65536", "port"},
		{"example.com:abc", "port"},
		{"-a.com", "hyphen"},
		{strings.Repeat("a", 64) + ".com", "63"},
		{strings.Repeat("a.", 127) + "com", "253"},
		{"*.com", "two labels"},
		{"a.*.com", "first label"},
		{"bücher.de", "punycode"},
		{"[::1", "unclosed"},
		{"user@example.com", "not a URL"},
	} {
		_, err := ParseRules([]string{tc.in}, nil)
		var re *RuleError
		if !errors.As(err, &re) || re.Input != tc.in || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("ParseRules(%q) = %v, want a RuleError naming it and %q", tc.in, err, tc.reason)
		}
	}
	_, err := ParseRules(nil, []string{"cobol"})
	var re *RuleError
	if !errors.As(err, &re) || re.Input != "cobol" || !strings.Contains(err.Error(), "python") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestRulesMatch(t *testing.T) {
	rs, err := ParseRules([]string{"example.com", "*.api.test", "only443.test:443", "10.1.2.3", "[2001:db8::1]:8443", "Upper.Test."}, []string{"python"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want string // matching pattern, "" for refused
	}{
		{"example.com", 443, "example.com"},
		{"EXAMPLE.com.", 80, "example.com"},
		{"sub.example.com", 443, ""},
		{"v1.api.test", 443, "*.api.test"},
		{"a.b.api.test", 443, "*.api.test"},
		{"api.test", 443, ""},
		{"evilapi.test", 443, ""},
		{"only443.test", 443, "only443.test:443"},
		{"only443.test", 80, ""},
		{"10.1.2.3", 22, "10.1.2.3"},
		{"10.1.2.4", 22, ""},
		{"2001:db8::1", 8443, "[2001:db8::1]:8443"},
		{"2001:db8::1", 443, ""},
		{"upper.test", 1, "Upper.Test."},
		{"pypi.org", 443, "pypi.org"},
		{"files.pythonhosted.org", 443, "files.pythonhosted.org"},
		{"registry.npmjs.org", 443, ""},
	} {
		got, ok := rs.Match(tc.host, tc.port)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Match(%s, %d) = %q, %v; want %q", tc.host, tc.port, got, ok, tc.want)
		}
	}
	empty, _ := ParseRules(nil, nil)
	if _, ok := empty.Match("example.com", 443); ok {
		t.Error("an empty list allows something")
	}
	star, _ := ParseRules([]string{"*"}, nil)
	for _, h := range []string{"anything.test", "1.2.3.4"} {
		if _, ok := star.Match(h, 443); !ok {
			t.Errorf("* refuses %s", h)
		}
	}
}

func TestAddrRefusal(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1", true}, {"127.9.9.9", true}, {"10.0.0.1", true}, {"172.16.5.4", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"169.254.1.1", true}, {"100.64.0.1", true}, {"0.0.0.0", true}, {"255.255.255.255", true},
		{"224.0.0.1", true}, {"::1", true}, {"::", true}, {"fe80::1", true}, {"fc00::1", true}, {"fd00:ec2::254", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"64:ff9b::a9fe:a9fe", true}, {"::127.0.0.1", true},
		{"2002:7f00:1::", true}, {"ff02::1", true},
		{"93.184.216.34", false}, {"2606:2800:220:1::", false}, {"8.8.8.8", false}, {"64:ff9b::808:808", false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := addrRefusal(a) != ""; got != tc.blocked {
			t.Errorf("addrRefusal(%s) = %q; blocked = %v, want %v", tc.addr, addrRefusal(a), got, tc.blocked)
		}
	}
	if nameRefusal("Metadata.Google.Internal.") == "" {
		t.Error("the metadata name is not refused")
	}
}
