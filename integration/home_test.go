//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestHomeKeepsCaches: with Policy.Home, a go build's cache outlives its
// command, in the chosen directory: a second build of the same program in
// a new command adds next to nothing to it (the first put hundreds of
// entries there), and the host's real home gets none of it. Judged by the
// host's files, not by timing.
func TestHomeKeepsCaches(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	ws, home := dir(t, "ws-"), dir(t, "home-")
	mod := filepath.Join(ws, "hello")
	must(os.MkdirAll(mod, 0o755))
	must(os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644))
	must(os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n"), 0o644))
	sb := newSandbox(t, ws, func(p *runtime.Policy) {
		p.Home = home
		p.Env = []string{"GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS="}
	})
	defer sb.Close()
	cache := filepath.Join(home, ".cache", "go-build")
	build := func() int {
		t.Helper()
		cmd := sb.Command(context.Background(), goBin, "build", "-o", filepath.Join(mod, "hello"), ".")
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(mod, "hello")); err != nil {
			t.Fatalf("no binary on the host: %v", err)
		}
		return countFiles(cache)
	}
	first := build()
	second := build()
	t.Logf("cache entries in %s: %d after the first build, %d after the second", cache, first, second)
	if first < 100 {
		t.Errorf("the first build left %d entries in the chosen home's cache, want hundreds", first)
	}
	if second-first > 10 {
		t.Errorf("the second build added %d entries: it did not use the first one's cache", second-first)
	}
	if n := countFiles(filepath.Join(fakeHome, ".cache", "go-build")); n > 0 {
		t.Errorf("the host's real home got %d cache entries", n)
	}
	// The file door writes there too, and names it as agents do.
	fi, err := sb.WriteFile(filepath.Join(home, "notes", "todo.txt"), []byte("x\n"), runtime.WriteOptions{})
	if err != nil || fi.HomePath != "~/notes/todo.txt" {
		t.Errorf("WriteFile in the home: %+v, %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "notes", "todo.txt")); err != nil || string(b) != "x\n" {
		t.Errorf("the host's file: %q, %v", b, err)
	}
}

