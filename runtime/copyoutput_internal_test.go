//go:build linux

package runtime

import (
	"bytes"
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyOutputGrowsPipe: a writer that fills the copy's reads gets a
// pipe of grownPipeSize (as the kernel reports the pipe's size), one
// that writes little keeps the default, and one past maxGrownPipes
// keeps it too; every byte arrives in order either way, and the copy
// gives its place back when it ends.
func TestCopyOutputGrowsPipe(t *testing.T) {
	r, w, err := commandPipe(true)
	if err != nil {
		t.Fatal(err)
	}
	defaultSize, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	r.Close()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if defaultSize >= grownPipeSize {
		t.Skipf("pipes of %d bytes to begin with: none is grown", defaultSize)
	}
	for _, tc := range []struct {
		name     string
		size     int
		full     bool // maxGrownPipes pipes are grown already
		wantPipe int
	}{
		{"fast writer", 4 << 20, false, grownPipeSize},
		{"small writer", 1 << 10, false, defaultSize},
		{"budget spent", 4 << 20, true, defaultSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.full {
				grownPipes.Add(maxGrownPipes)
				defer grownPipes.Add(-maxGrownPipes)
			}
			before := grownPipes.Load()
			r, w, err := commandPipe(true)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte(i*7 + i>>16)
			}
			pipeSize := make(chan int, 1)
			go func() {
				for off := 0; off < len(data); off += 64 << 10 {
					w.Write(data[off:min(off+64<<10, len(data))])
				}
				// What the pipe is once the whole output went through
				// it (the copy grows it after a full read at most).
				n, _ := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
				pipeSize <- n
				w.Close()
			}()
			var got bytes.Buffer
			if err := copyOutput(struct{ io.Writer }{&got}, r, nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Errorf("copied %d bytes, not the %d written", got.Len(), len(data))
			}
			if n := <-pipeSize; n != tc.wantPipe {
				t.Errorf("pipe of %d bytes, want %d", n, tc.wantPipe)
			}
			if n := grownPipes.Load(); n != before {
				t.Errorf("grown pipes %d after the copy, %d before", n, before)
			}
		})
	}
}
