//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo (issue 47): hutch demo checks every claim it makes on the host
// and names the rule behind each refusal; it exits 0 only when all hold,
// and leaves nothing behind (its scratch directory, the file it tried in
// /etc).
func TestDemo(t *testing.T) {
	tmp := dir(t, "demo-tmp-")
	r := runCLIArgsEnv(t, []string{"TMPDIR=" + tmp}, "demo")
	if r.code != 0 {
		t.Fatalf("hutch demo: %s", r)
	}
	var claims, ok int
	for _, line := range strings.Split(r.stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "ok   "):
			claims++
			ok++
		case strings.HasPrefix(line, "FAIL "):
			claims++
			t.Errorf("a claim failed: %s", line)
		}
	}
	if claims != 7 || strings.Count(r.stdout, "     why: ") != 7 {
		t.Errorf("want 7 claims, each with its rule:\n%s", r.stdout)
	}
	for _, rule := range []string{`".env" is one of the default deny names`, `"~/.ssh" is on the default deny-list`, "network none", "pid namespace"} {
		if !strings.Contains(r.stdout, rule) {
			t.Errorf("no rule %q in:\n%s", rule, r.stdout)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("hutch demo left %v in its TMPDIR", left)
	}
	if left, _ := filepath.Glob("/etc/hutch-demo-*"); len(left) > 0 {
		t.Errorf("found %v in the host's /etc", left)
	}
}
