package leaks

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildLog is real text of this machine's: Go sources from the module
// cache, the documentation under /usr/share/doc (changelogs decompressed),
// the manual pages (decompressed) and Go's own sources, n bytes at most.
func buildLog(tb testing.TB, n int) []byte {
	var out []byte
	text := func(p string) bool {
		for _, suffix := range []string{".go", ".txt", "README", ".md"} {
			if strings.HasSuffix(p, suffix) {
				return true
			}
		}
		return strings.Contains(p, "changelog") || strings.HasPrefix(p, "/usr/share/man/man")
	}
	for _, root := range []string{filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod"), "/usr/share/doc", "/usr/share/man", "/usr/local/go/src"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || len(out) >= n {
				return filepath.SkipDir
			}
			if d.IsDir() || !text(p) || strings.Contains(p, "testdata") || strings.HasSuffix(p, "_test.go") {
				return nil // fixtures hold fake keys on purpose
			}
			b, err := os.ReadFile(p)
			if err == nil && strings.HasSuffix(p, ".gz") {
				var zr *gzip.Reader
				if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
					b, err = io.ReadAll(io.LimitReader(zr, 1<<20))
				}
			}
			if err == nil && len(b) < 1<<20 {
				out = append(out, b...)
			}
			return nil
		})
	}
	if len(out) < n/4 {
		tb.Skipf("only %d bytes of text here", len(out))
	}
	return out[:min(len(out), n)]
}

// binaryData is n bytes of this test's own executable, repeated: what
// a file read of a build's output holds.
func binaryData(tb testing.TB, n int) []byte {
	exe, err := os.Executable()
	if err != nil {
		tb.Skip(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil || len(b) == 0 {
		tb.Skip(err)
	}
	return bytes.Repeat(b, n/len(b)+1)[:n]
}

func BenchmarkScanner(b *testing.B) {
	text := buildLog(b, 16<<20)
	s := New(nil)
	s.AddValue("HOST_KEY", "host-key-0123456789abcdef")
	// read-only is the floor: the text copied through a 32 KiB buffer,
	// as the runtime reads a command's output, without scanning.
	b.Run("read-only", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		buf := make([]byte, 32<<10)
		for b.Loop() {
			// Wrapped, so that neither side's shortcut skips the buffer.
			io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{bytes.NewReader(text)}, buf)
		}
	})
	stream := func(name string, s *Scanner, text []byte, write int) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				st := s.Stream(nil)
				for i := 0; i < len(text); i += write {
					st.Write(text[i:min(len(text), i+write)])
				}
			}
		})
	}
	stream("stream", s, text, 32<<10)
	stream("stream-4k", s, text, 4<<10)
	// binary-stream: this executable's bytes, not text.
	stream("binary-stream", s, binaryData(b, 16<<20), 32<<10)
	b.Run("redact", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			r := s.Redactor(io.Discard, nil)
			for i := 0; i < len(text); i += 32 << 10 {
				r.Write(text[i:min(len(text), i+32<<10)])
			}
			r.Close()
		}
	})
	var alts []string
	for _, r := range DefaultRules() {
		alts = append(alts, r.Regex.String())
	}
	plain := regexp.MustCompile(strings.Join(alts, "|"))
	b.Run("plain-regexp", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			plain.FindAllIndex(text, -1)
		}
	})
}
