package leaks

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildLog is real text of this machine's: Go sources from the module
// cache and the documentation under /usr/share/doc, n bytes at most.
func buildLog(tb testing.TB, n int) []byte {
	var out []byte
	for _, root := range []string{filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod"), "/usr/share/doc", "/usr/local/go/src"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || len(out) >= n {
				return filepath.SkipDir
			}
			if d.IsDir() || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".txt") || strings.HasSuffix(p, "README") || strings.HasSuffix(p, ".md") || strings.Contains(p, "changelog")) {
				return nil
			}
			if strings.Contains(p, "testdata") || strings.HasSuffix(p, "_test.go") {
				return nil // fixtures hold fake keys on purpose
			}
			b, err := os.ReadFile(p)
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
	for _, c := range []struct {
		name  string
		write int
	}{{"stream", 32 << 10}, {"stream-4k", 4 << 10}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				st := s.Stream(nil)
				for i := 0; i < len(text); i += c.write {
					st.Write(text[i:min(len(text), i+c.write)])
				}
			}
		})
	}
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