func countFiles(root string) int {
	n := 0
	_ = filepath.WalkDir(root, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestHomeRefused: a Home that is not a directory of its own is refused,
// naming the field; nothing is set up.
func TestHomeRefused(t *testing.T) {
	ws := dir(t, "ws-")
	file := filepath.Join(ws, "f")
	must(os.WriteFile(file, nil, 0o644))
	for _, tt := range []struct{ home, why string }{
		{"relative", "relative"},
		{filepath.Join(ws, "missing"), "missing"},
		{file, "a file"},
		{fakeHome, "the host's home"},
		{filepath.Dir(fakeHome), "holding the host's home"},
		{"/", "the whole tree"},
		{"/proc/self", "a kernel tree"},
		{filepath.Join(fakeHome, ".ssh"), "a denied path"},
	} {
		_, err := runtime.New(func() runtime.Policy { p := runtime.DefaultPolicy(ws); p.Home = tt.home; return p }())
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Home" {
			t.Errorf("Home %s (%s): %v, want a PolicyError on Home", tt.home, tt.why, err)
		}
	}
}

// TestRustupUnderDefaultPolicy: rustup's cargo runs under the default
// policy, its toolchains found through RUSTUP_HOME, read-only.
func TestRustupUnderDefaultPolicy(t *testing.T) {
	rustup := os.Getenv("RUSTUP_HOME")
	if rustup == "" {
		rustup = "/root/.rustup"
	}
	cargo, err := exec.LookPath("cargo")
	if _, serr := os.Stat(rustup); err != nil || serr != nil {
		t.Skipf("rustup is not installed here (cargo on PATH: %v; %s: %v)", err, rustup, serr)
	}
	t.Setenv("RUSTUP_HOME", rustup)
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	defer sb.Close()
	if out, err := sb.Command(context.Background(), cargo, "--version").CombinedOutput(); err != nil {
		t.Errorf("cargo --version: %v\n%s", err, out)
	}
}

// TestReadOnlyCarveOut: Policy.ReadOnly keeps a file and a directory of
// the workspace as they are, whatever a command or the file door tries;
// the rest of the workspace stays writable. Judged by the host's files.
func TestReadOnlyCarveOut(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "identity.md"), []byte("I am the agent\n"), 0o644))
	must(os.MkdirAll(filepath.Join(ws, "data", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "data", "sub", "f"), []byte("kept\n"), 0o644))
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.ReadOnly = []string{"identity.md", filepath.Join(ws, "data")} })
	defer sb.Close()
	before := listTree(t, ws)
	script := `echo x >> identity.md; rm -f identity.md; mv identity.md other.md; touch data/new; echo y > data/sub/f;
		rm -rf data; mv data data2; chmod 777 data/sub/f; ln -s /etc data/sub/l; echo ok > free.txt; exit 0`
	if out, err := sb.Command(context.Background(), "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := sb.WriteFile(filepath.Join(ws, "data", "sub", "f"), []byte("z\n"), runtime.WriteOptions{}); !errors.Is(err, runtime.ErrDenied) {
		t.Errorf("WriteFile into a read-only path: %v", err)
	}
	if _, err := sb.ReadFile("identity.md", runtime.ReadOptions{}); err != nil {
		t.Errorf("ReadFile of a read-only path: %v", err)
	}
	after := listTree(t, ws)
	free := filepath.Join(ws, "free.txt")
	if !slices.Contains(after, listTree(t, free)[0]) {
		t.Error("the rest of the workspace was not writable")
	}
	// The workspace itself changed (free.txt); the read-only paths not.
	kept := func(l []string) []string {
		return slices.DeleteFunc(slices.Clone(l), func(s string) bool { return strings.HasPrefix(s, free+" ") || strings.HasPrefix(s, ws+" ") })
	}
	if after, before := kept(after), kept(before); !slices.Equal(after, before) {
		t.Errorf("the read-only paths changed:\n%v\nwas\n%v", after, before)
	}
	for _, bad := range []string{"/etc/passwd", "../outside", ws} {
		_, err := runtime.New(func() runtime.Policy { p := runtime.DefaultPolicy(ws); p.ReadOnly = []string{bad}; return p }())
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "ReadOnly[0]" {
			t.Errorf("ReadOnly %s: %v, want a PolicyError on ReadOnly[0]", bad, err)
		}
	}
}

