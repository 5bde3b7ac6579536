//go:build linux && cgo

package nsinit

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/landlock"
)

// The Landlock step (confine.c's STEP_LL_*, landlockSteps) enforced in a
// re-executed test binary; every verdict is read by the host from the
// files the child left.

// landlockChildEnv carries a restrictChild job to the re-executed test binary.
const landlockChildEnv = "HUTCH_LANDLOCK_TEST_CHILD"

// restrictChild is what the re-executed test binary does: restrict its
// main thread, then try the job's operations and exit. It reports nothing
// that the test believes: the test looks at the files it left.
type restrictChild struct {
	Spec landlock.Spec
	// Copies are (from, to) pairs: read from, write its bytes to.
	Copies [][2]string
	// Dial is a TCP address to connect to; on success the child writes
	// "connected" into DialMark.
	Dial, DialMark string
	// Ready: once restricted, write Ready and wait for Go to exist
	// before the copies.
	Ready, Go string
	// Host has the ruleset begun as the runtime begins it, on the host
	// (Ruleset.Create), and passed to the steps as an fd.
	Host bool
}

func runLandlockChild(job string) int {
	runtime.LockOSThread() // never unlocked: the domain is this thread's
	var c restrictChild
	if err := json.Unmarshal([]byte(job), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := landlock.Build(c.Spec, landlock.ABI())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	hostFd := -1
	if c.Host {
		// The number the ruleset will have, as a config frame's fd has
		// its number before the plan is made.
		if hostFd, err = unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	recs, host, _, err := landlockSteps(r, hostFd, func(string) bool { return true })
	if err == nil && c.Host {
		var f *os.File
		if f, err = r.Create(host); err == nil {
			err = unix.Dup3(int(f.Fd()), hostFd, unix.O_CLOEXEC)
			f.Close()
		}
	}
	if err == nil {
		err = run(recs...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if c.Ready != "" {
		_ = writeFile(c.Ready, nil)
		for i := 0; i < 1000 && unix.Access(c.Go, unix.F_OK) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Raw system calls on this thread only: the Go runtime would run
	// os.ReadFile on this goroutine's thread too, but say so plainly.
	for _, cp := range c.Copies {
		b, err := readFile(cp[0])
		if err != nil {
			continue
		}
		_ = writeFile(cp[1], b)
	}
	if c.Dial != "" {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			host, port, _ := net.SplitHostPort(c.Dial)
			p, _ := strconv.Atoi(port)
			sa := &unix.SockaddrInet4{Port: p}
			copy(sa.Addr[:], net.ParseIP(host).To4())
			if unix.Connect(fd, sa) == nil {
				_ = writeFile(c.DialMark, []byte("connected"))
			}
		}
	}
	return 0
}

func readFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func writeFile(p string, b []byte) error {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, b)
	return err
}

func runRestricted(t *testing.T, c restrictChild) {
	t.Helper()
	cmd := childCommand(t, landlockChildEnv, c)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestRestrict checks, from the files left behind, that a restricted
// thread writes only to writable trees and reads nothing denied, while
// everything else stays readable: with the ruleset built by the steps
// alone, and begun on the host (the runtime's way) from the files its
// kept listings hold, the tree left alone long enough for them to be kept.
func TestLandlockRestrict(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, mode := range []string{"steps", "host"} {
		t.Run(mode, func(t *testing.T) { testLandlockRestrict(t, mode == "host") })
	}
}

func testLandlockRestrict(t *testing.T, host bool) {
	base := t.TempDir()
	ro := filepath.Join(base, "ro")
	rw := filepath.Join(base, "rw")
	secrets := filepath.Join(ro, "home", ".ssh")
	for _, d := range []string{rw, secrets, filepath.Join(ro, "home", "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(secrets, "id_ed25519"):        "SECRET-KEY",
		filepath.Join(ro, "home", "src", "main.go"): "PUBLIC-SOURCE",
		filepath.Join(ro, "home", "notes.txt"):      "PUBLIC-NOTES",
		filepath.Join(ro, "etc-passwd"):             "PUBLIC-PASSWD",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if host {
		time.Sleep(1100 * time.Millisecond) // past landlock's racyWithin
	}
	c := restrictChild{
		Host: host,
		Spec: landlock.Spec{ReadOnly: []string{ro}, Writable: []string{rw}, Deny: []string{secrets}},
		Copies: [][2]string{
			{filepath.Join(secrets, "id_ed25519"), filepath.Join(rw, "stolen")},
			{filepath.Join(ro, "home", "src", "main.go"), filepath.Join(rw, "source")},
			{filepath.Join(ro, "home", "notes.txt"), filepath.Join(rw, "notes")},
			{filepath.Join(ro, "etc-passwd"), filepath.Join(ro, "written-in-ro")},
			{filepath.Join(ro, "etc-passwd"), filepath.Join(base, "written-outside")},
		},
	}
	runRestricted(t, c)
	want := map[string]string{
		filepath.Join(rw, "source"):            "PUBLIC-SOURCE",
		filepath.Join(rw, "notes"):             "PUBLIC-NOTES",
		filepath.Join(rw, "stolen"):            "",
		filepath.Join(ro, "written-in-ro"):     "",
		filepath.Join(base, "written-outside"): "",
	}
	for p, w := range want {
		b, err := os.ReadFile(p)
		switch {
		case w == "" && err == nil:
			t.Errorf("host: %s exists (%q): the restricted thread wrote or read what it must not", p, b)
		case w != "" && string(b) != w:
			t.Errorf("host: %s = %q (%v), want %q: an allowed read or write failed", p, b, err, w)
		}
	}
}

// TestRestrictTCP: with TCP restricted (ABI 4+) only the listed port can
// be connected to.
func TestLandlockRestrictTCP(t *testing.T) {
	if landlock.ABI() < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules", landlock.ABI())
	}
	allowed, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.Close()
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rw := t.TempDir()
	port := uint16(allowed.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		name string
		addr string
		want bool
	}{{"listed port", allowed.Addr().String(), true}, {"other port", other.Addr().String(), false}} {
		mark := filepath.Join(rw, tc.name)
		runRestricted(t, restrictChild{
			Spec: landlock.Spec{ReadOnly: []string{"/"}, Writable: []string{rw}, RestrictTCP: true, ConnectTCP: []uint16{port}},
			Dial: tc.addr, DialMark: mark,
		})
		_, err := os.Stat(mark)
		if got := err == nil; got != tc.want {
			t.Errorf("%s: connected = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDenyFollowsPaths: a thread restricted with a denied path cannot read
// it after the host replaces it by rename or creates it while the thread
// runs (a mask would cover only the inode there at the start), while other
// files, old and new, stay readable. Verdicts are the files the child left.
func TestLandlockDenyFollowsPaths(t *testing.T) {
	if landlock.ABI() < 2 {
		t.Skipf("Landlock ABI %d: hutch carves denied paths from ABI 2", landlock.ABI())
	}
	base := t.TempDir()
	home, out := filepath.Join(base, "home"), filepath.Join(base, "out")
	for _, d := range []string{filepath.Join(home, "src"), out} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	netrc, aws := filepath.Join(home, ".netrc"), filepath.Join(home, ".aws")
	files := map[string]string{
		netrc:                            "OLD-SECRET",
		filepath.Join(home, "notes.txt"): "PUBLIC-NOTES",
		filepath.Join(home, "src", "a"):  "PUBLIC-SOURCE",
	}
	for p, c := range files {
		must(t, os.WriteFile(p, []byte(c), 0o644))
	}
	ready, goFile := filepath.Join(out, "ready"), filepath.Join(out, "go")
	cmd := childCommand(t, landlockChildEnv, restrictChild{
		Spec:  landlock.Spec{ReadOnly: []string{"/"}, Writable: []string{out}, Deny: []string{netrc, aws}},
		Ready: ready, Go: goFile,
		Copies: [][2]string{
			{netrc, filepath.Join(out, "netrc")},
			{filepath.Join(aws, "credentials"), filepath.Join(out, "aws")},
			{filepath.Join(home, "notes.txt"), filepath.Join(out, "notes")},
			{filepath.Join(home, "src", "a"), filepath.Join(out, "src-a")},
			{filepath.Join(home, "src", "b"), filepath.Join(out, "src-b")},
		},
	})
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000 && !exists(ready); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	// While the child runs: an editor's save of .netrc (a new inode
	// renamed over it), a first ~/.aws, a new file in a granted tree.
	tmp := filepath.Join(home, ".netrc.tmp")
	must(t, os.WriteFile(tmp, []byte("NEW-SECRET"), 0o644))
	must(t, os.Rename(tmp, netrc))
	must(t, os.MkdirAll(aws, 0o755))
	must(t, os.WriteFile(filepath.Join(aws, "credentials"), []byte("AWS-SECRET"), 0o644))
	must(t, os.WriteFile(filepath.Join(home, "src", "b"), []byte("PUBLIC-NEW"), 0o644))
	must(t, os.WriteFile(goFile, nil, 0o644))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	for name, want := range map[string]string{"netrc": "", "aws": "", "notes": "PUBLIC-NOTES", "src-a": "PUBLIC-SOURCE", "src-b": "PUBLIC-NEW"} {
		b, _ := os.ReadFile(filepath.Join(out, name))
		if string(b) != want {
			t.Errorf("host: the child copied %q for %s, want %q", b, name, want)
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
