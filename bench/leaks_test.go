//go:build linux

package bench

import (
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// leakOutputSize is the output of BenchmarkLeakOutput's command, as the
// issue's target names it.
const leakOutputSize = 100 << 20

// leakRounds bounds BenchmarkLeakOutput's rounds: each moves 300 MB.
const leakRounds = 10

// BenchmarkLeakOutput is what the leak layer adds to a command with a
// lot of output: 100 MB of build-log-like text (Go sources and this
// machine's documentation, repeated) written by `cat` (at the pipe's
// speed) and by `gzip -dc` (as a program computing it would), Stdout
// discarded, under Leaks off, report (the default) and redact, alternated
// round by round.
// x_off is a method's p50 over off's from the same rounds; x_off_cpu the
// same for the host process's CPU (where the scanning runs).
func BenchmarkLeakOutput(b *testing.B) {
	name := filepath.Join(workspace, "build.log")
	if err := writeBuildLog(name, leakOutputSize); err != nil {
		b.Skip(err)
	}
	defer os.Remove(name)
	gz := name + ".gz"
	if err := gzipFile(name, gz); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(gz)
	for _, producer := range []struct {
		name string
		argv []string
	}{
		// cat moves the text at the pipe's speed: the worst case.
		{"cat", []string{"cat", name}},
		// gzip -dc makes it as a program does, computing: the usual case.
		{"gunzip", []string{"gzip", "-dc", gz}},
	} {
		b.Run(producer.name, func(b *testing.B) {
			var methods []method
			for _, a := range []runtime.LeakAction{runtime.LeaksOff, runtime.LeaksReport, runtime.LeaksRedact} {
				sb := sandbox(b, func(p *runtime.Policy) { p.Leaks, p.OutputLimit = a, runtime.Unlimited })
				defer sb.Close()
				methods = append(methods, timed(string(a), func() error {
					c := sb.Command(context.Background(), producer.argv[0], producer.argv[1:]...)
					c.Stdout = io.Discard
					if err := c.Run(); err != nil {
						return err
					}
					if len(c.Result.Leaks) > 0 {
						b.Fatalf("%s: %d findings in text without secrets: %+v", a, len(c.Result.Leaks), c.Result.Leaks[0])
					}
					return nil
				}))
			}
			ops := measure(b, min(b.N, leakRounds), methods...)
			self := func(c cpuTimes) time.Duration { return c.self }
			off := ops[string(runtime.LeaksOff)]
			for _, m := range methods {
				w := p50(walls(ops[m.name]))
				b.ReportMetric(float64(leakOutputSize)/1e6/w.Seconds(), m.name+"-MB/s")
				if m.name != string(runtime.LeaksOff) {
					b.ReportMetric(float64(w)/float64(p50(walls(off))), m.name+"-x_off")
					b.ReportMetric(float64(cpuPerOp(ops[m.name], self))/float64(cpuPerOp(off, self)), m.name+"-x_off_cpu")
				}
			}
		})
	}
}

// gzipFile compresses src into dst.
func gzipFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if _, err := io.Copy(zw, in); err != nil {
		out.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeBuildLog writes size bytes of text made of Go sources and the
// machine's documentation (fixtures left out: they hold fake keys on
// purpose), repeated as needed.
func writeBuildLog(name string, size int) error {
	var text []byte
	for _, root := range []string{"/usr/local/go/src", "/usr/share/doc"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || len(text) >= 16<<20 {
				return filepath.SkipDir
			}
			if d.IsDir() || strings.Contains(p, "testdata") || strings.HasSuffix(p, "_test.go") ||
				!(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".txt") || strings.HasSuffix(p, ".md")) {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				text = append(text, b...)
			}
			return nil
		})
	}
	if len(text) < 1<<20 {
		return os.ErrNotExist
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	for n := 0; n < size; n += len(text) {
		if _, err := f.Write(text[:min(len(text), size-n)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
