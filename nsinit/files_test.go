//go:build linux && cgo

package nsinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fileServer runs the C file server in this process on one end of a
// socketpair and returns a client on the other; the server ends with the
// test. It runs with the test's credentials, without a sandbox: these
// tests hold the server to its mechanics (what it opens, sends, lists and
// refuses); what the sandbox makes of a path is integration's to judge.
func fileServer(t *testing.T) (*FileClient, func() (int, bool)) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var rc int
	go func() {
		rc = serveFilesC(pair[1])
		unix.Close(pair[1])
		close(done)
	}()
	t.Cleanup(func() {
		unix.Close(pair[0])
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the file server did not end when its socket closed")
		}
	})
	// ended waits (10 s at most) for the server's end, and its status.
	ended := func() (int, bool) {
		select {
		case <-done:
			return rc, true
		case <-time.After(10 * time.Second):
			return 0, false
		}
	}
	return NewFileClient(pair[0]), ended
}

// TestFileServerOps: each operation of the file server, and its refusals.
func TestFileServerOps(t *testing.T) {
	c, _ := fileServer(t)
	d := t.TempDir()
	must(t, os.WriteFile(filepath.Join(d, "f"), []byte("hello"), 0o640))
	must(t, os.Symlink("f", filepath.Join(d, "link")))
	must(t, unix.Mkfifo(filepath.Join(d, "fifo"), 0o600))

	// A read: the file comes back, named by what was opened.
	st, f, err := c.Open(d+"/link", unix.O_RDONLY, 0, FileSend|FileRegular)
	if err != nil || st.Err != 0 || f == nil {
		t.Fatalf("open for reading: %+v, %v, %v", st, f, err)
	}
	// It comes back blocking, as asked (the server opens with
	// O_NONBLOCK lest a FIFO block it): nothing tries to poll it.
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("the file came back with flags %#o, %v: O_NONBLOCK set", fl, err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" || st.Path != d+"/f" || st.Size != 5 || st.FileMode() != 0o640 {
		t.Errorf("read %q of %+v", b, st)
	}
	// Without FileSend nothing comes back but the answer.
	if st, f, err := c.Open(d+"/f", unix.O_PATH, 0, 0); err != nil || st.Err != 0 || f != nil || st.Path != d+"/f" {
		t.Errorf("stat by O_PATH: %+v, %v, %v", st, f, err)
	}
	// The kernel's refusals, as errnos; the server goes on after each.
	for _, c2 := range []struct {
		name  string
		path  string
		flags int
		perm  uint32
		want  int
		errno syscall.Errno
	}{
		{"missing", d + "/nope", unix.O_RDONLY, 0, FileSend, unix.ENOENT},
		{"symlink with O_NOFOLLOW", d + "/link", unix.O_RDONLY | unix.O_NOFOLLOW, 0, FileSend, unix.ELOOP},
		{"a directory as a regular file", d, unix.O_RDONLY, 0, FileSend | FileRegular, unix.EISDIR},
		{"a FIFO as a regular file, without blocking", d + "/fifo", unix.O_RDONLY, 0, FileSend | FileRegular, unix.EINVAL},
		{"a flag not allowed", d + "/f", unix.O_RDONLY | unix.O_ASYNC, 0, FileSend, unix.EINVAL},
		{"a mode past 07777", d + "/g", unix.O_WRONLY | unix.O_CREAT, 0o10000, FileSend, unix.EINVAL},
		{"a want not known", d + "/f", unix.O_RDONLY, 0, 0x100, unix.EINVAL},
		{"O_EXCL on what exists", d + "/f", unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, 0o644, FileSend, unix.EEXIST},
	} {
		st, f, err := c.Open(c2.path, c2.flags, c2.perm, c2.want)
		if err != nil || st.Err != c2.errno || f != nil {
			t.Errorf("%s: %+v, %v, %v; want %v", c2.name, st, f, err, c2.errno)
		}
	}
	// A write creates with the mode asked (less the umask).
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	st, f, err = c.Open(d+"/new", unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o666, FileSend|FileRegular)
	if err != nil || st.Err != 0 {
		t.Fatalf("create: %+v, %v", st, err)
	}
	f.WriteString("written")
	f.Close()
	if b, _ := os.ReadFile(d + "/new"); string(b) != "written" {
		t.Errorf("the created file holds %q", b)
	}
	if fi, _ := os.Stat(d + "/new"); fi.Mode().Perm() != 0o644 {
		t.Errorf("created %v", fi.Mode())
	}
	// mkdir: made, then EEXIST.
	if e, err := c.Mkdir(d+"/sub", 0o750); err != nil || e != 0 {
		t.Errorf("mkdir: %v, %v", e, err)
	}
	if e, err := c.Mkdir(d+"/sub", 0o750); err != nil || e != unix.EEXIST {
		t.Errorf("mkdir again: %v, %v", e, err)
	}
	if e, err := c.Mkdir(d+"/sub2", 0o20000); err != nil || e != unix.EINVAL {
		t.Errorf("mkdir with a file type in its mode: %v, %v", e, err)
	}
	// A listing: every entry, lstat'ed.
	dir, ents, err := c.List(d)
	if err != nil || dir.Err != 0 || dir.Path != d {
		t.Fatalf("list: %+v, %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
		if e.Name == "link" && FileMode(e.Mode)&os.ModeSymlink == 0 {
			t.Errorf("link listed as %v", FileMode(e.Mode))
		}
	}
	sort.Strings(names)
	if want := []string{"f", "fifo", "link", "new", "sub"}; !slices.Equal(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
	if dir, _, err := c.List(d + "/f"); err != nil || dir.Err != unix.ENOTDIR {
		t.Errorf("list of a file: %+v, %v", dir, err)
	}
}

// TestFileServerLongListing: a directory of more entries than one reply
// frame holds comes back whole, over several frames.
func TestFileServerLongListing(t *testing.T) {
	c, _ := fileServer(t)
	d := t.TempDir()
	const n = 9000 // past WIRE_MAX_RECORDS (4096) twice
	long := fmt.Sprintf("%0200d", 0)
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(d, fmt.Sprintf("%s-%05d", long, i)))
		must(t, err)
		f.Close()
	}
	dir, ents, err := c.List(d)
	if err != nil || dir.Err != 0 || len(ents) != n {
		t.Fatalf("list: %+v, %d entries, %v", dir, len(ents), err)
	}
	// And the server still answers.
	if st, _, err := c.Open(d, unix.O_PATH, 0, 0); err != nil || st.Err != 0 {
		t.Errorf("after the listing: %+v, %v", st, err)
	}
}

