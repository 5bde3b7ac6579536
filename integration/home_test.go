//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
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
// Commands and the file door alike, judged by the host's files.
func TestAppIsolation(t *testing.T) {
	ws := dir(t, "ws-")
	for _, f := range []string{"apps/a1/code.txt", "apps/a1/data/d.txt", "apps/a2/secret.txt"} {
		must(os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755))
		must(os.WriteFile(filepath.Join(ws, f), []byte("content of "+f+"\n"), 0o644))
	}
	script := `for f in apps/a1/code.txt apps/a1/data/d.txt apps/a2/secret.txt; do cat $f > seen-$(basename $f) 2>/dev/null; done
		for f in apps/a1/data/new apps/a1/new apps/a2/new apps/new; do echo x > $f 2>/dev/null; done; exit 0`
	for _, tt := range []struct {
		id                 string
		seen, written      []string // what the command read, wrote (others: nothing)
		readable, writable []string // what the file door allows
	}{
		{"", nil, nil, nil, nil},
		{"a1", []string{"code.txt", "d.txt"}, []string{"apps/a1/data/new"}, []string{"apps/a1/code.txt", "apps/a1/data/d.txt"}, []string{"apps/a1/data/api"}},
	} {
		t.Run("app="+tt.id, func(t *testing.T) {
			for _, f := range []string{"seen-code.txt", "seen-d.txt", "seen-secret.txt", "apps/a1/data/new", "apps/a1/new", "apps/a2/new", "apps/new", "apps/a1/data/api"} {
				os.Remove(filepath.Join(ws, f))
			}
			sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Apps = &runtime.AppIsolation{ID: tt.id} })
			defer sb.Close()
			if out, err := sb.Command(context.Background(), "sh", "-c", script).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, f := range []string{"apps/a1/code.txt", "apps/a1/data/d.txt", "apps/a2/secret.txt"} {
				// What the command copied out, against the host's file: only
				// the very bytes prove it was read.
				b, _ := os.ReadFile(filepath.Join(ws, "seen-"+filepath.Base(f)))
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
