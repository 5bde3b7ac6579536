package leaks

import "testing"

func BenchmarkParts(b *testing.B) {
	text := buildLog(b, 16<<20)
	s := New(nil)
	b.Run("keywords", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			s.keywordWindows(text)
		}
	})
	b.Run("runs", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			encodedRuns(text)
		}
	})
	b.Run("values", func(b *testing.B) {
		s.AddValue("K", "host-key-0123456789abcdef")
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			s.scanView(text, 0, len(text), Raw, func(Finding) {})
		}
	})
}
