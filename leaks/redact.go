package leaks

import (
	"cmp"
	"io"
	"slices"
	"strings"
	"sync"
)

// Redactor passes a stream on to its destination with every secret the
// Scanner finds replaced by [REDACTED:rule] (the whole encoded run for a
// secret found encoded). It holds back only what may yet be part of a
// secret, as a Stream keeps it (the last token, the 64 bytes before the
// end where a keyword still to come may have its match start, the
// window of a keyword near the end; Overlap bytes at most, from a
// token's start), until more comes or Close: output is late by that
// much, never partly a secret.
// OnFinding, if set, hears of each finding once, when its marker goes
// out, its offset in the redacted stream (where its marker stands).
type Redactor struct {
	s         *Scanner
	dst       io.Writer
	onFinding func(Finding)

	mu     sync.Mutex
	buf    []byte // from the last look's keep on, and what came since
	base   int64  // the input offset of buf[0]
	cut    bool   // buf starts within the input, not at its start
	told   map[Finding]bool
	sent   int64     // the input offset up to which output went out
	out    int64     // the output offset: how much went out
	spans  []span    // what to redact that has not gone out, by input offset
	untold []Finding // found, by input offset, to tell when its marker goes out
	w      []byte    // the output, reused
	marks  []mark    // reused
	err    error
}

// span is a stretch of input to replace by rule's marker.
type span struct {
	from, to int64
	rule     string
}

// Redactor returns a Redactor writing to dst.
func (s *Scanner) Redactor(dst io.Writer, onFinding func(Finding)) *Redactor {
	return &Redactor{s: s, dst: dst, onFinding: onFinding, told: map[Finding]bool{}}
}

// Write redacts p with what is held back and passes on all that no
// secret can still reach.
func (r *Redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.buf = append(r.buf, p...)
	r.look(false)
	return len(p), r.err
}

// Close passes on what is held back; it does not close the destination.
func (r *Redactor) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.look(true)
	return r.err
}

// Held says whether what the Redactor holds back holds a secret, known
// already or one were the stream to end now, as Stream.Held.
func (r *Redactor) Held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans) > 0 || held(r.s, r.buf)
}

func (r *Redactor) look(final bool) {
	sc := scan{s: r.s, b: r.buf, final: final}
	sc.run()
	// A finding found again is a span already.
	for _, f := range sc.news(r.base, r.cut, r.told) {
		r.spans = append(r.spans, span{f.Offset, f.Offset + int64(f.Length), f.Rule})
		if r.onFinding != nil {
			r.untold = append(r.untold, f)
		}
	}
	// Overlapping findings (a raw match inside an encoded run) merge.
	slices.SortFunc(r.spans, func(a, b span) int { return cmp.Or(cmp.Compare(a.from, b.from), strings.Compare(a.rule, b.rule)) })
	merged := r.spans[:0]
	for _, s := range r.spans {
		if len(merged) > 0 && s.from < merged[len(merged)-1].to {
			last := &merged[len(merged)-1]
			last.to = max(last.to, s.to)
		} else {
			merged = append(merged, s)
		}
	}
	r.spans = merged
	// All before keep is settled, and so is a span that starts before.
	limit := r.base + int64(sc.keep)
	for _, s := range r.spans {
		if s.from < limit {
			limit = max(limit, s.to)
		}
	}
	w, marks := r.w[:0], r.marks[:0]
	at := r.sent
	for _, s := range r.spans {
		if s.from >= limit {
			break
		}
		if s.to <= at {
			continue // went out already, found again
		}
		w = append(w, r.buf[at-r.base:max(at, s.from)-r.base]...)
		marks = append(marks, mark{max(at, s.from), s.to, r.out + int64(len(w))})
		w = append(w, "[REDACTED:"+s.rule+"]"...)
		at = s.to
	}
	if at < limit {
		w = append(w, r.buf[at-r.base:limit-r.base]...)
		at = limit
	}
	r.w, r.marks = w, marks
	if len(w) > 0 && r.err == nil {
		_, r.err = r.dst.Write(w)
	}
	r.out += int64(len(w))
	r.sent = at
	r.spans = slices.DeleteFunc(r.spans, func(s span) bool { return s.to <= at })
	// A finding is told once its marker went out, where it stands.
	r.untold = slices.DeleteFunc(r.untold, func(f Finding) bool {
		if f.Offset >= at {
			return false
		}
		i := slices.IndexFunc(marks, func(m mark) bool { return f.Offset < m.to && m.from < f.Offset+int64(f.Length) })
		if i >= 0 {
			f.Offset = marks[i].out
		} else {
			f.Offset = r.out // its marker went out before: it was found late
		}
		r.onFinding(f)
		return true
	})
	r.base += int64(sc.keep)
	r.cut = !final && (r.cut || sc.keep > 0)
	r.buf = append(r.buf[:0], r.buf[sc.keep:]...)
}

// mark is where the marker for the input from from to to went out.
type mark struct{ from, to, out int64 }
