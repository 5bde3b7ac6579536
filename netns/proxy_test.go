package netns

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a map; it never asks real DNS.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.ToLower(host)]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s (test resolver)", host)
}

// upstream is a loopback HTTP server answering "hello from upstream".
func upstream(t testing.TB) (port int) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream %s", r.URL.Path)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

type testProxy struct {
	*Proxy
	addr   string
	mu     sync.Mutex
	events []Event
}

func (tp *testProxy) Events() []Event {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]Event(nil), tp.events...)
}

// startProxy serves a proxy on a loopback listener. Names resolve
// through res; allowed.test and friends all point at 127.0.0.1, which
// the address checks refuse unless allowLocal lists the exact port.
func startProxy(t testing.TB, patterns, allowLocal []string, res fakeResolver) *testProxy {
	t.Helper()
	rules, err := ParseRules(patterns, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{}
	p, err := NewProxy(ProxyConfig{Rules: rules, AllowLocal: allowLocal, Resolver: res, OnEvent: func(e Event) {
		tp.mu.Lock()
		tp.events = append(tp.events, e)
		tp.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy = p
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.addr = l.Addr().String()
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	return tp
}

var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// connectGet tunnels with CONNECT and sends one GET through the tunnel.
func connectGet(t *testing.T, proxy, target string) (status string, body string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.Status, string(b)
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.Status, string(b)
}

// socksConnect opens a SOCKS5 CONNECT to host:port (a name or an IP
// literal) and returns the reply code and, on success, the connection.
func socksConnect(t *testing.T, proxy, host string, port int) (byte, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{5, 1, 0})
	var hello [2]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil || hello != [2]byte{5, 0} {
		t.Fatalf("socks hello: %v %v", hello, err)
	}
	req := []byte{5, 1, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		b := a.As4()
		req = append(append(req, 1), b[:]...)
	} else if err == nil {
		b := a.As16()
		req = append(append(req, 4), b[:]...)
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("socks reply: %v", err)
	}
	if rep[1] != 0 {
		c.Close()
		return rep[1], nil
	}
	return 0, c
}

func TestProxyAllowed(t *testing.T) {
	port := upstream(t)
	local := fmt.Sprintf("127.0.0.1:%d", port)
	tp := startProxy(t, []string{"allowed.test", "*.wild.test"}, []string{local}, fakeResolver{"allowed.test": loopback, "a.wild.test": loopback})
	target := fmt.Sprintf("allowed.test:%d", port)

	t.Run("CONNECT", func(t *testing.T) {
		status, body := connectGet(t, tp.addr, target)
		if !strings.HasPrefix(status, "200") || body != "hello from upstream /tunnel" {
			t.Errorf("%s %q", status, body)
		}
	})
	t.Run("plain HTTP", func(t *testing.T) {
		proxyURL, _ := url.Parse("http://" + tp.addr)
		client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
		resp, err := client.Get(fmt.Sprintf("http://a.wild.test:%d/plain", port))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello from upstream /plain" {
			t.Errorf("%s %q", resp.Status, b)
		}
	})
	t.Run("SOCKS5 name and IP", func(t *testing.T) {
		for _, host := range []string{"allowed.test", "127.0.0.1"} {
			code, c := socksConnect(t, tp.addr, host, port)
			if code != 0 {
				t.Errorf("SOCKS5 %s: reply %d", host, code)
				continue
			}
			fmt.Fprintf(c, "GET /socks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			b, _ := io.ReadAll(c)
			c.Close()
			if !bytes.HasSuffix(b, []byte("hello from upstream /socks")) {
				t.Errorf("SOCKS5 %s: %q", host, b)
			}
		}
	})
	if _, err := exec.LookPath("curl"); err == nil {
		t.Run("curl", func(t *testing.T) {
			for _, args := range [][]string{
				{"-p", "-x", "http://" + tp.addr, fmt.Sprintf("http://allowed.test:%d/curl", port)},
				{"--socks5-hostname", tp.addr, fmt.Sprintf("http://allowed.test:%d/curl", port)},
			} {
				out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "10"}, args...)...).CombinedOutput()
				if err != nil || string(out) != "hello from upstream /curl" {
					t.Errorf("curl %v: %v %q", args, err, out)
				}
			}
		})
	}
	if _, err := exec.LookPath("python3"); err == nil {
		t.Run("python urllib", func(t *testing.T) {
			cmd := exec.Command("python3", "-c", fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://allowed.test:%d/py', timeout=10).read().decode(), end='')", port))
			cmd.Env = append(os.Environ(), "http_proxy=http://"+tp.addr, "no_proxy=")
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "hello from upstream /py" {
				t.Errorf("python: %v %q", err, out)
			}
		})
	}
	for _, e := range tp.Events() {
		if !e.Allowed || e.Rule == "" || e.Addr != local {
			t.Errorf("event %+v: want allowed, with its rule and the address dialed", e)
		}
	}
	if len(tp.Events()) == 0 {
		t.Error("no events")
	}
}

func TestProxyRefused(t *testing.T) {
	port := upstream(t)
	res := fakeResolver{
		"allowed.test":   loopback, // listed, but loopback and not in AllowLocal
		"meta.test":      {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":    {netip.MustParseAddr("::ffff:127.0.0.1")},
		"rebind.test":    {netip.MustParseAddr("93.184.216.34")},
		"only443.test":   loopback,
		"elsewhere.test": loopback,
	}
	tp := startProxy(t, []string{"allowed.test", "meta.test", "mapped.test", "rebind.test", "only443.test:443", "169.254.169.254", "metadata.google.internal"},
		nil, res)
	// rebind.test resolves to a public address, then the connection goes to
	// loopback: the check on the dialed address must catch it (and nothing
	// is ever sent to the public address).
	tp.Proxy.rebind = func(ap netip.AddrPort) netip.AddrPort {
		if ap.Addr() == netip.MustParseAddr("93.184.216.34") {
			return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
		}
		return ap
	}
	for _, tc := range []struct {
		host, reason string
	}{
		{"elsewhere.test", "not in allow-list"},
		{"allowed.test", "resolves to 127.0.0.1 (loopback)"},
		{"meta.test", "cloud metadata"},
		{"mapped.test", "loopback"},
		{"rebind.test", "connects to 127.0.0.1 (loopback)"},
		{"only443.test", "not in allow-list"},
		{"169.254.169.254", "cloud metadata"},
		{"metadata.google.internal", "metadata"},
		{"127.0.0.1", "not in allow-list"},
	} {
		target := net.JoinHostPort(tc.host, fmt.Sprint(port))
		status, body := connectGet(t, tp.addr, target)
		if !strings.HasPrefix(status, "403") || !strings.Contains(body, "network: blocked CONNECT "+target+" — ") || !strings.Contains(body, tc.reason) {
			t.Errorf("CONNECT %s: %s %q; want 403 naming %q", target, status, body, tc.reason)
		}
		if code, _ := socksConnect(t, tp.addr, tc.host, port); code != socksNotAllowed {
			t.Errorf("SOCKS5 %s: reply %d, want %d (not allowed by ruleset)", tc.host, code, socksNotAllowed)
		}
	}
	for _, e := range tp.Events() {
		if e.Allowed || e.Reason == "" {
			t.Errorf("event %+v: want refused with a reason", e)
		}
	}
	// SOCKS5 BIND and UDP ASSOCIATE are refused.
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{5, 1, 0})
	io.ReadFull(c, make([]byte, 2))
	c.Write([]byte{5, 3, 0, 1, 127, 0, 0, 1, 0, 53})
	rep := make([]byte, 10)
	if _, err := io.ReadFull(c, rep); err != nil || rep[1] != socksCmdUnsupported {
		t.Errorf("UDP ASSOCIATE: reply %v %v", rep, err)
	}
}

func TestProxyEmptyListBlocks(t *testing.T) {
	port := upstream(t)
	tp := startProxy(t, nil, []string{fmt.Sprintf("127.0.0.1:%d", port)}, fakeResolver{"allowed.test": loopback})
	if status, _ := connectGet(t, tp.addr, fmt.Sprintf("allowed.test:%d", port)); !strings.HasPrefix(status, "403") {
		t.Errorf("empty list: %s", status)
	}
}

// countFds counts this process's open descriptors.
func countFds(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// echoServer echoes every connection until EOF.
func echoServer(t testing.TB) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				// A plain copy: io.Copy would splice through pipes that Go
				// pools and closes only at a later GC, which would look like
				// leaked fds below.
				io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 32<<10))
				c.Close()
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestProxyLoad: 200 concurrent tunnels, then Close: no goroutine or fd
// of the proxy's is left.
func TestProxyLoad(t *testing.T) {
	port := echoServer(t)
	baseG, baseFd := runtime.NumGoroutine(), countFds(t)
	rules, _ := ParseRules([]string{"echo.test"}, nil)
	p, err := NewProxy(ProxyConfig{Rules: rules, AllowLocal: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Resolver: fakeResolver{"echo.test": loopback}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	payload := bytes.Repeat([]byte("x"), 4096)
	conns := make(chan net.Conn, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			fmt.Fprintf(c, "CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test\r\n\r\n", port)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("CONNECT: %v %v", resp, err)
				c.Close()
				return
			}
			c.Write(payload)
			got := make([]byte, len(payload))
			if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, payload) {
				errs <- fmt.Errorf("echo: %v", err)
			}
			conns <- c // all 200 open at once until Close
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(conns) != n {
		t.Fatalf("%d tunnels up, want %d", len(conns), n)
	}
	p.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	close(conns)
	for c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (runtime.NumGoroutine() > baseG || countFds(t) > baseFd) {
		runtime.GC() // pooled splice pipes, if any, are closed by finalizers
		time.Sleep(20 * time.Millisecond)
	}
	if g, f := runtime.NumGoroutine(), countFds(t); g > baseG || f > baseFd {
		t.Errorf("after Close: %d goroutines (was %d), %d fds (was %d)", g, baseG, f, baseFd)
		ents, _ := os.ReadDir("/proc/self/fd")
		kinds := map[string]int{}
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			kinds[strings.SplitN(l, ":", 2)[0]]++
		}
		t.Logf("open fds by kind: %v", kinds)
	}
}

