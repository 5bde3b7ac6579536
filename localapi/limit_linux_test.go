package localapi

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestLimitConnections: past n connections at once, the next waits to be
// accepted until one of them is closed.
func TestLimitConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConnections(inner, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with two open")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted once one closed")
	}
	second.Close()
}

// TestBodyTimeout: a client that sends a request's body too slowly gets
// its connection closed after the body timeout, nothing run.
func TestBodyTimeout(t *testing.T) {
	old := bodyTimeout
	bodyTimeout = 300 * time.Millisecond
	defer func() { bodyTimeout = old }()
	sock, _ := server(t)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Headers promising a body, and only its first byte.
	if _, err := c.Write([]byte("POST /v1/exec HTTP/1.1\r\nHost: hutch\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && !strings.Contains(line, "400") && !strings.Contains(line, "408") {
		t.Errorf("a stalled body got %q", line)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stalled body held the connection for %v", d)
	}
}

// TestExecOutlivesBodyTimeout: the body timeout bounds the reading of a
// request's body, not its command. An exec whose command runs past it
// (its body read long before) ends as the command does, not killed by the
// connection's read deadline (a command of a minute or more, an install
// or a build, was killed at BodyTimeout).
func TestExecOutlivesBodyTimeout(t *testing.T) {
	old := bodyTimeout
	bodyTimeout = 300 * time.Millisecond
	defer func() { bodyTimeout = old }()
	sock, _ := server(t)
	start := time.Now()
	stdout, _, res := execEvents(t, sock, `{"command":"sleep 1.5; echo done"}`)
	if *res.ExitStatus != 0 || stdout != "done\n" || res.Error != "" {
		t.Errorf("a command of 1.5s under a body timeout of 300ms: exit %d, stdout %q, error %q after %v; want 0, \"done\\n\"",
			*res.ExitStatus, stdout, res.Error, time.Since(start).Round(time.Millisecond))
	}
}
