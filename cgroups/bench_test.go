//go:build linux

package cgroups

import (
	"os/exec"
	"testing"
	"time"
)

// BenchmarkCreateDestroy is the per-command cost of a group with memory,
// pids and CPU limits when the command has already ended: mkdir in each
// hierarchy, the limit writes, and one rmdir per hierarchy.
func BenchmarkCreateDestroy(b *testing.B) {
	m := liveManager(b)
	l := Limits{MemoryBytes: 256 << 20, Pids: 256, CPUs: 1.5}
	for b.Loop() {
		g, err := m.Create(l)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateAddKillDestroy adds what a v1 host pays on top: attaching
// a live process (a cgroup.procs write per hierarchy) and tearing the
// group down while it still runs (freeze, kill, thaw, wait, rmdir). The
// process is started and reaped outside the timer.
func BenchmarkCreateAddKillDestroy(b *testing.B) {
	m := liveManager(b)
	l := Limits{MemoryBytes: 256 << 20, Pids: 256, CPUs: 1.5}
	for b.Loop() {
		b.StopTimer()
		cmd := exec.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		g, err := m.Create(l)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Add(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		if err := g.Destroy(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cmd.Wait()
		b.StartTimer()
	}
}

// BenchmarkAddAfterIdle measures attaching a process after the cgroup
// filesystem has been idle for a while: on v1 the first cgroup.procs write
// after an idle period waits for an RCU grace period (the threadgroup
// rwsem's writer side), later ones within it do not.
func BenchmarkAddAfterIdle(b *testing.B) {
	m := liveManager(b)
	for b.Loop() {
		b.StopTimer()
		g, err := m.Create(Limits{})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		b.StartTimer()
		if err := g.Add(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		g.Destroy()
		cmd.Wait()
		b.StartTimer()
	}
}

// BenchmarkUsage is the cost of reading a group's accounting.
func BenchmarkUsage(b *testing.B) {
	m := liveManager(b)
	g, err := m.Create(Limits{MemoryBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Destroy()
	for b.Loop() {
		if _, err := g.Usage(); err != nil {
			b.Fatal(err)
		}
	}
}
