package runtime

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchbox/hutch/leaks"
)

// gatedScan is a scanner that keeps what it is given and waits at each
// write until the test lets it go on.
type gatedScan struct {
	gate   chan struct{}
	mu     sync.Mutex
	got    bytes.Buffer
	closed bool
}

func (g *gatedScan) Write(p []byte) (int, error) {
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got.Write(p)
	return len(p), nil
}

func (g *gatedScan) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return nil
}

// TestScanBehindBounded: the writer goes on while the scan is held, up to
// behindMax bytes ahead, then waits for it; Close waits for the scan to
// take everything, in order.
func TestScanBehindBounded(t *testing.T) {
	g := &gatedScan{gate: make(chan struct{})}
	s := newScanBehind(g)
	var want bytes.Buffer
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2<<10) // 32 KiB, as io.Copy writes
	ahead := 0
	for ; ahead < behindMax; ahead += len(chunk) {
		want.Write(chunk)
		s.Write(chunk) // the scan has taken nothing: must not wait
	}
	// The scan's goroutine holds one buffer at its gate; the queue
	// holds the rest. A write beyond the bound waits.
	wrote := make(chan struct{})
	go func() {
		for range 3 {
			s.Write(chunk)
		}
		close(wrote)
	}()
	select {
	case <-wrote:
		t.Fatalf("wrote %d bytes beyond %d with the scan held", 3*len(chunk), behindMax)
	case <-time.After(100 * time.Millisecond):
	}
	for range 3 {
		want.Write(chunk)
	}
	close(g.gate) // the scan goes on
	<-wrote
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !g.closed || !bytes.Equal(g.got.Bytes(), want.Bytes()) {
		t.Errorf("scanner closed %v, got %d bytes, want %d in order", g.closed, g.got.Len(), want.Len())
	}
}

// TestScanBehindSameFindings: a Stream behind the copy finds what one in
// it finds, whatever the writes' sizes, and tells them before Close
// returns.
func TestScanBehindSameFindings(t *testing.T) {
	sc := leaks.New(nil)
	sc.AddValue("HOST", "host-secret-value-0123")
	var text []byte
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		text = append(text, "ordinary output line of a build, nothing to see\n"...)
		if i%97 == 0 {
			text = append(text, "token=host-secret-value-0123 and ghp_"...)
			for range 36 {
				text = append(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(62)])
			}
			text = append(text, '\n')
		}
	}
	direct := sc.Stream(nil)
	direct.Write(text)
	direct.Close()
	want := direct.Findings()
	if len(want) == 0 {
		t.Fatal("the text holds no findings: the test cannot fail")
	}
	for _, size := range []int{1, 7, 4096, 32 << 10, behindChunk + 1, len(text)} {
		var mu sync.Mutex
		var got []leaks.Finding
		s := newScanBehind(sc.Stream(func(f leaks.Finding) {
			mu.Lock()
			got = append(got, f)
			mu.Unlock()
		}))
		for i := 0; i < len(text); i += size {
			s.Write(text[i:min(len(text), i+size)])
		}
		s.Close()
		mu.Lock()
		if !slices.Equal(got, want) {
			t.Errorf("writes of %d: %d findings, want %d", size, len(got), len(want))
		}
		mu.Unlock()
	}
}

// TestScanBehindUnwritten: a stream never written to starts nothing and
// closes its scanner.
func TestScanBehindUnwritten(t *testing.T) {
	g := &gatedScan{gate: make(chan struct{})}
	s := newScanBehind(g)
	if err := s.Close(); err != nil || !g.closed || s.started {
		t.Errorf("Close: %v, closed %v, started %v", err, g.closed, s.started)
	}
}
