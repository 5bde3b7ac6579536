package runtime

import (
	"io"
	"sync"
)

// scanBehind passes what is written to a scanner (a leaks.Stream under
// LeaksReport) from a goroutine of its own, so that a command's output
// reaches its destination without waiting for the scan: the scan keeps
// up on another core, as far as one is free, instead of adding its time
// to the copy's. Each write is copied into a queue that holds at most
// behindMax bytes (512 KiB); a writer further ahead than that waits for
// the scan, so a command that outruns it is slowed, never scanned in part
// or held in memory without bound.
//
// Only a scan whose findings change nothing in the output can run
// behind: a redactor decides what is passed on.
type scanBehind struct {
	scan io.WriteCloser

	mu      sync.Mutex
	moved   sync.Cond // the queue grew or shrank, or was closed
	queue   [][]byte  // written, not yet scanned; the last may still fill
	lag     int       // the bytes in queue
	free    [][]byte  // scanned buffers, to reuse
	started bool      // the scan's goroutine runs
	closed  bool
	waiting int // goroutines waiting on moved: wake only these
	done    chan struct{}
}

// behindChunk is the size of the queue's buffers, what the scan takes at
// once: a buffer is scanned when full (or at Close), so that the copier
// and the scan hand over to each other a few times a megabyte, not at
// every read of the pipe (each handover wakes a goroutine: about 40% more
// CPU than the scan's own at 64 KiB).
const behindChunk = 256 << 10

// behindMax bounds what the scan lags behind the delivery: two buffers,
// one being scanned while the other fills, made only as the lag grows (a
// command writing little uses one). It is memory each output stream may
// hold: a server running many commands at once, each writing faster
// than its scan, holds this much for each of their streams.
const behindMax = 2 * behindChunk

// behindPool keeps the buffers of finished streams for the next.
var behindPool = sync.Pool{New: func() any { b := make([]byte, 0, behindChunk); return &b }}

func newScanBehind(scan io.WriteCloser) *scanBehind {
	s := &scanBehind{scan: scan, done: make(chan struct{})}
	s.moved.L = &s.mu
	return s
}

// Write queues a copy of p for the scan; it waits only while the scan is
// behindMax behind. It must not be called concurrently with itself or
// Close (one stream's copier is its only writer).
func (s *scanBehind) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 && !s.started {
		s.started = true
		go s.run()
	}
	for len(p) > 0 {
		for s.lag >= behindMax {
			s.wait()
		}
		k := min(len(p), behindMax-s.lag)
		if last := len(s.queue) - 1; last >= 0 && len(s.queue[last]) < behindChunk {
			// The scan takes whole buffers: the last one queued is
			// not being scanned yet.
			b := s.queue[last]
			k = min(k, behindChunk-len(b))
			s.queue[last] = append(b, p[:k]...)
		} else {
			k = min(k, behindChunk)
			s.queue = append(s.queue, append(s.buffer(), p[:k]...))
		}
		s.lag += k
		p = p[k:]
		if s.ready() {
			s.wake()
		}
	}
	return n, nil
}

// ready says the scan has a whole buffer to take, or the end.
func (s *scanBehind) ready() bool {
	return len(s.queue) > 1 || len(s.queue) == 1 && len(s.queue[0]) == behindChunk || s.closed
}

func (s *scanBehind) wait() {
	s.waiting++
	s.moved.Wait()
	s.waiting--
}

// wake wakes the other side if it waits.
func (s *scanBehind) wake() {
	if s.waiting > 0 {
		s.moved.Broadcast()
	}
}

// buffer is an empty buffer of behindChunk capacity, reused if one is.
func (s *scanBehind) buffer() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b[:0]
	}
	return (*behindPool.Get().(*[]byte))[:0]
}

func (s *scanBehind) run() {
	defer close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for !s.ready() {
			s.wait()
		}
		if len(s.queue) == 0 {
			return
		}
		b := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.scan.Write(b)
		s.mu.Lock()
		s.lag -= len(b)
		s.free = append(s.free, b)
		s.wake()
	}
}

// Close waits for the scan to reach the end of what was written, then
// closes the scanner (so the findings at the stream's end are told
// before Close returns) and gives the buffers back to the pool.
func (s *scanBehind) Close() error {
	s.mu.Lock()
	s.closed = true
	s.wake()
	started := s.started
	s.mu.Unlock()
	if started {
		<-s.done
	}
	for _, b := range s.free {
		behindPool.Put(&b)
	}
	s.free = nil
	return s.scan.Close()
}
