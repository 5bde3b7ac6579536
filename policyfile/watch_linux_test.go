package policyfile

import (
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchLoadsWhole (issue 41): a policy file rewritten in place by a
// writer that pauses halfway is never put in effect half-written: at no
// moment does the Sandbox deny less than both the old and the new
// version; the new one is in effect once the writer has closed the file.
func TestWatchLoadsWhole(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	x, y := filepath.Join(dir, "x"), filepath.Join(dir, "y")
	path := filepath.Join(dir, "policy.toml")
	old := "version = 1\n[sandbox]\ndeny = [\"" + x + "\"]\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int32
	w, err := Watch(path, ws, "", func(err error) {
		if err == nil {
			reloads.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	denies := func(p string) bool { return slices.Contains(w.Sandbox().Policy().Deny, p) }
	// In place: truncated, the first half (which parses, and denies
	// nothing), a pause longer than any settling, then the rest.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("version = 1\n[sandbox]\n"); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if !denies(x) {
			t.Fatalf("the half-written file is in effect: the policy no longer denies %s", x)
		}
	}
	if _, err := f.WriteString("deny = [\"" + x + "\", \"" + y + "\"]\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !denies(y) && time.Now().Before(deadline) {
		if !denies(x) {
			t.Fatalf("a policy denying less than both versions was in effect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !denies(y) || !denies(x) {
		t.Fatalf("the complete new version is not in effect: %v", w.Sandbox().Policy().Deny)
	}
	// A rename into place is taken at once.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); denies(y) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if denies(y) {
		t.Error("a rename into place was not loaded")
	}
	t.Logf("%d reloads", reloads.Load())
}

// TestReadFileStable: a file changed between the two readings is refused,
// not parsed; one left alone is read.
func TestReadFileStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(path, []byte("version = 1\n[sandbox]\ndeny = [\"/x\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFileStable(path); err != nil {
		t.Fatalf("a file left alone: %v", err)
	}
	// The rewrite falls between the readings whatever the machine's
	// load (a writer racing the first reading was sometimes first).
	defer func() { pause = time.Sleep }()
	pause = func(time.Duration) {
		if err := os.WriteFile(path, []byte("version = 1\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	if f, err := ReadFileStable(path); err == nil {
		t.Errorf("a file rewritten between the readings was read: %+v", f)
	}
}
