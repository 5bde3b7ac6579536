package leaks

import "testing"

// BenchmarkParts measures the passes of a look over raw text: the one
// over every byte for the needles (keywords, host values), with the
// expressions tried in the keyword windows; and the one finding the
// encoded runs (not decoding them).
func BenchmarkParts(b *testing.B) {
	text := buildLog(b, 16<<20)
	s := New(nil)
	s.AddValue("K", "host-key-0123456789abcdef")
	b.Run("needles", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			sc := scan{s: s, b: text, final: true}
			sc.view(text, 0, len(text), Raw)
		}
	})
	b.Run("runs", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			encodedRuns(text, func(int, int, Encoding) {})
		}
	})
}
