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
		{"exa mple.com", "space"},
		{"exa_mple.com\x00", "NUL"},
		{"example.com\r", "control"},
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
		{"\u212aey.test", "internationalised"},        // Kelvin sign
		{"*.\u0130stanbul.test", "internationalised"}, // dotted capital I
		{"ｅxample.com", "internationalised"},          // fullwidth e
		{"BÜCHER.de", "internationalised"},            // a non-ASCII capital
		{"be\u0301cher.de", "internationalised"},      // not NFC
		{"xn--zz.de", "internationalised"},            // bad punycode
		{"xn--bcher-.de", "internationalised"},
		{"b\xffcher.de", "UTF-8"},
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
	if name, _, _ := destination("Metadata.Google.Internal."); nameRefusal(name) == "" {
		t.Error("the metadata name is not refused")
	}
}

func TestCanonicalName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"example.com", "example.com"},
		{"EXAMPLE.Com", "example.com"},
		{"example.com.", "example.com"},
		{"a_b.example.com", "a_b.example.com"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"XN--BCHER-KVA.DE.", "xn--bcher-kva.de"},
		{"straße.de", "xn--strae-oqa.de"}, // not strasse.de
		{"中国.cn", "xn--fiqs8s.cn"},
		{"\u212aey.test", ""},
		{"\u0130.test", ""},
		{"ｅxample.com", ""},
		{"example.com..", ""},
		{".example.com", ""},
		{"", ""},
		{"exa\x00mple.com", ""},
		{"exa\tmple.com", ""},
		{"example.com\x7f", ""},
		{"exa/mple.com", ""},
		{strings.Repeat("a", 64) + ".com", ""},
		{strings.Repeat("a.", 127) + "com", ""},
	} {
		got, err := canonicalName(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("canonicalName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestRulesMatchNames: a request matches a pattern only when the two are
// the same name: ASCII case and one trailing dot aside, a Unicode name and
// its punycode are one name, and no Unicode look-alike or case mapping
// makes a name another.
func TestRulesMatchNames(t *testing.T) {
	rs, err := ParseRules([]string{"key.test", "*.kelvin.test", "*.istanbul.test", "example.com", "strasse.de", "xn--bcher-kva.de", "*.xn--fiqs8s.cn"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A pattern in Unicode is its punycode.
	if u, err := ParseRules([]string{"Bücher.de."}, nil); err != nil || u.rules[0].host != "xn--bcher-kva.de" {
		t.Errorf("ParseRules(Bücher.de.) = %+v, %v; want the name xn--bcher-kva.de", u, err)
	}
	for _, tc := range []struct{ host, want string }{
		{"\u212aey.test", ""},             // Kelvin sign: strings.ToLower makes it k
		{"a.\u212aelvin.test", ""},        // the same in a wildcard's domain
		{"\u212a.kelvin.test", ""},        // and in the label the wildcard covers
		{"x.\u0130stanbul.test", ""},      // dotted capital I
		{"x.\u0131stanbul.test", ""},      // dotless i
		{"ｅｘａｍｐｌｅ.com", ""},               // fullwidth
		{"example\uff0ecom", ""},          // fullwidth full stop
		{"example\u3002com", ""},          // ideographic full stop
		{"straße.de", ""},                 // ß is not ss
		{"e\u0301xample.com", ""},         // not NFC
		{"example.com\x00.evil.test", ""}, // NUL
		{"example.com evil.test", ""},     // space
		{"example.com\n", ""},             // control
		{"example.com..", ""},             // two trailing dots
		{"EXAMPLE.COM", "example.com"},    // ASCII case
		{"Key.Test", "key.test"},
		{"example.com.", "example.com"}, // trailing dot
		{"A.KELVIN.TEST.", "*.kelvin.test"},
		{"bücher.de", "xn--bcher-kva.de"}, // Unicode and punycode: one name
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"XN--BCHER-KVA.de.", "xn--bcher-kva.de"},
		{"www.中国.cn", "*.xn--fiqs8s.cn"},
		{"www.xn--fiqs8s.cn", "*.xn--fiqs8s.cn"},
	} {
		got, ok := rs.Match(tc.host, 443)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Match(%q) = %q, %v; want %q", tc.host, got, ok, tc.want)
		}
	}
}
