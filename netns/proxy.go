package netns

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Resolver looks host names up (*net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ProxyConfig configures an egress proxy.
type ProxyConfig struct {
	// Rules say which destinations are allowed (ParseRules); nil allows
	// nothing.
	Rules *Rules
	// AllowLocal are exact "ip:port" destinations the address checks let
	// through (a development server on the host's loopback, say); each is
	// also allowed as a destination in its own right. Only addresses the
	// checks refuse (loopback, private, link-local...) may be listed.
	AllowLocal []string
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// OnEvent, when set, receives every connection attempt.
	OnEvent func(Event)
	// Logger gets a Debug record of every connection attempt; nil means
	// slog.Default().
	Logger *slog.Logger
	// DialTimeout bounds each upstream connection attempt (default 10s);
	// HandshakeTimeout the client's request (default 30s).
	DialTimeout, HandshakeTimeout time.Duration
}

// Proxy is the host side of a sandbox's egress: it speaks HTTP CONNECT,
// plain HTTP forwarding and SOCKS5 on whatever listener it serves, and
// connects only where the rules allow, to addresses that pass the checks
// (never loopback, private, link-local or metadata addresses, unless
// listed in AllowLocal), checked on the address actually dialed.
type Proxy struct {
	cfg        ProxyConfig
	allowLocal map[netip.AddrPort]bool

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]bool
	conns     map[net.Conn]bool
	wg        sync.WaitGroup

	// rebind, in tests, changes the address dialed after the checks on
	// the resolved one, as a rebinding resolver would.
	rebind func(netip.AddrPort) netip.AddrPort
}

// NewProxy checks c and returns a proxy ready to Serve.
func NewProxy(c ProxyConfig) (*Proxy, error) {
	p := &Proxy{cfg: c, allowLocal: map[netip.AddrPort]bool{}, listeners: map[net.Listener]bool{}, conns: map[net.Conn]bool{}}
	for _, s := range c.AllowLocal {
		ap, err := netip.ParseAddrPort(s)
		if err != nil || ap.Port() == 0 {
			return nil, &RuleError{Input: s, Reason: "not an exact ip:port pair (127.0.0.1:8080, [::1]:8080)"}
		}
		// An exception to the address checks is for what they refuse;
		// a public address would only be a way around the allow-list.
		if addrRefusal(ap.Addr()) == "" {
			return nil, &RuleError{Input: s, Reason: "a public address: only loopback and private addresses, which the proxy otherwise refuses, can be allowed this way; allow public hosts by domain"}
		}
		p.allowLocal[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
	}
	if p.cfg.Resolver == nil {
		p.cfg.Resolver = net.DefaultResolver
	}
	if p.cfg.Logger == nil {
		p.cfg.Logger = slog.Default()
	}
	if p.cfg.DialTimeout == 0 {
		p.cfg.DialTimeout = 10 * time.Second
	}
	if p.cfg.HandshakeTimeout == 0 {
		p.cfg.HandshakeTimeout = 30 * time.Second
	}
	return p, nil
}

// Serve accepts connections on l until l fails or the proxy is closed
// (then it returns nil).
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return net.ErrClosed
	}
	p.listeners[l] = true
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			delete(p.listeners, l)
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if !p.track(c) {
			c.Close()
			return nil
		}
		go func() {
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// Close stops every listener and connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.wg.Done()
}

func (p *Proxy) emit(e Event) {
	e.Time = time.Now()
	p.cfg.Logger.Debug("hutch: egress", "event", e.String())
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}

func (p *Proxy) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.socks5(c, br)
		return
	}
	p.http(c, br)
}

// refusal marks a destination the policy refuses.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// dial connects to host:port if the policy allows it. The event it
// returns is complete but for Protocol; refused tells a policy refusal
// from a failure to connect.
//
// host is brought to its canonical form once, here: the name matched
// against the rules is the name resolved, and the one the event shows.
func (p *Proxy) dial(ctx context.Context, host string, port int) (conn *net.TCPConn, ev Event, refused bool) {
	ev = Event{Host: strconv.QuoteToASCII(host), Port: port}
	host, ip, err := destination(host)
	if err != nil {
		ev.Reason = "bad host name: " + err.Error()
		return nil, ev, true
	}
	ev.Host = host
	pattern, ok := p.cfg.Rules.match(host, ip, port)
	if !ok && ip.IsValid() && p.allowLocal[netip.AddrPortFrom(ip, uint16(port))] {
		pattern, ok = "AllowLocal "+netip.AddrPortFrom(ip, uint16(port)).String(), true
	}
	if !ok {
		ev.Reason = "not in allow-list"
		return nil, ev, true
	}
	ev.Rule = pattern
	if why := nameRefusal(host); why != "" {
		ev.Reason = why
		return nil, ev, true
	}
	var addrs []netip.Addr
	if ip.IsValid() {
		addrs = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		addrs, err = p.cfg.Resolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil || len(addrs) == 0 {
			if err == nil {
				err = errors.New("no address")
			}
			// Allowed: the name merely did not resolve.
			ev.Allowed, ev.Error = true, fmt.Sprintf("cannot resolve %s: %v", host, err)
			return nil, ev, false
		}
	}
	var lastErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if why := p.refuseAddr(ap); why != "" {
			lastErr = &refusal{fmt.Sprintf("resolves to %s (%s)", a, why)}
			continue
		}
		d := net.Dialer{Timeout: p.cfg.DialTimeout, Control: func(_, address string, _ syscall.RawConn) error {
			// The address the socket is about to connect to, after
			// every lookup: what a rebinding resolver answered earlier
			// does not matter. The host's DialControl, with AllowLocal.
			var ae *AddrError
			if err := checkDialed(address, func(ap netip.AddrPort) bool { return p.allowLocal[ap] }); errors.As(err, &ae) {
				return &refusal{fmt.Sprintf("connects to %s (%s)", ae.Addr, ae.Reason)}
			} else if err != nil {
				return err
			}
			return nil
		}}
		target := ap
		if p.rebind != nil {
			target = p.rebind(ap)
		}
		c, err := d.DialContext(ctx, "tcp", target.String())
		if err == nil {
			ev.Addr, ev.Allowed = ap.String(), true
			return c.(*net.TCPConn), ev, false
		}
		lastErr = err
	}
	var r *refusal
	if errors.As(lastErr, &r) {
		ev.Reason = r.reason
		return nil, ev, true
	}
	ev.Allowed, ev.Error = true, "connect failed: "+lastErr.Error()
	return nil, ev, false
}