// recordingResolver answers exact names from a map and records every name
// it is asked, so a test sees what the proxy resolves.
type recordingResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked []string
}

func (r *recordingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if a, ok := r.addrs[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %q (test resolver)", host)
}

func (r *recordingResolver) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	asked := r.asked
	r.asked = nil
	return asked
}

// TestProxyDialsMatchedName: the name the proxy resolves is the name it
// matched, in canonical form, whatever spelling the client used; names
// that only a Unicode mapping or a stray byte made match are refused
// before any lookup, even where the resolver would answer for them.
func TestProxyDialsMatchedName(t *testing.T) {
	port := upstream(t)
	res := &recordingResolver{addrs: map[string][]netip.Addr{
		"a.wild.test":        loopback,
		"xn--bcher-kva.test": loopback,
		"key.test":           loopback,
		// What a resolver that maps or truncates names might answer for
		// the raw spellings.
		"\u212aey.test":             loopback,
		"x.\u0130.wild.test":        loopback,
		"evil.test\x00.a.wild.test": loopback,
		"ｋｅｙ.test":                  loopback,
	}}
	rules, err := ParseRules([]string{"*.wild.test", "xn--bcher-kva.test", "key.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []Event
	p, err := NewProxy(ProxyConfig{Rules: rules, AllowLocal: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Resolver: res, OnEvent: func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	proxy := l.Addr().String()
	lastEvent := func() Event {
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 {
			t.Fatal("no event")
		}
		return events[len(events)-1]
	}

	for _, tc := range []struct {
		host, want string // want: the name resolved, "" for refused
		connect    bool
	}{
		{"A.Wild.Test.", "a.wild.test", true},
		{"A.Wild.Test.", "a.wild.test", false},
		{"bücher.test", "xn--bcher-kva.test", false},
		{"XN--BCHER-KVA.TEST", "xn--bcher-kva.test", true},
		{"KEY.test", "key.test", false},
		{"\u212aey.test", "", false},
		{"x.\u0130.wild.test", "", false},
		{"evil.test\x00.a.wild.test", "", false},
		{"ｋｅｙ.test", "", false},
	} {
		if tc.connect {
			status, body := connectGet(t, proxy, net.JoinHostPort(tc.host, fmt.Sprint(port)))
			if ok := strings.HasPrefix(status, "200"); ok != (tc.want != "") {
				t.Errorf("CONNECT %q: %s %q", tc.host, status, body)
			}
		} else {
			code, c := socksConnect(t, proxy, tc.host, port)
			if c != nil {
				c.Close()
			}
			if ok := code == socksOK; ok != (tc.want != "") {
				t.Errorf("SOCKS5 %q: reply %d", tc.host, code)
			}
		}
		asked := res.take()
		ev := lastEvent()
		if tc.want == "" {
			if len(asked) != 0 {
				t.Errorf("%q refused, yet the proxy resolved %q", tc.host, asked)
			}
			if ev.Allowed || ev.Rule != "" {
				t.Errorf("%q: event %+v, want refused by no rule", tc.host, ev)
			}
			continue
		}
		if len(asked) != 1 || asked[0] != tc.want {
			t.Errorf("%q: resolved %q, want %q", tc.host, asked, tc.want)
		}
		// The name resolved is the name in the event, and the rule that
		// name matches is the rule that let it through.
		if rule, _ := rules.Match(ev.Host, port); !ev.Allowed || ev.Host != tc.want || rule != ev.Rule {
			t.Errorf("%q: event %+v; resolved %q, which matches %q", tc.host, ev, tc.want, rule)
		}
	}
}

// TestAllowLocalOnlyLocal: AllowLocal takes exact ip:port pairs of the
// addresses the checks refuse; a public address is refused, saying so.
func TestAllowLocalOnlyLocal(t *testing.T) {
	for _, tc := range []struct {
		in     string
		reason string // "" when accepted
	}{
		{"127.0.0.1:8080", ""},
		{"[::1]:8080", ""},
		{"10.0.0.5:5432", ""},
		{"192.168.1.20:80", ""},
		{"172.16.0.1:443", ""},
		{"169.254.169.254:80", ""},
		{"[::ffff:127.0.0.1]:80", ""},
		{"[fd00::1]:80", ""},
		{"8.8.8.8:53", "a public address"},
		{"1.1.1.1:443", "a public address"},
		{"[2001:4860:4860::8888]:53", "a public address"},
		{"[::ffff:8.8.8.8]:53", "a public address"},
		{"localhost:80", "not an exact ip:port pair"},
		{"127.0.0.1", "not an exact ip:port pair"},
		{"127.0.0.1:0", "not an exact ip:port pair"},
	} {
		_, err := NewProxy(ProxyConfig{AllowLocal: []string{tc.in}})
		var re *RuleError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("AllowLocal %s: %v, want it accepted", tc.in, err)
		case tc.reason != "" && (!errors.As(err, &re) || re.Input != tc.in || !strings.HasPrefix(re.Reason, tc.reason)):
			t.Errorf("AllowLocal %s: %v, want a RuleError saying %q", tc.in, err, tc.reason)
		}
	}
}

// TestProxyFailureIsNotRefusal: a name the policy allows that does not
// resolve, or an allowed address that refuses the connection, is the
// network's failure, not the policy's refusal: 502 from the proxy (SOCKS5:
// host unreachable), an event that is allowed and names the error, and
// nothing that says "blocked".
func TestProxyFailureIsNotRefusal(t *testing.T) {
	closed := func() int { // a loopback port nothing listens on
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}()
	tp := startProxy(t, []string{"nxdomain.test", "down.test"}, []string{fmt.Sprintf("127.0.0.1:%d", closed)}, fakeResolver{"down.test": loopback})
	for _, tc := range []struct{ host, err string }{
		{"nxdomain.test", "cannot resolve nxdomain.test"},
		{"down.test", "connect failed"},
	} {
		target := net.JoinHostPort(tc.host, fmt.Sprint(closed))
		status, body := connectGet(t, tp.addr, target)
		if !strings.HasPrefix(status, "502") || strings.Contains(body, "blocked") || !strings.Contains(body, tc.err) {
			t.Errorf("CONNECT %s: %s %q; want 502 naming %q, not blocked", target, status, body, tc.err)
		}
		if code, _ := socksConnect(t, tp.addr, tc.host, closed); code != socksHostUnreach {
			t.Errorf("SOCKS5 %s: reply %d, want %d (host unreachable)", tc.host, code, socksHostUnreach)
		}
	}
	evs := tp.Events()
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(evs), evs)
	}
	for _, e := range evs {
		if !e.Allowed || e.Reason != "" || e.Error == "" || e.Rule == "" || !strings.Contains(e.String(), "but it failed") {
			t.Errorf("event %+v (%s): want allowed by its rule, with the error", e, e)
		}
	}
}
