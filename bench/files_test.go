//go:build linux

package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// BenchmarkFiles compares the file door with the plain os calls on the
// same small file, alternated within each iteration: ReadFile against
// os.ReadFile, WriteFile against os.WriteFile. x_os is the door's median
// over the os call's, from the same iterations. The workspace's top level
// is left unchanged meanwhile (a file created there costs the next calls
// within 50 ms a read of it, about 100 µs each).
func BenchmarkFiles(b *testing.B) {
	sb := sandbox(b, nil)
	defer sb.Close()
	name := filepath.Join(workspace, "bench-file.txt")
	data := []byte("a small file, as an agent reads and writes them\n")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		b.Fatal(err)
	}
	// The door keeps its view of the workspace while the workspace's top
	// level is unchanged, but trusts it only once its last change is a
	// clock tick behind (50 ms, runtime's racyWindow): until then every
	// call reads the top level again. The file just made is such a change;
	// an agent's reads and writes of existing files are not.
	time.Sleep(100 * time.Millisecond)
	type pair struct {
		name      string
		door, std func() error
	}
	for _, p := range []pair{
		{"read", func() error { _, err := sb.ReadFile(name, runtime.ReadOptions{}); return err },
			func() error { _, err := os.ReadFile(name); return err }},
		{"write", func() error { _, err := sb.WriteFile(name, data, runtime.WriteOptions{}); return err },
			func() error { return os.WriteFile(name, data, 0o644) }},
	} {
		// Steady state: the first hundred calls of a fresh process also
		// pay its heap's growth (page faults, slow on this VM), which is
		// not the door's cost.
		for i := 0; i < 200; i++ {
			if err := p.door(); err != nil {
				b.Fatal(err)
			}
			_ = p.std()
		}
		b.Run(p.name, func(b *testing.B) {
			var door, std []time.Duration
			for i := 0; i < b.N; i++ {
				for j, f := range []func() error{p.door, p.std} {
					if i%2 == 1 {
						j, f = 1-j, []func() error{p.door, p.std}[1-j]
					}
					t0 := time.Now()
					if err := f(); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					if j == 0 {
						door = append(door, d)
					} else {
						std = append(std, d)
					}
				}
			}
			b.ReportMetric(float64(p50(door))/float64(p50(std)), "x_os")
			b.ReportMetric(float64(p50(door))/float64(time.Microsecond), "door-us")
			b.ReportMetric(float64(p50(std))/float64(time.Microsecond), "os-us")
		})
	}
}