// failStatus is the HTTP status for a connection open could not make:
// 403 for the policy's refusal, 504 for a lookup or connect that timed
// out, 502 for any other failure of an allowed one.
func failStatus(ev Event, refused bool) int {
	switch {
	case refused:
		return http.StatusForbidden
	case strings.Contains(ev.Error, "timeout") || strings.Contains(ev.Error, "deadline exceeded"):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// refuseAddr says why ap must not be dialed, or "".
func (p *Proxy) refuseAddr(ap netip.AddrPort) string {
	if p.allowLocal[ap] {
		return ""
	}
	return addrRefusal(ap.Addr())
}

// open dials host:port for one client request and emits the decision. On
// success the upstream connection is tracked (untrack it when done) and
// the client's handshake deadline is lifted; refused tells a policy
// refusal from a failure to connect.
func (p *Proxy) open(c net.Conn, protocol, host string, port int) (up *net.TCPConn, ev Event, refused bool) {
	up, ev, refused = p.dial(context.Background(), host, port)
	ev.Protocol = protocol
	p.emit(ev)
	if up == nil {
		return nil, ev, refused
	}
	if !p.track(up) {
		up.Close()
		return nil, ev, false
	}
	_ = c.SetDeadline(time.Time{})
	return up, ev, false
}

// tunnel passes on what the client sent past its request, then splices
// the two connections until both ends are done.
func tunnel(c net.Conn, br *bufio.Reader, up *net.TCPConn) {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	if hc, ok := c.(HalfCloser); ok {
		Splice(hc, up)
	}
}

// hopByHop are the headers that belong to one connection, not to the
// request (RFC 9110 7.6.1), plus the proxy's own.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

func (p *Proxy) http(c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method == http.MethodConnect {
		host, port, err := splitHostPort(req.Host, 443)
		if err != nil {
			httpError(c, http.StatusBadRequest, err.Error())
			return
		}
		up, ev, refused := p.open(c, "connect", host, port)
		if up == nil {
			httpError(c, failStatus(ev, refused), ev.String())
			return
		}
		defer p.untrack(up)
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
			tunnel(c, br, up)
		}
		return
	}
	// A plain HTTP request in absolute form; one per connection (the
	// next one gets a connection, and a decision, of its own).
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		httpError(c, http.StatusBadRequest, "a proxy request needs an absolute http:// URL (use CONNECT for https)")
		return
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		httpError(c, http.StatusBadRequest, err.Error())
		return
	}
	up, ev, refused := p.open(c, "http", host, port)
	if up == nil {
		httpError(c, failStatus(ev, refused), ev.String())
		return
	}
	defer p.untrack(up)
	for _, h := range hopByHop {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Close = true
	if err := req.Write(up); err != nil {
		return
	}
	_, _ = io.Copy(c, up)
}

func httpError(c net.Conn, code int, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}

func splitHostPort(hostport string, defaultPort int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port given.
		return hostport, defaultPort, nil
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return host, port, nil
}

// SOCKS5 reply codes (RFC 1928).
const (
	socksOK              = 0x00
	socksNotAllowed      = 0x02
	socksHostUnreach     = 0x04
	socksCmdUnsupported  = 0x07
	socksAddrUnsupported = 0x08
)

func (p *Proxy) socks5(c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		_, _ = c.Write([]byte{5, 0xff})
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksAddrUnsupported)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	if req[1] != 1 { // only CONNECT: no BIND, no UDP ASSOCIATE
		p.emit(Event{Protocol: "socks5", Host: host, Port: port, Reason: "only the CONNECT command is supported"})
		socksReply(c, socksCmdUnsupported)
		return
	}
	up, _, refused := p.open(c, "socks5", host, port)
	if up == nil {
		code := byte(socksHostUnreach)
		if refused {
			code = socksNotAllowed
		}
		socksReply(c, code)
		return
	}
	defer p.untrack(up)
	if socksReply(c, socksOK) {
		tunnel(c, br, up)
	}
}

func socksReply(c net.Conn, code byte) bool {
	_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	return err == nil
}
