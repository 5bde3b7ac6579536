package netns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// ssrfCases are addresses by the range they fall in, refused or not.
var ssrfCases = []struct {
	addr    string
	refused bool
}{
	{"0.0.0.0", true}, {"10.1.2.3", true}, {"100.64.0.1", true}, {"100.127.255.254", true}, {"127.0.0.1", true},
	{"127.255.255.254", true}, {"169.254.169.254", true}, {"169.254.1.1", true}, {"172.16.0.1", true},
	{"172.31.255.255", true}, {"192.168.1.1", true}, {"255.255.255.255", true}, {"224.0.0.1", true},
	{"::", true}, {"::1", true}, {"fd00::1", true}, {"fc00::1", true}, {"fe80::1", true}, {"fd00:ec2::254", true},
	{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"64:ff9b::a00:1", true}, {"2002:7f00:1::", true},
	{"8.8.8.8", false}, {"1.1.1.1", false}, {"100.63.255.255", false}, {"100.128.0.0", false}, {"172.32.0.1", false},
	{"2606:4700::1111", false}, {"::ffff:8.8.8.8", false},
}

// TestCheckAddr: every range, refused or let through as the proxy does
// (one implementation: a divergence fails here).
func TestCheckAddr(t *testing.T) {
	var p Proxy
	for _, c := range ssrfCases {
		a := netip.MustParseAddr(c.addr)
		err := CheckAddr(a)
		if (err != nil) != c.refused {
			t.Errorf("CheckAddr(%s) = %v, want refused %v", c.addr, err, c.refused)
		}
		if proxy := p.refuseAddr(netip.AddrPortFrom(a.Unmap(), 443)) != ""; proxy != (err != nil) {
			t.Errorf("%s: the proxy refuses %v, CheckAddr %v", c.addr, proxy, err)
		}
		if dial := DialControl("tcp", netip.AddrPortFrom(a, 443).String(), nil); (dial != nil) != c.refused {
			t.Errorf("DialControl(%s) = %v", c.addr, dial)
		}
	}
}

// TestCheckURL: schemes, metadata names, and loopback or metadata
// addresses however they are spelled.
func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		url     string
		refused bool
	}{
		{"https://example.com/x", false}, {"http://93.184.216.34/", false}, {"https://[2606:4700::1111]/", false},
		{"ftp://example.com/", true}, {"file:///etc/passwd", true}, {"gopher://x/", true}, {"javascript:alert(1)", true},
		{"http://169.254.169.254/latest/meta-data/", true}, {"http://metadata.google.internal/", true},
		{"http://METADATA.GOOGLE.INTERNAL./", true}, {"http://metadata.aws.internal/", true},
		{"http://127.0.0.1/", true}, {"http://127.1/", true}, {"http://2130706433/", true}, {"http://0x7f000001/", true},
		{"http://0177.0.0.1/", true}, {"http://0x7f.0.0.1/", true}, {"http://017700000001/", true},
		{"http://2852039166/", true}, // 169.254.169.254 in decimal
		{"http://[::1]/", true}, {"http://[::ffff:127.0.0.1]/", true}, {"http://[::ffff:a9fe:a9fe]/", true},
		{"http://127.0.0.1./", true}, {"http://localhost/", true}, {"http://LOCALHOST./", true}, {"http://x.localhost/", true},
		{"http://10.0.0.1:8080/", true}, {"http://0/", true}, {"http://user@127.0.0.1/", true},
		{"http:///nohost", true},
	} {
		err := CheckURL(c.url)
		if (err != nil) != c.refused {
			t.Errorf("CheckURL(%q) = %v, want refused %v", c.url, err, c.refused)
		}
	}
}

// rebindingDNS answers every A query with the next of answers, on a UDP
// socket of its own, and returns a resolver that asks it.
func rebindingDNS(t *testing.T, answers ...[4]byte) *net.Resolver {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var n atomic.Int32
	go func() {
		buf := make([]byte, 512)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:k]) != nil || len(m.Questions) == 0 {
				continue
			}
			q := m.Questions[0]
			m.Header.Response, m.Header.Authoritative = true, true
			if q.Type == dnsmessage.TypeA {
				i := min(int(n.Add(1))-1, len(answers)-1)
				m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 0},
					Body: &dnsmessage.AResource{A: answers[i]}}}
			}
			out, _ := m.Pack()
			pc.WriteTo(out, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// TestRebindingRefusedAtDial: a name CheckURL lets through, whose
// resolver answers a public address and then the host's loopback, is
// dialed the first time (the connection itself may fail: nothing
// listens) and refused the second, on the address actually dialed.
func TestRebindingRefusedAtDial(t *testing.T) {
	if err := CheckURL("http://rebind.example/"); err != nil {
		t.Fatal(err)
	}
	d := Dialer()
	d.Resolver = rebindingDNS(t, [4]byte{198, 51, 100, 7}, [4]byte{127, 0, 0, 1})
	d.Timeout = 300 * time.Millisecond
	var ae *AddrError
	_, err := d.DialContext(context.Background(), "tcp4", "rebind.example:80")
	if errors.As(err, &ae) {
		t.Fatalf("first dial, to a public address, refused: %v", err)
	}
	_, err = d.DialContext(context.Background(), "tcp4", "rebind.example:80")
	if !errors.As(err, &ae) || !strings.Contains(ae.Reason, "loopback") {
		t.Errorf("second dial, to 127.0.0.1: %v", err)
	}
}