// TestAppIsolation: an ordinary agent reaches no app directory; an app
// agent reads its own, writes only its data, and reaches no other app's.
// Commands and the file door alike, judged by the host's files. (The rest
// of an app's workspace is TestAppConfined's.)
func TestAppIsolation(t *testing.T) {
	ws := dir(t, "ws-")
	for _, f := range []string{"apps/a1/code.txt", "apps/a1/data/d.txt", "apps/a2/secret.txt"} {
		must(os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755))
		must(os.WriteFile(filepath.Join(ws, f), []byte("content of "+f+"\n"), 0o644))
	}
	// The command copies what it reads to out, a directory it writes.
	script := `for f in apps/a1/code.txt apps/a1/data/d.txt apps/a2/secret.txt; do cat $f > $OUT/seen-$(basename $f) 2>/dev/null; done
		for f in apps/a1/data/new apps/a1/new apps/a2/new apps/new; do echo x > $f 2>/dev/null; done; exit 0`
	for _, tt := range []struct {
		id, out            string
		seen, written      []string // what the command read, wrote (others: nothing)
		readable, writable []string // what the file door allows
	}{
		{"", ".", nil, nil, nil, nil},
		{"a1", "apps/a1/data", []string{"code.txt", "d.txt"}, []string{"apps/a1/data/new"}, []string{"apps/a1/code.txt", "apps/a1/data/d.txt"}, []string{"apps/a1/data/api"}},
	} {
		t.Run("app="+tt.id, func(t *testing.T) {
			for _, f := range []string{"seen-code.txt", "seen-d.txt", "seen-secret.txt"} {
				os.Remove(filepath.Join(ws, tt.out, f))
			}
			for _, f := range []string{"apps/a1/data/new", "apps/a1/new", "apps/a2/new", "apps/new", "apps/a1/data/api"} {
				os.Remove(filepath.Join(ws, f))
			}
			sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Apps = &runtime.AppIsolation{ID: tt.id} })
			defer sb.Close()
			c := sb.Command(context.Background(), "sh", "-c", script)
			c.Env = []string{"OUT=" + tt.out}
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, f := range []string{"apps/a1/code.txt", "apps/a1/data/d.txt", "apps/a2/secret.txt"} {
				// What the command copied out, against the host's file: only
				// the very bytes prove it was read.
				b, _ := os.ReadFile(filepath.Join(ws, tt.out, "seen-"+filepath.Base(f)))
				real, _ := os.ReadFile(filepath.Join(ws, f))
				if read := len(b) > 0 && bytes.Equal(b, real); read != slices.Contains(tt.seen, filepath.Base(f)) {
					t.Errorf("the command read %s: %v (%q)", f, read, b)
				}
				if len(b) > 0 && !bytes.Equal(b, real) {
					t.Errorf("the command copied %q out of %s, which holds %q", b, f, real)
				}
			}
			for _, f := range []string{"apps/a1/data/new", "apps/a1/new", "apps/a2/new", "apps/new"} {
				_, err := os.Stat(filepath.Join(ws, f))
				if wrote := err == nil; wrote != slices.Contains(tt.written, f) {
					t.Errorf("the command wrote %s: %v", f, wrote)
				}
			}
			for _, f := range []string{"apps/a1/code.txt", "apps/a1/data/d.txt", "apps/a2/secret.txt"} {
				_, err := sb.ReadFile(f, runtime.ReadOptions{})
				if ok := err == nil; ok != slices.Contains(tt.readable, f) {
					t.Errorf("ReadFile %s: %v", f, err)
				}
			}
			for _, f := range []string{"apps/a1/data/api", "apps/a1/api", "apps/a2/api"} {
				_, err := sb.WriteFile(filepath.Join(ws, f), []byte("x"), runtime.WriteOptions{})
				if ok := err == nil; ok != slices.Contains(tt.writable, f) {
					t.Errorf("WriteFile %s: %v", f, err)
				}
			}
		})
	}
	for _, a := range []runtime.AppIsolation{{Dir: "/abs"}, {Dir: "../up"}, {ID: "a/b"}, {ID: ".."}} {
		_, err := runtime.New(func() runtime.Policy { p := runtime.DefaultPolicy(ws); p.Apps = &a; return p }())
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, "Apps.") {
			t.Errorf("Apps %+v: %v, want a PolicyError on Apps.Dir or Apps.ID", a, err)
		}
	}
}