// TestFileServerMalformed: a request the server cannot read ends it (it
// is out of step with the host), and the client says so.
func TestFileServerMalformed(t *testing.T) {
	for _, bad := range []struct {
		name string
		rec  Record
	}{
		{"a relative path", Record{Kind: fileOpen, Ints: []uint64{0, 0, 0}, Blobs: [][]byte{[]byte("rel")}}},
		{"a NUL in the path", Record{Kind: fileOpen, Ints: []uint64{0, 0, 0}, Blobs: [][]byte{[]byte("/a\x00b")}}},
		{"an unknown kind", Record{Kind: 0x7f, Blobs: [][]byte{[]byte("/")}}},
		{"the wrong ints", Record{Kind: fileMkdir, Ints: []uint64{1, 2}, Blobs: [][]byte{[]byte("/x")}}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			c, ended := fileServer(t)
			msg, err := EncodeWire(bad.rec)
			must(t, err)
			must(t, WriteFrame(c.fd, msg))
			rc, ok := ended()
			if !ok {
				t.Fatal("the server went on")
			}
			if rc != 1 {
				t.Errorf("the server ended with %d", rc)
			}
			if _, _, err := c.Open("/", unix.O_PATH, 0, 0); !errors.Is(err, ErrFileServer) {
				t.Errorf("after the server ended: %v", err)
			}
		})
	}
}

// FuzzFileRequest holds the server's check of a request (files_check) to
// memory safety, and to Go's decoder: what it passes is one record of a
// request's shape with an absolute path.
func FuzzFileRequest(f *testing.F) {
	for _, r := range []Record{
		{Kind: fileOpen, Ints: []uint64{0, 0o644, 3}, Blobs: [][]byte{[]byte("/a/b")}},
		{Kind: fileMkdir, Ints: []uint64{0o755}, Blobs: [][]byte{[]byte("/a")}},
		{Kind: fileList, Blobs: [][]byte{[]byte("/")}},
	} {
		b, _ := EncodeWire(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkFilesC(b)
		if err != nil {
			return
		}
		recs, gerr := DecodeWire(b)
		if gerr != nil || len(recs) != 1 {
			t.Fatalf("files_check passed what Go decodes as %v, %v", recs, gerr)
		}
		r := recs[0]
		shapes := map[uint16][2]int{fileOpen: {3, 1}, fileMkdir: {1, 1}, fileList: {0, 1}}
		s, ok := shapes[r.Kind]
		if !ok || len(r.Ints) != s[0] || len(r.Blobs) != s[1] || len(r.Blobs[0]) == 0 || r.Blobs[0][0] != '/' {
			t.Fatalf("files_check passed %+v", r)
		}
	})
}
