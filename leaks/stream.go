package leaks

import "sync"

// Overlap is how much of a stream's past a Stream or a Redactor keeps at
// most to find a secret that a write boundary cut: a secret (or an
// encoded run or token holding one) longer than this and split across
// writes can be missed.
const Overlap = 4096

// Stream scans a stream as it is written (an io.Writer), keeping between
// writes only what may yet be part of a secret: the last token (which
// the next write may continue), the 64 bytes before the end (a keyword
// still to come may have its match start there), and around a keyword
// or a part of one near the end the bytes its rule's expression is tried
// in; Overlap bytes at most, from a token's start.
// OnFinding hears of each finding once, with its offset in the whole
// stream, when it is settled: one that reaches the end of what was
// written, or whose keyword's window may still grow (its keyword is
// within 576 bytes of the end), waits for more or Close. Safe for
// concurrent writes.
type Stream struct {
	s         *Scanner
	onFinding func(Finding)

	mu   sync.Mutex
	buf  []byte // from the last look's keep on, and what was written since
	base int64  // the stream offset of buf[0]
	cut  bool   // buf starts within the stream, not at its start
	told map[Finding]bool
	all  []Finding
}

// Stream returns a Stream scanning with s; onFinding may be nil.
func (s *Scanner) Stream(onFinding func(Finding)) *Stream {
	return &Stream{s: s, onFinding: onFinding, told: map[Finding]bool{}}
}

// Write scans p after what came before; it never fails.
func (st *Stream) Write(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.buf = append(st.buf, p...)
	st.look(false)
	return len(p), nil
}

// Close reports the findings that reach the end of the stream, which
// waited for more; it never fails. What is written after starts afresh.
func (st *Stream) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.look(true)
	return nil
}

// Held says whether what the Stream holds back would be a finding were
// the stream to end now: for a caller that must act on a secret as soon
// as it is written (stop the writer), not once more comes or Close. Its
// findings are still reported, once, when settled.
func (st *Stream) Held() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return held(st.s, st.buf)
}

// held says whether b, were it the end of a stream, holds a finding.
func held(s *Scanner, b []byte) bool {
	sc := scan{s: s, b: b, final: true}
	sc.run()
	return len(sc.found) > 0
}

func (st *Stream) look(final bool) {
	sc := scan{s: st.s, b: st.buf, final: final}
	sc.run()
	for _, f := range sc.news(st.base, st.cut, st.told) {
		st.all = append(st.all, f)
		if st.onFinding != nil {
			st.onFinding(f)
		}
	}
	st.base += int64(sc.keep)
	st.cut = !final && (st.cut || sc.keep > 0)
	st.buf = append(st.buf[:0], st.buf[sc.keep:]...)
}

// Findings are the stream's findings so far, in the order found.
func (st *Stream) Findings() []Finding {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Finding(nil), st.all...)
}
