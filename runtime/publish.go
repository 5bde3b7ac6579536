package runtime

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Publish is one port a Sandbox publishes on the host: connections to
// HostIP:HostPort are forwarded into the sandbox's own network namespace,
// to 127.0.0.1:Port there, and nowhere else. The Sandbox holds the host
// listener from New to Close, across its commands; a connection goes to
// the command started last among those running (a durable process's
// current run), and is refused while none runs.
type Publish struct {
	// HostIP is the host address listened on: loopback (127.0.0.1) when
	// empty; another address only when named here.
	HostIP string `json:"host_ip,omitempty"`
	// HostPort is the host port; 0 picks a free one, which
	// Sandbox.Published and Result.Published report. Ports below 1024
	// need the privileges they always need.
	HostPort int `json:"host_port"`
	// Port is the sandbox's loopback port connections go to.
	Port int `json:"port"`
	// Protocol is "tcp" (also for ""), the only one forwarded so far.
	Protocol string `json:"protocol,omitempty"`
}

// String is the form ParsePublish reads: HOST_IP:HOST_PORT:PORT/PROTOCOL.
func (p Publish) String() string {
	ip := p.HostIP
	if ip == "" {
		ip = "127.0.0.1"
	}
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	return fmt.Sprintf("%s:%d:%d/%s", ip, p.HostPort, p.Port, proto)
}

// ParsePublish reads the --publish form [HOST_IP:]HOST_PORT:PORT[/tcp|udp]
// (an IPv6 HOST_IP in brackets). It checks the form; Check judges the
// values.
func ParsePublish(s string) (Publish, error) {
	bad := func(why string) (Publish, error) {
		return Publish{}, &PolicyError{Field: "Publish", Value: s, Reason: why}
	}
	var p Publish
	rest := s
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		p.Protocol, rest = rest[i+1:], rest[:i]
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("not [HOST_IP:]HOST_PORT:PORT[/tcp|udp]")
	}
	port, rest := rest[i+1:], rest[:i]
	hostPort := rest
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		p.HostIP, hostPort = rest[:j], rest[j+1:]
		p.HostIP = strings.TrimSuffix(strings.TrimPrefix(p.HostIP, "["), "]")
		if p.HostIP == "" {
			return bad("an empty HOST_IP")
		}
	}
	var err error
	if p.HostPort, err = strconv.Atoi(hostPort); err != nil {
		return bad(fmt.Sprintf("HOST_PORT %q is not a number", hostPort))
	}
	if p.Port, err = strconv.Atoi(port); err != nil {
		return bad(fmt.Sprintf("PORT %q is not a number", port))
	}
	return p, checkPublish("Publish", p, s)
}

// checkPublish judges one published port. value is how the caller wrote
// it, for the error.
func checkPublish(field string, p Publish, value string) error {
	if value == "" {
		value = p.String()
	}
	bad := func(why string) error {
		return &PolicyError{Field: field, Value: value, Reason: why}
	}
	if p.HostIP != "" {
		a, err := netip.ParseAddr(p.HostIP)
		if err != nil || a.Zone() != "" {
			return bad(fmt.Sprintf("host address %q is not an IP address", p.HostIP))
		}
	}
	if p.HostPort < 0 || p.HostPort > 65535 {
		return bad(fmt.Sprintf("host port %d is out of range (0-65535; 0 picks a free one)", p.HostPort))
	}
	if p.Port < 1 || p.Port > 65535 {
		return bad(fmt.Sprintf("port %d is out of range (1-65535)", p.Port))
	}
	switch p.Protocol {
	case "", "tcp":
	case "udp":
		return bad("udp is not forwarded yet (only tcp)")
	default:
		return bad(fmt.Sprintf("protocol %q is not tcp or udp", p.Protocol))
	}
	return nil
}

// checkPublishes judges Policy.Publish: each port, no host address and
// port twice, and a network namespace of the sandbox's own to forward
// into.
func checkPublishes(p *Policy) error {
	seen := map[string]bool{}
	for i, pub := range p.Publish {
		field := fmt.Sprintf("Publish[%d]", i)
		if err := checkPublish(field, pub, ""); err != nil {
			return err
		}
		if p.Network == NetworkHost {
			return &PolicyError{Field: field, Value: pub.String(), Reason: "needs a network namespace of the sandbox's own, and the network mode is host (the command's ports are the host's already)"}
		}
		key := Publish{HostIP: pub.HostIP, HostPort: pub.HostPort}.String()
		if pub.HostPort != 0 && seen[key] {
			return &PolicyError{Field: field, Value: pub.String(), Reason: "publishes the same host address and port twice"}
		}
		seen[key] = true
	}
	return nil
}

// egressPort is where, inside a sandbox whose network policy allows some
// destinations, the bridge to the host's proxy listens (on 127.0.0.1; the
// sandbox has a network namespace of its own, so the port is never taken).
const egressPort = 3128

// Reach is one port of a command's own loopback that leads to one service
// on the host's loopback: a connection to 127.0.0.1:Port in the command
// is made by the host to Addr, and the command reaches nothing else
// through it. Its use is the agent loop: a later command reaching the dev
// server a durable process serves on its published port (hutch run
// --reach ID:PORT finds that port in the process's record).
type Reach struct {
	// Port is the port the command connects to on its 127.0.0.1.
	Port int `json:"port"`
	// Addr is the host's loopback address and port the connection goes
	// to ("127.0.0.1:41234").
	Addr string `json:"addr"`
}

// checkReaches judges Policy.Reach: loopback targets only, each port of
// the command's once, and a network namespace of its own to listen in.
func checkReaches(p *Policy) error {
	seen := map[int]bool{}
	for i, r := range p.Reach {
		bad := func(why string) error {
			return &PolicyError{Field: fmt.Sprintf("Reach[%d]", i), Value: fmt.Sprintf("%d=%s", r.Port, r.Addr), Reason: why}
		}
		if p.Network == NetworkHost {
			return bad("needs a network namespace of the command's own, and the network mode is host")
		}
		if r.Port < 1 || r.Port > 65535 {
			return bad(fmt.Sprintf("port %d is out of range (1-65535)", r.Port))
		}
		if r.Port == egressPort && p.Network == NetworkAllow {
			return bad(fmt.Sprintf("port %d is the egress proxy's", egressPort))
		}
		if seen[r.Port] {
			return bad("reaches from the same port twice")
		}
		seen[r.Port] = true
		a, err := netip.ParseAddrPort(r.Addr)
		if err != nil || !a.Addr().IsLoopback() || a.Port() == 0 {
			return bad(fmt.Sprintf("address %q is not a loopback IP:PORT on the host", r.Addr))
		}
	}
	return nil
}
