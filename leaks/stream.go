package leaks

import "sync"

// Overlap is how much of a stream's past a Stream keeps to find a secret
// that a write boundary cut: a secret (or an encoded run holding one)
// longer than this and split across writes can be missed.
const Overlap = 4096

// Stream scans a stream as it is written (an io.Writer), keeping only the
// last Overlap bytes between writes; OnFinding hears of each finding
// once, with its offset in the whole stream. Safe for concurrent writes.
type Stream struct {
	s         *Scanner
	onFinding func(Finding)

	mu   sync.Mutex
	tail []byte
	buf  []byte // the window: tail and the write, reused
	base int64  // the stream offset of tail[0]
	seen map[Finding]bool
	all  []Finding
}

// Stream returns a Stream scanning with s; onFinding may be nil.
func (s *Scanner) Stream(onFinding func(Finding)) *Stream {
	return &Stream{s: s, onFinding: onFinding, seen: map[Finding]bool{}}
}

// Write scans p after what came before; it never fails.
func (st *Stream) Write(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.buf = append(append(st.buf[:0], st.tail...), p...)
	window := st.buf
	for _, f := range st.s.Scan(window) {
		f.Offset += st.base
		if st.seen[f] {
			continue
		}
		st.seen[f] = true
		st.all = append(st.all, f)
		if st.onFinding != nil {
			st.onFinding(f)
		}
	}
	if len(window) > Overlap {
		drop := len(window) - Overlap
		st.base += int64(drop)
		window = window[drop:]
		// What lies wholly before the window cannot be found again.
		for f := range st.seen {
			if f.Offset+int64(f.Length) < st.base {
				delete(st.seen, f)
			}
		}
	}
	st.tail = append(st.tail[:0], window...)
	return len(p), nil
}

// Findings are the stream's findings so far, in the order found.
func (st *Stream) Findings() []Finding {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Finding(nil), st.all...)
}
