package netns

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnixWallResolve: a socket path is opened only beneath an allowed
// tree, whatever symlinks, relative names and modes say; the opened fd is
// the socket file itself.
func TestUnixWallResolve(t *testing.T) {
	base := t.TempDir()
	allowed, outside := filepath.Join(base, "allowed"), filepath.Join(base, "outside")
	for _, d := range []string{allowed, outside, filepath.Join(allowed, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	listen := func(p string) {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	listen(filepath.Join(allowed, "s.sock"))
	listen(filepath.Join(allowed, "sub", "s.sock"))
	listen(filepath.Join(outside, "s.sock"))
	listen(filepath.Join(allowed, "readonly.sock"))
	if err := os.Chmod(filepath.Join(allowed, "readonly.sock"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, "file"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{
		"escape":   "../outside/s.sock",
		"absolute": filepath.Join(outside, "s.sock"),
		"inner":    "sub/s.sock",
		"magic":    "/proc/self/fd/0",
	} {
		if err := os.Symlink(to, filepath.Join(allowed, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := unix.Open(allowed, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newUnixWall(-1, []WallRoot{{Path: allowed, Fd: root}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	t.Chdir(allowed)

	tests := []struct {
		path string
		want unix.Errno // 0: resolves to the socket
	}{
		{filepath.Join(allowed, "s.sock"), 0},
		{filepath.Join(allowed, "sub", "s.sock"), 0},
		{filepath.Join(allowed, "sub", "..", "s.sock"), 0},
		{"s.sock", 0},              // relative to the caller's cwd
		{"./sub/../sub/s.sock", 0}, // ditto
		{filepath.Join(allowed, "inner"), 0},
		{filepath.Join(outside, "s.sock"), unix.EACCES},
		{"../outside/s.sock", unix.EACCES},
		{filepath.Join(allowed, "..", "outside", "s.sock"), unix.EACCES},
		{filepath.Join(allowed, "escape"), unix.EACCES},
		{filepath.Join(allowed, "absolute"), unix.EACCES},
		{filepath.Join(allowed, "magic"), unix.EACCES}, // absolute: out of the tree
		{filepath.Join(allowed, "file"), unix.ECONNREFUSED},
		{filepath.Join(allowed, "readonly.sock"), unix.EACCES},
		{filepath.Join(allowed, "none.sock"), unix.ENOENT},
		{allowed, unix.EACCES},
		{"/", unix.EACCES},
	}
	for _, tt := range tests {
		fd, errno := w.resolve(os.Getpid(), tt.path)
		if errno != tt.want {
			t.Errorf("resolve(%q) = %v, want %v", tt.path, errno, tt.want)
		}
		if fd >= 0 {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
				t.Errorf("resolve(%q) opened something that is not a socket", tt.path)
			}
			unix.Close(fd)
		}
	}
}

// TestUnixWallMayWrite: the init's capabilities are never lent to the
// command: the socket file's mode bits decide, as for the command itself.
func TestUnixWallMayWrite(t *testing.T) {
	w := &UnixWall{uid: 1000, gids: []uint32{1000, 27}}
	tests := []struct {
		uid, gid uint32
		mode     uint32
		want     bool
	}{
		{1000, 1, 0o700, true},
		{1000, 1, 0o577, false}, // the owner's bits decide for the owner
		{2000, 27, 0o070, true},
		{2000, 27, 0o707, false},
		{2000, 2000, 0o775, false},
		{2000, 2000, 0o002, true},
		{0, 0, 0o755, false},
	}
	for _, tt := range tests {
		st := unix.Stat_t{Uid: tt.uid, Gid: tt.gid, Mode: unix.S_IFSOCK | tt.mode}
		if got := w.mayWrite(&st); got != tt.want {
			t.Errorf("uid %d gid %d mode %o: mayWrite = %v, want %v", tt.uid, tt.gid, tt.mode, got, tt.want)
		}
	}
}

// TestSockaddrUnix: the rebuilt address is family, path, NUL.
func TestSockaddrUnix(t *testing.T) {
	b := sockaddrUnix("/proc/self/fd/7")
	if len(b) != 2+len("/proc/self/fd/7")+1 || b[0] != unix.AF_UNIX || b[1] != 0 || string(b[2:len(b)-1]) != "/proc/self/fd/7" || b[len(b)-1] != 0 {
		t.Errorf("sockaddrUnix = %q", b)
	}
}

// TestPollVerdict: a poll of the listener that reports POLLERR alone is
// polled again, not taken as the filter's end: the kernel reports it
// when a signal (the Go runtime's SIGURG) interrupts the poll while it
// waits for the filter's lock, and a listener that stopped there left
// the command's later calls unanswered.
func TestPollVerdict(t *testing.T) {
	for _, tt := range []struct {
		revents int16
		want    pollAction
	}{
		{0, pollNothing},
		{unix.POLLIN, pollReceive},
		{unix.POLLIN | unix.POLLHUP, pollReceive},
		{unix.POLLHUP, pollHangUp},
		{unix.POLLHUP | unix.POLLERR, pollHangUp},
		{unix.POLLERR, pollAgain},
		{unix.POLLNVAL, pollAgain},
	} {
		if got := pollVerdict(tt.revents); got != tt.want {
			t.Errorf("pollVerdict(%#x) = %d, want %d", tt.revents, got, tt.want)
		}
	}
}
