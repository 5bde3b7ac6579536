package runtime

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePublish(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Publish
		err  string // a part of the error; "" for none
	}{
		{in: "8080:80", want: Publish{HostPort: 8080, Port: 80}},
		{in: "0:8000/tcp", want: Publish{Port: 8000, Protocol: "tcp"}},
		{in: "127.0.0.2:9000:9000", want: Publish{HostIP: "127.0.0.2", HostPort: 9000, Port: 9000}},
		{in: "[::1]:9000:90", want: Publish{HostIP: "::1", HostPort: 9000, Port: 90}},
		{in: "99999:80", err: `host port 99999 is out of range`},
		{in: "80:0", err: "port 0 is out of range"},
		{in: "80:65536", err: "port 65536 is out of range"},
		{in: "abc", err: "not [HOST_IP:]HOST_PORT:PORT"},
		{in: "abc:80", err: `HOST_PORT "abc" is not a number`},
		{in: "80:x", err: `PORT "x" is not a number`},
		{in: "localhost:80:80", err: `host address "localhost" is not an IP address`},
		{in: "1.2.3:80:80", err: `host address "1.2.3" is not an IP address`},
		{in: ":80:80", err: "an empty HOST_IP"},
		{in: "80:80/udp", err: "udp is not forwarded yet"},
		{in: "80:80/sctp", err: `protocol "sctp" is not tcp or udp`},
	} {
		got, err := ParsePublish(tc.in)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParsePublish(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			continue
		}
		var pe *PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParsePublish(%q) = %v; want a *PolicyError naming the value and %q", tc.in, err, tc.err)
		}
	}
}

func TestCheckPublishes(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		err  string
	}{
		{"none", Policy{}, ""},
		{"two", Policy{Publish: []Publish{{HostPort: 8080, Port: 80}, {Port: 81}}}, ""},
		{"host network", Policy{Network: NetworkHost, Publish: []Publish{{Port: 80}}}, "Publish[0]"},
		{"twice", Policy{Publish: []Publish{{HostPort: 8080, Port: 80}, {HostPort: 8080, Port: 81}}}, "same host address and port twice"},
		{"two free", Policy{Publish: []Publish{{Port: 80}, {Port: 81}}}, ""},
		{"bad field", Policy{Publish: []Publish{{Port: 80}, {HostIP: "x", Port: 81}}}, `Publish[1] "x:0:81/tcp": host address "x"`},
	} {
		err := checkPublishes(&tc.p)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: checkPublishes = %v; want %q", tc.name, err, tc.err)
		}
	}
}

func TestCheckReaches(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		err  string
	}{
		{"none", Policy{}, ""},
		{"one", Policy{Reach: []Reach{{Port: 8000, Addr: "127.0.0.1:41234"}}}, ""},
		{"ipv6 loopback", Policy{Reach: []Reach{{Port: 8000, Addr: "[::1]:41234"}}}, ""},
		{"not loopback", Policy{Reach: []Reach{{Port: 8000, Addr: "10.0.0.1:80"}}}, `Reach[0] "8000=10.0.0.1:80": address "10.0.0.1:80" is not a loopback IP:PORT`},
		{"a name", Policy{Reach: []Reach{{Port: 8000, Addr: "localhost:80"}}}, "not a loopback IP:PORT"},
		{"no port", Policy{Reach: []Reach{{Port: 8000, Addr: "127.0.0.1:0"}}}, "not a loopback IP:PORT"},
		{"port out of range", Policy{Reach: []Reach{{Port: 0, Addr: "127.0.0.1:80"}}}, "port 0 is out of range"},
		{"twice", Policy{Reach: []Reach{{Port: 8000, Addr: "127.0.0.1:80"}, {Port: 8000, Addr: "127.0.0.1:81"}}}, "Reach[1]"},
		{"host network", Policy{Network: NetworkHost, Reach: []Reach{{Port: 8000, Addr: "127.0.0.1:80"}}}, "network mode is host"},
		{"the egress port", Policy{Network: NetworkAllow, Reach: []Reach{{Port: egressPort, Addr: "127.0.0.1:80"}}}, "egress proxy's"},
	} {
		err := checkReaches(&tc.p)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: checkReaches = %v; want %q", tc.name, err, tc.err)
		}
	}
}
