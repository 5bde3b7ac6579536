//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/nsinit"
)

// TestPlanMemo: the next init gets the last plan while it is made of the
// same (what is read fresh, the cgroup tasks files) and the directories its
// Landlock carve-out listed are unchanged (a plan without Landlock lists
// nothing); a change to any of the three makes a new one.
func TestPlanMemo(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock: no carve-out is listed")
	}
	dir := t.TempDir()
	for _, n := range []string{"a", "secret"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := landlock.Build(landlock.Spec{ReadOnly: []string{dir}, Deny: []string{filepath.Join(dir, "secret")}}, landlock.ABI())
	if err != nil {
		t.Fatal(err)
	}
	config := nsinit.Config{Landlock: &rs, Skip: []nsinit.Layer{nsinit.LayerSeccomp}}
	// Older than a timestamp's granularity: its listing is kept.
	time.Sleep(1100 * time.Millisecond)
	var m planMemo
	encode := func(f fresh, c nsinit.Config) *nsinit.Plan {
		t.Helper()
		p, err := m.encode(f, c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var f fresh
	first := encode(f, config)
	if encode(f, config) != first {
		t.Error("a plan made again of the same, the carve-out unchanged")
	}
	named := fresh{named: named{paths: []string{filepath.Join(dir, ".env")}, counts: []int{1}}}
	last := encode(named, config)
	if last == first {
		t.Error("the plan of other fresh values given to an init")
	}
	if encode(named, config) != last {
		t.Error("a plan made again of the same fresh values")
	}
	withTasks := config
	withTasks.CgroupTasks = 1
	if withOne := encode(named, withTasks); withOne == last {
		t.Error("a plan with no tasks file given to an init that gets one")
	} else {
		last = withOne
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if encode(named, withTasks) == last {
		t.Error("the plan given again after a name was made in a directory its carve-out listed")
	}
	// Without Landlock nothing of the host is listed: the plan stays.
	plain := nsinit.Config{Skip: []nsinit.Layer{nsinit.LayerSeccomp}}
	if p := encode(f, plain); encode(f, plain) != p {
		t.Error("a plan without Landlock made again of the same")
	}
}
