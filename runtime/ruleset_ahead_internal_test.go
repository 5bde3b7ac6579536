//go:build linux

package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// landlockRulesetFds counts this process's Landlock ruleset fds, as the
// host's /proc shows them.
func landlockRulesetFds(t *testing.T) int {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l == "anon_inode:[landlock-ruleset]" {
			n++
		}
	}
	return n
}

// TestRulesetMadeAhead: a Sandbox that has run more than one command has
// the next cold init's Landlock ruleset begun once a command has ended,
// off the next command's start; one that has run a single command (a
// hutch run) has none made. Seen in this process's fds: the ruleset held
// between commands, handed to the next init (which enforces Landlock),
// none left after Close.
func TestRulesetMadeAhead(t *testing.T) {
	sb, err := New(DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	run := func() *Result {
		t.Helper()
		c := sb.Command(context.Background(), "true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		return c.Result
	}
	base := landlockRulesetFds(t)
	if r := run(); !slices.Contains(r.Layers, LayerLandlock) {
		t.Skip("no Landlock here: no ruleset to make ahead")
	}
	time.Sleep(100 * time.Millisecond)
	if n := landlockRulesetFds(t); n != base {
		t.Errorf("host: %d Landlock rulesets held after one command, want %d (none made ahead)", n, base)
	}
	held := func() *os.File {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for landlockRulesetFds(t) != base+1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := landlockRulesetFds(t); n != base+1 {
			t.Fatalf("host: %d Landlock rulesets held after a command, want %d (the next one's)", n, base+1)
		}
		sb.rulesets.mu.Lock()
		defer sb.rulesets.mu.Unlock()
		return sb.rulesets.ruleset
	}
	run()
	first := held()
	if r := run(); !slices.Contains(r.Layers, LayerLandlock) || r.LandlockABI == 0 {
		t.Errorf("the command given the ruleset made ahead: layers %v, Landlock ABI %d", r.Layers, r.LandlockABI)
	}
	if next := held(); next == first {
		t.Error("the ruleset made ahead was not handed to the next init")
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if n := landlockRulesetFds(t); n != base {
		t.Errorf("host: %d Landlock rulesets held after Close, want %d", n, base)
	}
}
