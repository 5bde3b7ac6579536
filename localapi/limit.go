package localapi

import (
	"net"
	"sync"
)

// MaxConnections is how many client connections a server takes at once
// (LimitConnections); more wait to be accepted.
const MaxConnections = 1024

// LimitConnections accepts at most n connections of l at once: the next
// Accept waits until one of them is closed, so that a client opening
// connections without end exhausts neither the server's fds nor its
// goroutines.
func LimitConnections(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
