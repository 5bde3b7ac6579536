package netns

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIngressForwards: what a host client sends reaches the one backend
// the dialer names, for the port the Ingress was made with, and back;
// the Forwarding counts each direction; a dial that fails closes the
// client's connection and reports the event as an orphan.
func TestIngressForwards(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(c)
				c.Write([]byte(strings.ToUpper(string(b))))
				c.Close()
			}()
		}
	}()

	var mu sync.Mutex
	var dialed []int
	var tracked []*Forwarding
	var orphans []IngressEvent
	fail := false
	dial := func(port int) (HalfCloser, func(*Forwarding), error) {
		mu.Lock()
		defer mu.Unlock()
		dialed = append(dialed, port)
		if fail {
			return nil, nil, errors.New("nothing runs")
		}
		c, err := net.Dial("tcp", backend.Addr().String())
		if err != nil {
			return nil, nil, err
		}
		return c.(*net.TCPConn), func(f *Forwarding) {
			mu.Lock()
			tracked = append(tracked, f)
			mu.Unlock()
		}, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngress(l, 8000, dial, func(e IngressEvent) {
		mu.Lock()
		orphans = append(orphans, e)
		mu.Unlock()
	})
	defer in.Close()

	c, err := net.Dial("tcp", in.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("through the ingress: %q, %v", got, err)
	}
	mu.Lock()
	if len(tracked) != 1 || len(dialed) != 1 || dialed[0] != 8000 {
		t.Fatalf("dialed %v, tracked %d", dialed, len(tracked))
	}
	f := tracked[0]
	fail = true
	mu.Unlock()
	select {
	case <-f.SandboxEnded():
	case <-time.After(time.Minute):
		t.Fatal("the backend's side never ended")
	}
	e := f.Event()
	if e.BytesIn != 5 || e.BytesOut != 5 || e.Port != 8000 || e.HostPort != in.Addr().(*net.TCPAddr).Port || !strings.HasPrefix(e.Peer, "127.0.0.1:") {
		t.Errorf("event %+v", e)
	}

	// No backend: the client's connection is closed, the event an orphan.
	c, err = net.Dial("tcp", in.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read %d, %v; want the connection closed", n, err)
	}
	c.Close()
	in.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(orphans) != 1 || orphans[0].Error != "nothing runs" {
		t.Errorf("orphans %+v", orphans)
	}
	if _, err := net.Dial("tcp", in.Addr().String()); err == nil {
		t.Error("the ingress accepts after Close")
	}
}
