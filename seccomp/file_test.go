//go:build linux

package seccomp

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseFileRefusesNonRegular: devices, FIFOs, directories and files
// past MaxProfileSize are refused at once, without reading them.
func TestParseFileRefusesNonRegular(t *testing.T) {
	d := t.TempDir()
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(d, "huge.json")
	if err := os.WriteFile(huge, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 8<<30); err != nil { // sparse
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{"/dev/zero", "character device"},
		{"/dev/urandom", "character device"},
		{fifo, "FIFO"},
		{d, "directory"},
		{huge, "more than"},
	}
	for _, tt := range tests {
		start := time.Now()
		_, err := ParseFile(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFile(%s) = %v, want an error about %q", tt.path, err, tt.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("ParseFile(%s) took %v", tt.path, d)
		}
	}
}

func TestParseFile(t *testing.T) {
	b, err := Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(p); err != nil {
		t.Errorf("ParseFile(the default profile): %v", err)
	}
	if _, err := ParseFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ParseFile(a missing file): nil error")
	}
}
