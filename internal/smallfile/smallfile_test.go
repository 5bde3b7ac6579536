package smallfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRead: a regular file within the bound is read whole; one past it,
// a directory and a FIFO are refused, the FIFO without blocking.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small, large, fifo := filepath.Join(dir, "small"), filepath.Join(dir, "large"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(small, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(large, []byte("123456"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want, err string
	}{
		{small, "12345", ""},
		{large, "", "more than 5 bytes, the most a test file may have"},
		{dir, "", "not a regular file (d---------): a test file is refused unread"},
		{fifo, "", "not a regular file (p---------): a test file is refused unread"},
	} {
		f, err := os.OpenFile(tc.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Read(f, 5, "a test file")
		f.Close()
		if string(b) != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q, %v; want %q, %q", filepath.Base(tc.path), b, err, tc.want, tc.err)
		}
	}
}
