package netns

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// IngressEvent is one connection accepted on a published host port and
// forwarded into a sandbox.
type IngressEvent struct {
	Time time.Time `json:"time"`
	// Peer is the address of the host-side client.
	Peer string `json:"peer"`
	// HostPort is the published port on the host that accepted it; Port
	// the sandbox's loopback port it was forwarded to.
	HostPort int `json:"host_port"`
	Port     int `json:"port"`
	// BytesIn went from the client into the sandbox, BytesOut back.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	// Error says why the connection could not be forwarded: nothing ran
	// in the sandbox then, or nothing listened on Port there.
	Error string `json:"error,omitempty"`
}

// IngressDialer connects to 127.0.0.1:port in a sandbox's network
// namespace. track, when not nil, is told of the connection before any
// byte is forwarded, and can follow it from then on.
type IngressDialer func(port int) (conn HalfCloser, track func(*Forwarding), err error)

// Forwarding is one connection being forwarded into a sandbox.
type Forwarding struct {
	ev              IngressEvent
	client, sandbox *countingConn
	sandboxEnded    chan struct{}
}

// Event is the connection's event, its bytes counted so far.
func (f *Forwarding) Event() IngressEvent {
	e := f.ev
	e.BytesIn, e.BytesOut = f.client.n.Load(), f.sandbox.n.Load()
	return e
}

// SandboxEnded is closed once the sandbox's side has ended (everything it
// sent was passed on): what a sandbox whose command has ended owes the
// event.
func (f *Forwarding) SandboxEnded() <-chan struct{} { return f.sandboxEnded }

// Ingress forwards the connections a host listener accepts to one
// loopback port in a sandbox. It reaches nothing else: the port is fixed
// when the Ingress is made and the sandbox side is dialed by the caller's
// IngressDialer, so no client can name another destination.
type Ingress struct {
	l    net.Listener
	port int
	dial IngressDialer
	// orphan gets the events of connections no sandbox took.
	orphan func(IngressEvent)

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  sync.WaitGroup
}

// NewIngress serves l, forwarding what it accepts to port through dial;
// the events of connections dial failed go to orphan (may be nil).
func NewIngress(l net.Listener, port int, dial IngressDialer, orphan func(IngressEvent)) *Ingress {
	in := &Ingress{l: l, port: port, dial: dial, orphan: orphan, conns: map[net.Conn]struct{}{}}
	in.done.Add(1)
	go in.serve()
	return in
}

// Addr is the host address the Ingress accepts on.
func (in *Ingress) Addr() net.Addr { return in.l.Addr() }

// Close stops accepting and ends the connections being forwarded.
func (in *Ingress) Close() error {
	err := in.l.Close()
	in.mu.Lock()
	for c := range in.conns {
		c.Close()
	}
	in.mu.Unlock()
	in.done.Wait()
	return err
}

func (in *Ingress) serve() {
	defer in.done.Done()
	for {
		c, err := in.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of fds and the like: wait rather than spin.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		in.mu.Lock()
		in.conns[c] = struct{}{}
		in.done.Add(1)
		in.mu.Unlock()
		go in.forward(c)
	}
}

func (in *Ingress) forward(c net.Conn) {
	defer in.done.Done()
	defer func() {
		in.mu.Lock()
		delete(in.conns, c)
		in.mu.Unlock()
		c.Close()
	}()
	ev := IngressEvent{Time: time.Now().UTC(), Peer: c.RemoteAddr().String(), Port: in.port}
	if a, ok := in.l.Addr().(*net.TCPAddr); ok {
		ev.HostPort = a.Port
	}
	hc, ok := c.(HalfCloser)
	if !ok {
		return
	}
	inner, track, err := in.dial(in.port)
	if err != nil {
		ev.Error = err.Error()
		if in.orphan != nil {
			in.orphan(ev)
		}
		return
	}
	defer inner.Close()
	f := &Forwarding{ev: ev, client: &countingConn{HalfCloser: hc}, sandbox: &countingConn{HalfCloser: inner}, sandboxEnded: make(chan struct{})}
	if track != nil {
		track(f)
	}
	splice(f.client, f.sandbox, func() { close(f.sandboxEnded) })
}

// countingConn counts the bytes read from its connection.
type countingConn struct {
	HalfCloser
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.HalfCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

var _ io.Reader = (*countingConn)(nil)