// TestAppConfined: an app agent (--app a1) reads nothing of its workspace
// but its own app's directory and writes nothing but that directory's
// data: the workspace is an empty read-only directory holding only the way
// down to apps/a1, and stays the working directory. Commands and the file
// door (hutch read, hutch write) alike, judged by the host's files: the
// markers planted at the workspace's top and in another app never appear
// in anything the command printed or wrote.
func TestAppConfined(t *testing.T) {
	ws := dir(t, "ws-")
	rootMarker, a2Marker := "ROOT-MARKER-"+filepath.Base(ws), "A2-MARKER-"+filepath.Base(ws)
	files := map[string]string{
		"notes.md": rootMarker + "\n", "sub/deep.txt": rootMarker + "\n", "apps/a2/secret": a2Marker + "\n",
		"apps/a1/code.txt": "code\n", "apps/a1/data/d.txt": "data\n",
	}
	for f, content := range files {
		must(os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755))
		must(os.WriteFile(filepath.Join(ws, f), []byte(content), 0o644))
	}
	// A way out of the data directory the host left there.
	must(os.Symlink(filepath.Join(ws, "notes.md"), filepath.Join(ws, "apps/a1/data/ln")))
	// Where the view has the path's directory, a write fails read-only;
	// where it hides it, there is no such directory (dash's words for
	// ENOENT, or the C library's).
	const erofs, enoent = "Read-only file system", "Directory nonexistent|No such file or directory"
	refused := map[string]string{"notes2.md": erofs, "notes.md": erofs, "apps/new": erofs, "apps/a1/new": erofs,
		"apps/a1/code.txt": erofs, "sub/new": enoent, "apps/a2/new": enoent, "apps/a2/secret": enoent}
	out := "apps/a1/data/"
	script := `pwd > ` + out + `pwd; ls -A . > ` + out + `ls-root; ls -A apps > ` + out + `ls-apps
		for f in ` + strings.Join(slices.Sorted(maps.Keys(refused)), " ") + `; do { echo x >> "$f"; } 2>> ` + out + `write-errors; done
		rm -rf notes.md sub apps/a2 2>> ` + out + `write-errors; mkdir apps/a1/d2 2>> ` + out + `write-errors
		cat notes.md sub/deep.txt apps/a2/secret apps/a1/data/ln > ` + out + `copied 2> ` + out + `read-errors
		cat apps/a1/code.txt apps/a1/data/d.txt > ` + out + `own; echo hello > ` + out + `x; cat notes.md apps/a2/secret; exit 0`
	r := sh(t, ws, script, "--app", "a1")
	if r.code != 0 {
		t.Fatalf("hutch run --app a1: %s", r)
	}
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(ws, f)); return string(b) }
	for f, content := range files {
		if got := read(f); got != content {
			t.Errorf("%s on the host holds %q; want %q, as before the command", f, got, content)
		}
	}
	for _, f := range []string{"notes2.md", "sub/new", "apps/new", "apps/a1/new", "apps/a2/new", "apps/a1/d2"} {
		if _, err := os.Lstat(filepath.Join(ws, f)); err == nil {
			t.Errorf("the command made %s on the host", f)
		}
	}
	for f, want := range map[string]string{"x": "hello\n", "own": "code\ndata\n", "pwd": ws + "\n", "ls-root": "apps\n", "ls-apps": "a1\n", "copied": ""} {
		if got := read(out + f); got != want {
			t.Errorf("%s%s on the host holds %q; want %q", out, f, got, want)
		}
	}
	errs := read(out + "write-errors")
	for f, want := range refused {
		if !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return strings.Contains(errs, " "+f+": "+w+"\n") }) {
			t.Errorf("the write to %s did not fail with %q:\n%s", f, want, errs)
		}
	}
	// Nothing the command printed or wrote holds a marker.
	seen := r.stdout + r.stderr
	filepath.WalkDir(filepath.Join(ws, "apps/a1/data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			seen += string(b)
		}
		return nil
	})
	for _, m := range []string{rootMarker, a2Marker} {
		if strings.Contains(seen, m) {
			t.Errorf("the command read %s", m)
		}
	}

	// The file door refuses the same.
	for _, f := range []string{"notes.md", "sub/deep.txt", "apps/a2/secret", "apps/a1/data/ln"} {
		if r := runCLIArgs(t, "read", "--workspace", ws, "--app", "a1", f); r.code == 0 || strings.Contains(r.stdout+r.stderr, "MARKER") {
			t.Errorf("hutch read --app a1 %s: %s", f, r)
		}
	}
	if r := runCLIArgs(t, "read", "--workspace", ws, "--app", "a1", "apps/a1/code.txt"); r.code != 0 || !strings.Contains(r.stdout, "code") {
		t.Errorf("hutch read --app a1 apps/a1/code.txt: %s", r)
	}
	for f := range refused {
		if r := runCLIArgs(t, "write", "--workspace", ws, "--app", "a1", "--content", "door", filepath.Join(ws, f)); r.code == 0 {
			t.Errorf("hutch write --app a1 %s: %s", f, r)
		}
	}
	for f, content := range files {
		if got := read(f); got != content {
			t.Errorf("after the file door, %s on the host holds %q; want %q", f, got, content)
		}
	}
	if r := runCLIArgs(t, "write", "--workspace", ws, "--app", "a1", "--content", "door", filepath.Join(ws, out, "door")); r.code != 0 || read(out+"door") != "door" {
		t.Errorf("hutch write --app a1 %sdoor: %s; the host's file holds %q", out, r, read(out+"door"))
	}
}
