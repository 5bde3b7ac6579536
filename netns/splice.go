package netns

import (
	"errors"
	"io"
	"net"
	"sync"
)

// HalfCloser is a connection whose sending side can be shut down alone
// (*net.TCPConn, *net.UnixConn).
type HalfCloser interface {
	net.Conn
	CloseWrite() error
}

// copyBufs are the buffers tunnels copy through. 256 KiB per direction:
// on loopback, a plain copy through a buffer this size moved 0.75-0.78 of
// direct throughput, where splice(2) (io.Copy's choice between sockets)
// reached 0.50-0.62 and 64-128 KiB buffers 0.60-0.73
// (BenchmarkProxyThroughput, 2 cores). A tunnel holds two while open.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// Splice copies a to b and b to a until both directions end, passing each
// end-of-stream on as a half-close, so protocols that close their sending
// side first keep working.
func Splice(a, b HalfCloser) { splice(a, b, nil) }

// splice is Splice; bEnded, if not nil, is called once the copy from b
// to a has ended.
func splice(a, b HalfCloser, bEnded func()) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src HalfCloser) {
		buf := copyBufs.Get().(*[]byte)
		// The wrappers hide ReadFrom/WriteTo, which would pick splice.
		_, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
		copyBufs.Put(buf)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			// A reset on one side ends both.
			_ = src.Close()
			_ = dst.Close()
		}
		_ = dst.CloseWrite()
		if src == b && bEnded != nil {
			bEnded()
		}
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
}
