//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// publishServer is a TCP server for BenchmarkPublish, the same program in
// the sandbox and on the host: per connection it reads one byte, then
// echoes it ("e") or sends the size in bytes it was started with ("b"),
// and closes.
const publishServer = `import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
print("ready", flush=True)
chunk = b"x" * (1 << 20)
while True:
    c, _ = s.accept()
    op = c.recv(1)
    if op == b"e":
        c.sendall(op)
    elif op == b"b":
        left = size
        while left > 0:
            n = min(left, len(chunk))
            c.sendall(chunk[:n])
            left -= n
    c.close()
`

// publishSize is what the throughput rows move per op.
const publishSize = 100 << 20

// BenchmarkPublish reports what a published port (Policy.Publish) costs
// against a direct connection to the same server on the host, alternated
// round by round: "connect" is a connection, a one-byte echo and the
// close; "transfer" moves 100 MB out of the server (MB/s for both).
func BenchmarkPublish(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("no python3")
	}
	script := filepath.Join(workspace, "publish_server.py")
	if err := os.WriteFile(script, []byte(publishServer), 0o644); err != nil {
		b.Fatal(err)
	}
	const port = 18765
	sb := sandbox(b, func(p *runtime.Policy) { p.Publish = []runtime.Publish{{Port: port}} })
	defer sb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inside := sb.Command(ctx, "python3", script, strconv.Itoa(port), strconv.Itoa(publishSize))
	if err := startReady(inside.StdoutPipe, inside.Start); err != nil {
		b.Fatalf("the server in the sandbox: %v", err)
	}
	host := exec.CommandContext(ctx, "python3", script, strconv.Itoa(port+1), strconv.Itoa(publishSize))
	if err := startReady(host.StdoutPipe, host.Start); err != nil {
		cancel()
		inside.Wait()
		b.Fatalf("the server on the host: %v", err)
	}
	defer func() { cancel(); host.Wait(); inside.Wait() }()
	published := net.JoinHostPort("127.0.0.1", strconv.Itoa(sb.Published()[0].HostPort))
	direct := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))

	b.Run("connect", func(b *testing.B) {
		added(b, timed("published", func() error { return exchange(published, 'e', 1) }),
			timed("direct", func() error { return exchange(direct, 'e', 1) }))
	})
	b.Run("transfer", func(b *testing.B) {
		ops := measure(b, b.N, timed("published", func() error { return exchange(published, 'b', publishSize) }),
			timed("direct", func() error { return exchange(direct, 'b', publishSize) }))
		rate := func(name string) float64 { return publishSize / p50(walls(ops[name])).Seconds() / 1e6 }
		b.ReportMetric(rate("published"), "published-MB/s")
		b.ReportMetric(rate("direct"), "direct-MB/s")
		b.ReportMetric(rate("direct")/rate("published"), "x_direct_time")
	})
}

// startReady starts a server and waits for its "ready" line.
func startReady(pipe func() (io.ReadCloser, error), start func() error) error {
	out, err := pipe()
	if err != nil {
		return err
	}
	if err := start(); err != nil {
		return err
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || !bytes.Equal(line, []byte("ready\n")) {
		return fmt.Errorf("no ready line (%q): %v", line, err)
	}
	return nil
}

// exchange connects to addr, sends op and reads want bytes to the end.
func exchange(addr string, op byte, want int64) error {
	c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte{op}); err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, c)
	if err == nil && n != want {
		err = errors.New("short read: " + strconv.FormatInt(n, 10) + " bytes")
	}
	return err
}
