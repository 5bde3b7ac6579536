package netns

import (
	"errors"
	"io"
	"net"
)

// HalfCloser is a connection whose sending side can be shut down alone
// (*net.TCPConn, *net.UnixConn).
type HalfCloser interface {
	net.Conn
	CloseWrite() error
}

// Splice copies a to b and b to a until both directions end, passing each
// end-of-stream on as a half-close, so protocols that close their sending
// side first keep working. Between TCP and unix sockets io.Copy moves the
// bytes with splice(2) where the kernel can.
func Splice(a, b HalfCloser) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src HalfCloser) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			// A reset on one side ends both.
			_ = src.Close()
			_ = dst.Close()
		}
		_ = dst.CloseWrite()
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
}
