package leaks

import (
	"io"
	"slices"
	"sync"
)

// Redactor passes a stream on to its destination with every secret the
// Scanner finds replaced by [REDACTED:rule] (the whole encoded run for a
// secret found encoded). To find a secret that a write boundary cut it
// holds the last Overlap bytes back until more come or Close: output is
// late by up to that much, never partly a secret. OnFinding, if set,
// hears of each finding once, its offset in the redacted stream (where
// its marker stands).
type Redactor struct {
	s         *Scanner
	dst       io.Writer
	onFinding func(Finding)

	mu   sync.Mutex
	buf  []byte // already redacted, not yet passed on
	base int64  // the output offset the held-back text starts at, for findings
	err  error
}

// Redactor returns a Redactor writing to dst.
func (s *Scanner) Redactor(dst io.Writer, onFinding func(Finding)) *Redactor {
	return &Redactor{s: s, dst: dst, onFinding: onFinding}
}

// Write redacts p with what is held back and passes on all but the last
// Overlap bytes.
func (r *Redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.buf = append(r.buf, p...)
	r.redact()
	if n := len(r.buf) - Overlap; n > 0 {
		r.pass(n)
	}
	return len(p), r.err
}

// Close passes on what is held back; it does not close the destination.
func (r *Redactor) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redact()
	r.pass(len(r.buf))
	return r.err
}

// redact replaces every finding in buf by its marker. Markers match no
// rule, so text once redacted stays as it is.
func (r *Redactor) redact() {
	fs := r.s.Scan(r.buf)
	if len(fs) == 0 {
		return
	}
	// Overlapping findings (a raw match inside an encoded run) merge.
	type span struct {
		from, to int
		rule     string
	}
	var spans []span
	for _, f := range fs {
		if r.onFinding != nil {
			g := f
			g.Offset += r.base
			r.onFinding(g)
		}
		spans = append(spans, span{int(f.Offset), int(f.Offset) + f.Length, f.Rule})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	merged := spans[:1]
	for _, s := range spans[1:] {
		if last := &merged[len(merged)-1]; s.from < last.to {
			last.to = max(last.to, s.to)
		} else {
			merged = append(merged, s)
		}
	}
	out := make([]byte, 0, len(r.buf))
	at := 0
	for _, s := range merged {
		out = append(out, r.buf[at:s.from]...)
		out = append(out, "[REDACTED:"+s.rule+"]"...)
		at = s.to
	}
	r.buf = append(out, r.buf[at:]...)
}

// pass writes the first n bytes of buf to the destination.
func (r *Redactor) pass(n int) {
	if r.err == nil {
		_, r.err = r.dst.Write(r.buf[:n])
	}
	r.base += int64(n)
	r.buf = append(r.buf[:0], r.buf[n:]...)
}
