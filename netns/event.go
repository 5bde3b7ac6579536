package netns

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// Event is one connection attempt through the egress proxy.
type Event struct {
	Time time.Time `json:"time"`
	// Protocol is how the client asked: "connect" (HTTP CONNECT), "http"
	// (a plain HTTP request through the proxy) or "socks5".
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	// Addr is the address dialed, when the proxy got that far.
	Addr string `json:"addr,omitempty"`
	// Allowed says the policy let the connection through; Rule is the
	// allow-list pattern that did, Reason why the policy refused it.
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Error is why a connection the policy allowed could not be made: a
	// name that does not resolve, a refused or timed-out connect. It is
	// not a refusal, and the client gets 502 or 504, not 403.
	Error string `json:"error,omitempty"`
}

// String is the one line a model can act on:
//
//	network: blocked CONNECT evil.example:443 — not in allow-list
func (e Event) String() string {
	verb := map[string]string{"connect": "CONNECT", "http": "HTTP", "socks5": "SOCKS5"}[e.Protocol]
	dest := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	if e.Allowed {
		s := fmt.Sprintf("network: allowed %s %s (rule %s)", verb, dest, e.Rule)
		if e.Addr != "" {
			s += " via " + e.Addr
		}
		if e.Error != "" {
			s += ", but it failed: " + e.Error
		}
		return s
	}
	return fmt.Sprintf("network: blocked %s %s — %s", verb, dest, e.Reason)
}
