//go:build linux

package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// BenchmarkFiles compares the file door with the plain os calls on the
// same file, alternated within each iteration: ReadFile against
// os.ReadFile (a small file, and 1 MiB), WriteFile against os.WriteFile.
// x_os is the door's median over the os call's, from the same iterations.
// The door's calls go to a file server inside the sandbox (an init kept
// while it is used): x_cold is the door's median over a cold command's
// (/bin/true in a fresh init of the same Sandbox), timed every tenth
// iteration of the same rounds, the bound the door must stay well under.
// first is the first call of a Sandbox, which builds the file server.
func BenchmarkFiles(b *testing.B) {
	sb := sandbox(b, nil)
	defer sb.Close()
	small := filepath.Join(workspace, "bench-file.txt")
	data := []byte("a small file, as an agent reads and writes them\n")
	large := filepath.Join(workspace, "bench-file-1MiB.bin")
	if err := os.WriteFile(small, data, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(large, bytes.Repeat([]byte{0xa5, 0x5a}, 1<<19), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("first", func(b *testing.B) {
		var first []time.Duration
		for i := 0; i < b.N; i++ {
			fresh := sandbox(b, nil)
			t0 := time.Now()
			if _, err := fresh.ReadFile(small, runtime.ReadOptions{}); err != nil {
				b.Fatal(err)
			}
			first = append(first, time.Since(t0))
			fresh.Close()
		}
		b.ReportMetric(ms(p50(first)), "p50-ms")
	})
	type pair struct {
		name      string
		door, std func() error
	}
	for _, p := range []pair{
		{"read", func() error { _, err := sb.ReadFile(small, runtime.ReadOptions{}); return err },
			func() error { _, err := os.ReadFile(small); return err }},
		{"read-1MiB", func() error {
			_, err := sb.ReadFile(large, runtime.ReadOptions{Mode: runtime.ReadBinary, Limit: 2 << 20})
			return err
		}, func() error { _, err := os.ReadFile(large); return err }},
		{"write", func() error { _, err := sb.WriteFile(small, data, runtime.WriteOptions{}); return err },
			func() error { return os.WriteFile(small, data, 0o644) }},
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
			var door, std, cold []time.Duration
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
				if i%10 == 0 {
					t0 := time.Now()
					if err := hutchRun(sb)(); err != nil {
						b.Fatal(err)
					}
					cold = append(cold, time.Since(t0))
				}
			}
			b.ReportMetric(float64(p50(door))/float64(p50(std)), "x_os")
			b.ReportMetric(float64(p50(door))/float64(p50(cold)), "x_cold")
			b.ReportMetric(float64(p50(door))/float64(time.Microsecond), "door-us")
			b.ReportMetric(float64(p50(std))/float64(time.Microsecond), "os-us")
			b.ReportMetric(float64(p50(cold))/float64(time.Microsecond), "cold-us")
		})
	}
}
