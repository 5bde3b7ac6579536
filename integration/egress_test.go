//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// The allow-list, end to end through the CLI: real clients (curl, python)
// inside the sandbox, the test's own HTTP server on the host's loopback,
// verdicts from that server's request log and from the proxy's events.
// Names are "localhost" (resolved by the host from /etc/hosts) and names
// that are refused before any lookup: nothing leaves this machine.

// hostServer is an HTTP server on 127.0.0.1 that counts its requests.
func hostServer(t *testing.T) (port int, hits *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = new(atomic.Int32)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "host server saw %s", r.URL.Path)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, hits
}

// netEvents are a Result's network events, as --result-json wrote them.
type netEvent struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Addr     string `json:"addr"`
	Allowed  bool   `json:"allowed"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
}

func eventsOf(t *testing.T, r cliResult) []netEvent {
	t.Helper()
	if r.result == nil {
		t.Fatalf("no result (exit %d): %s", r.code, r.stderr)
	}
	b, _ := json.Marshal(r.result.NetworkEvents)
	var evs []netEvent
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestEgressAllowed: an allowed destination is reachable through the
// proxy with curl (plain HTTP and a CONNECT tunnel) and python's urllib.
func TestEgressAllowed(t *testing.T) {
	port, hits := hostServer(t)
	ws := dir(t, "ws-")
	url := fmt.Sprintf("http://localhost:%d", port)
	script := strings.Join([]string{
		"curl -sS --max-time 10 " + url + "/curl > curl.out",
		"curl -sS --max-time 10 -p " + url + "/tunnel > tunnel.out",
		`python3 -c "import urllib.request; print(urllib.request.urlopen('` + url + `/py', timeout=10).read().decode(), end='')" > py.out`,
	}, "; ")
	r := sh(t, ws, script, "--net", "allow", "--allow-domain", fmt.Sprintf("localhost:%d", port),
		"--allow-local", fmt.Sprintf("127.0.0.1:%d", port), "--env", "NO_PROXY=", "--env", "no_proxy=")
	for f, want := range map[string]string{"curl.out": "/curl", "tunnel.out": "/tunnel", "py.out": "/py"} {
		b, _ := os.ReadFile(ws + "/" + f)
		if string(b) != "host server saw "+want {
			t.Errorf("%s = %q, want the host server's answer for %s (stderr %q)", f, b, want, r.stderr)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("host: the server saw %d requests, want 3", n)
	}
	evs := eventsOf(t, r)
	protocols := map[string]bool{}
	for _, e := range evs {
		if e.Allowed {
			protocols[e.Protocol] = true
			if e.Addr != fmt.Sprintf("127.0.0.1:%d", port) || e.Rule == "" {
				t.Errorf("allowed event %+v: want the dialed address and the rule", e)
			}
		}
	}
	if !protocols["http"] || !protocols["connect"] {
		t.Errorf("events %+v: want allowed http and connect attempts", evs)
	}
}

// TestEgressRefused: what the list does not allow, and what the address
// checks refuse, never reaches the host server; each attempt is an event
// and a line on stderr.
func TestEgressRefused(t *testing.T) {
	port, hits := hostServer(t)
	other, otherHits := hostServer(t)
	for _, tc := range []struct {
		name   string
		flags  []string
		target string
		reason string
	}{
		{"not listed", []string{"--allow-domain", fmt.Sprintf("localhost:%d", port), "--allow-local", fmt.Sprintf("127.0.0.1:%d", port)},
			fmt.Sprintf("evil.test:%d", port), "not in allow-list"},
		{"other port", []string{"--allow-domain", fmt.Sprintf("localhost:%d", port), "--allow-local", fmt.Sprintf("127.0.0.1:%d", other)},
			fmt.Sprintf("localhost:%d", other), "not in allow-list"},
		{"wildcard is not the apex", []string{"--allow-domain", "*.svc.test"}, fmt.Sprintf("svc.test:%d", port), "not in allow-list"},
		{"empty list", nil, fmt.Sprintf("localhost:%d", port), "not in allow-list"},
		{"resolves to loopback", []string{"--allow-domain", "localhost"}, fmt.Sprintf("localhost:%d", port), "loopback"},
		{"metadata address", []string{"--allow-domain", "169.254.169.254"}, "169.254.169.254:80", "cloud metadata"},
		{"metadata name", []string{"--allow-domain", "metadata.google.internal"}, "metadata.google.internal:80", "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dir(t, "ws-")
			script := "curl -sS --max-time 10 http://" + tc.target + "/x > plain.out; curl -sS --max-time 10 -p http://" + tc.target + "/y > tunnel.out; true"
			r := sh(t, ws, script, append([]string{"--net", "allow", "--env", "NO_PROXY=", "--env", "no_proxy="}, tc.flags...)...)
			evs := eventsOf(t, r)
			if len(evs) != 2 {
				t.Fatalf("events %+v: want 2 (one per attempt)", evs)
			}
			for _, e := range evs {
				if e.Allowed || !strings.Contains(e.Reason, tc.reason) || e.Addr != "" {
					t.Errorf("event %+v: want refused for %q, nothing dialed", e, tc.reason)
				}
			}
			if !strings.Contains(r.stderr, "network: blocked HTTP "+tc.target+" — ") || !strings.Contains(r.stderr, "network: blocked CONNECT "+tc.target+" — ") {
				t.Errorf("stderr %q lacks the one-line denials", r.stderr)
			}
		})
	}
	if n := hits.Load() + otherHits.Load(); n != 0 {
		t.Errorf("host: the servers saw %d requests from refused destinations", n)
	}
}

// TestEgressBadInput: invalid patterns, presets and local addresses are
// refused before anything starts, naming the flag and the value as typed.
func TestEgressBadInput(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		field string
	}{
		{[]string{"--allow-domain", "*."}, "--allow-domain *.: "},
		{[]string{"--allow-domain", "ok.test", "--allow-domain", "exa mple.com"}, `--allow-domain "exa mple.com": `},
		{[]string{"--allow-domain", "http://x.com"}, "--allow-domain http://x.com: "},
		{[]string{"--allow-domain", "a..b"}, "--allow-domain a..b: "},
		{[]string{"--allow-domain", "x.test:70000"}, "--allow-domain x.test:70000: "},
		{[]string{"--package-managers", "node,cobol"}, "--package-managers cobol: "},
		{[]string{"--allow-local", "localhost"}, "--allow-local localhost: "},
		// AllowLocal lifts the address checks; a public address would be a
		// way around the allow-list, and --help says loopback/private only.
		{[]string{"--allow-local", "8.8.8.8:53"}, "--allow-local 8.8.8.8:53: a public address"},
	} {
		ws := dir(t, "ws-")
		r := sh(t, ws, "touch ran", append([]string{"--net", "allow"}, tc.flags...)...)
		if r.code != 125 || !strings.Contains(r.stderr, tc.field) {
			t.Errorf("%v: exit %d, stderr %q; want 125 naming %s", tc.flags, r.code, r.stderr, tc.field)
		}
		if _, err := os.Stat(ws + "/ran"); err == nil {
			t.Errorf("%v: the command ran", tc.flags)
		}
	}
}
