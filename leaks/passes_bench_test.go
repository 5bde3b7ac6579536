package leaks

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkPasses compares, in the same rounds and alternated, the
// passes of a Scanner whose needles are 3 bytes or more with those of
// the same Scanner made to work as one with a shorter needle does (a
// pass at every byte for the needles, one of its own for the encoded
// runs), on build-log text and on this executable's bytes (binary).
// first-pass is the pass over raw bytes that finds the needles (with the
// expressions tried in their keyword windows) and the runs that may be
// encoded (not decoding them); stream is the whole Stream, 32 KiB
// writes. Timed by the thread's CPU time, so that what else runs on the
// machine weighs less: x_every_byte is the median over the every-byte
// passes' median, MB/s the median's throughput.
func BenchmarkPasses(b *testing.B) {
	s, every := passScanners(b, "K", "host-key-0123456789abcdef")
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
				var even, base []time.Duration
				for i := 0; b.Loop(); i++ {
					for k, sc := range []*Scanner{s, every} {
						if i%2 == 1 {
							k, sc = 1-k, []*Scanner{s, every}[1-k]
						}
						t0 := threadCPU()
						p.f(sc, in.b)
						if d := threadCPU() - t0; k == 0 {
							even = append(even, d)
						} else {
							base = append(base, d)
						}
					}
				}
				e, a := median(even), median(base)
				b.ReportMetric(float64(e)/float64(a), "x_every_byte")
				b.ReportMetric(float64(len(in.b))/1e6/e.Seconds(), "MB/s")
				b.ReportMetric(float64(len(in.b))/1e6/a.Seconds(), "every-byte-MB/s")
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
