package netns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// sourceServer writes size bytes to every connection, then closes it.
func sourceServer(b *testing.B, size int) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	buf := make([]byte, 256<<10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; left -= len(buf) {
					n := min(left, len(buf))
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// BenchmarkProxyThroughput moves 64 MiB from a loopback server to a
// client directly and through the egress proxy as the runtime uses it (the
// proxy holds the sandboxed client's own TCP socket, handed over by the
// init once per connection, and tunnels with CONNECT to the upstream),
// alternating so drift cancels, and reports both rates and their ratio
// (target: proxied at least 0.70 of direct).
func BenchmarkProxyThroughput(b *testing.B) {
	const size = 64 << 20
	port := sourceServer(b, size)
	rules, _ := ParseRules([]string{"source.test"}, nil)
	p, err := NewProxy(ProxyConfig{Rules: rules, AllowLocal: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Resolver: fakeResolver{"source.test": loopback}})
	if err != nil {
		b.Fatal(err)
	}
	pl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(pl)
	defer p.Close()
	direct := func() time.Duration {
		t0 := time.Now()
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if n, _ := io.Copy(io.Discard, c); n != size {
			b.Fatalf("direct: %d bytes", n)
		}
		return time.Since(t0)
	}
	proxied := func() time.Duration {
		t0 := time.Now()
		c, err := net.Dial("tcp4", pl.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT source.test:%d HTTP/1.1\r\nHost: source.test\r\n\r\n", port)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		// What the reader buffered past the response, then the socket.
		n, _ := io.CopyN(io.Discard, br, int64(br.Buffered()))
		m, _ := io.Copy(io.Discard, c)
		if n+m != size {
			b.Fatalf("proxied: %d bytes", n)
		}
		return time.Since(t0)
	}
	var td, tp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		td += direct()
		tp += proxied()
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(td), "direct-MiB/s")
	b.ReportMetric(mbps(tp), "proxied-MiB/s")
	b.ReportMetric(mbps(tp)/mbps(td), "proxied/direct")
}
