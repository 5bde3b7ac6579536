package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The UAPI values this package spells out must be the kernel's.
func TestConstantsMatchUAPI(t *testing.T) {
	for _, c := range []struct {
		name      string
		ours, uns uint64
	}{
		{"EXECUTE", accessExecute, unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"WRITE_FILE", accessWriteFile, unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{"READ_FILE", accessReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{"READ_DIR", accessReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{"TRUNCATE", accessTruncate, unix.LANDLOCK_ACCESS_FS_TRUNCATE},
		{"IOCTL_DEV", accessIoctlDev, unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"BIND_TCP", accessBindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP},
		{"CONNECT_TCP", accessConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP},
		{"SCOPE_ABSTRACT", scopeAbstract, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"SCOPE_SIGNAL", scopeSignal, unix.LANDLOCK_SCOPE_SIGNAL},
	} {
		if c.ours != c.uns {
			t.Errorf("%s: %#x here, %#x in x/sys/unix", c.name, c.ours, c.uns)
		}
	}
}

// TestCarveOutFollowsTheDirectory: a carve-out listed again for every
// spawn comes from the kept listing only while the directory's names are
// unchanged: a name made, removed or renamed since is seen at the next
// Rules, whether the last listing was kept (an old directory) or not (one
// changed within the last second).
func TestCarveOutFollowsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("a")
	touch("secret")
	names := func() []string {
		t.Helper()
		r, err := Build(Spec{ReadOnly: []string{dir}, Deny: []string{filepath.Join(dir, "secret")}}, 2)
		if err != nil {
			t.Fatal(err)
		}
		rules, _, err := r.Rules()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rl := range rules {
			if rl.Path != dir {
				out = append(out, filepath.Base(rl.Path))
			}
		}
		return out
	}
	check := func(step string, want ...string) {
		t.Helper()
		if got := names(); !slices.Equal(got, want) {
			t.Errorf("%s: rules for %q, want %q", step, got, want)
		}
	}
	kept := func() bool {
		listed.mu.Lock()
		defer listed.mu.Unlock()
		_, ok := listed.dirs[dir]
		return ok
	}
	// Changed just now: listed, not kept.
	check("new directory", "a")
	touch("b")
	check("a name made at once", "a", "b")
	if kept() {
		t.Errorf("a listing of a directory changed within %v was kept", racyWithin)
	}

	time.Sleep(racyWithin + 100*time.Millisecond)
	check("old directory", "a", "b")
	if !kept() {
		t.Error("the listing of an unchanged old directory was not kept")
	}
	touch("c")
	check("a name made since the kept listing", "a", "b", "c")
	time.Sleep(racyWithin + 100*time.Millisecond)
	check("kept again", "a", "b", "c")
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	check("renamed since", "b", "c", "d")
	time.Sleep(racyWithin + 100*time.Millisecond)
	check("kept again", "b", "c", "d")
	if err := os.Remove(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	check("removed since", "c", "d")
}

// TestHeldFiles: a kept listing holds its entries open, one file each,
// for the host's rulesets (Create); a listing replaced closes its files,
// and rules made from it before still go into a ruleset, their paths
// opened again.
func TestHeldFiles(t *testing.T) {
	if ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "secret"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(Spec{ReadOnly: []string{dir}, Deny: []string{filepath.Join(dir, "secret")}}, ABI())
	if err != nil {
		t.Fatal(err)
	}
	// openIn counts this process's fds open on files in dir, from /proc.
	openIn := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && filepath.Dir(l) == dir {
				n++
			}
		}
		return n
	}
	time.Sleep(racyWithin + 100*time.Millisecond)
	before, _, err := r.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if n := openIn(); n != 2 {
		t.Errorf("kept listing: %d files open in the directory, want 2 (a and b, not secret)", n)
	}
	for _, ru := range before {
		if ru.Path != dir && ru.held == nil {
			t.Errorf("rule on %s holds no file", ru.Path)
		}
	}
	// Replaced: the listing goes, and its files with it.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Rules(); err != nil {
		t.Fatal(err)
	}
	if n := openIn(); n != 0 {
		t.Errorf("after the directory changed: %d files still open in it, want 0", n)
	}
	// The rules made before: a is gone (no rule), b opened again.
	f, err := r.Create(before)
	if err != nil {
		t.Fatalf("Create from rules whose listing went: %v", err)
	}
	f.Close()
}

// TestListedCurrent: rules are current while every directory their
// carve-out listed is unchanged, by the listings' own rule; a listing not
// kept (changed within racyWithin) never is; rules with no carve-out, or
// none at all, always are.
func TestListedCurrent(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "secret"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(Spec{ReadOnly: []string{dir}, Deny: []string{filepath.Join(dir, "secret")}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	current := func(step string, want bool) {
		t.Helper()
		_, from, err := r.Rules()
		if err != nil {
			t.Fatal(err)
		}
		if got := from.Current(); got != want {
			t.Errorf("%s: Current() = %v, want %v", step, got, want)
		}
	}
	current("listed right after a change", false)
	time.Sleep(racyWithin + 100*time.Millisecond)
	_, from, err := r.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if !from.Current() {
		t.Error("an unchanged old directory: not current")
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if from.Current() {
		t.Error("current after a name was made in the listed directory")
	}
	plain, err := Build(Spec{ReadOnly: []string{dir}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, from, err := plain.Rules(); err != nil || !from.Current() {
		t.Errorf("rules without a carve-out: current %v (%v), want true", from.Current(), err)
	}
	if !(Listed{}).Current() {
		t.Error("no listing at all: not current")
	}
}
