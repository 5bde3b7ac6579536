//go:build unix

package runtime

import (
	"bytes"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/leaks"
)

// BenchmarkScanBehind is the scan of 16 MiB of text written as io.Copy
// writes it (32 KiB at a time), in the copy ("in") and behind it
// ("behind"): wall time per op, and the process's CPU per op (the
// queue's copying and handoffs are what behind adds).
func BenchmarkScanBehind(b *testing.B) {
	line := []byte("go: downloading example.com/module v1.2.3 // build output, nothing secret\n")
	text := bytes.Repeat(line, (16<<20)/len(line))
	sc := leaks.New(nil)
	for _, mode := range []string{"in", "behind"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := processCPU(b)
			for b.Loop() {
				var w io.WriteCloser = sc.Stream(nil)
				if mode == "behind" {
					w = newScanBehind(w)
				}
				for i := 0; i < len(text); i += 32 << 10 {
					w.Write(text[i:min(len(text), i+32<<10)])
				}
				w.Close()
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
