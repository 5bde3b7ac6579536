package leaks

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkPasses compares, in the same rounds and in turn, the passes
// of a Scanner whose needles are 3 bytes or more: the block pass (where
// the processor has it), the pass at even offsets, and those of the same
// Scanner made to work as one with a shorter needle does (a pass at
// every byte for the needles, one of its own for the encoded runs), on
// build-log text and on this executable's bytes (binary). first-pass is
// the pass over raw bytes that finds the needles (with the expressions
// tried in their keyword windows) and the runs that may be encoded (not
// decoding them); stream is the whole Stream, 32 KiB writes. Timed by
// the thread's CPU time, so that what else runs on the machine weighs
// less: x_every_byte is the even pass's median over the every-byte
// passes' median, block-x_every_byte the block pass's, MB/s the medians'
// throughputs.
func BenchmarkPasses(b *testing.B) {
	s, every := passScanners(b, "K", "host-key-0123456789abcdef")
	blocked := New(nil)
	blocked.AddValue("K", "host-key-0123456789abcdef")
	scanners := []*Scanner{s, every}
	if blocked.blockTables() != nil {
		scanners = append(scanners, blocked)
	}
	firstPass := func(s *Scanner, in []byte) {
		sc := scan{s: s, b: in, final: true}
		sc.view(in, 0, len(in), Raw)
		if s == every {
			encodedRuns(in, func(int, int, Encoding) {})
		}
	}
	stream := func(s *Scanner, in []byte) {
		st := s.Stream(nil)
		for i := 0; i < len(in); i += 32 << 10 {
			st.Write(in[i:min(len(in), i+32<<10)])
		}
		st.Close()
	}
	for _, in := range []struct {
		name string
		b    []byte
	}{{"text", buildLog(b, 16<<20)}, {"binary", binaryData(b, 16<<20)}} {
		for _, p := range []struct {
			name string
			f    func(*Scanner, []byte)
		}{{"first-pass", firstPass}, {"stream", stream}} {
			b.Run(in.name+"/"+p.name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				times := make([][]time.Duration, len(scanners))
				for i := 0; b.Loop(); i++ {
					for j := range scanners {
						k := (i + j) % len(scanners)
						t0 := threadCPU()
						p.f(scanners[k], in.b)
						times[k] = append(times[k], threadCPU()-t0)
					}
				}
				mbs := func(d time.Duration) float64 { return float64(len(in.b)) / 1e6 / d.Seconds() }
				e, a := median(times[0]), median(times[1])
				b.ReportMetric(float64(e)/float64(a), "x_every_byte")
				b.ReportMetric(mbs(e), "MB/s")
				b.ReportMetric(mbs(a), "every-byte-MB/s")
				if len(scanners) > 2 {
					bl := median(times[2])
					b.ReportMetric(float64(bl)/float64(a), "block-x_every_byte")
					b.ReportMetric(mbs(bl), "block-MB/s")
				}
			})
		}
	}
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
