//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	pngenc "image/png"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"golang.org/x/sys/unix"
)

// fileFixture is a tree that puts every kind of path the file door must
// judge within reach: files inside and outside the workspace, masked deny
// names at the top and deeper, app directories (the Sandbox is an
// ordinary agent: every app's hidden; an app agent, confined to its own,
// is TestAppConfined's), a denied path outside (a Landlock carve-out and
// a mask), planted secrets in $HOME, symlinks and hard links
// in and out, chains and loops, and a path into the private /tmp. Every
// file holds content of its own, so a read proves which file it reached.
type fileFixture struct {
	base, ws, out, results string
	sb                     *runtime.Sandbox
}

func newFileFixture(t *testing.T) *fileFixture {
	t.Helper()
	base := dir(t, "files-")
	fx := &fileFixture{base: base, ws: filepath.Join(base, "ws"), out: filepath.Join(base, "outside"), results: filepath.Join(base, "results")}
	file := func(p string) {
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte("content of "+p+"\n"), 0o644))
	}
	link := func(target, p string) { must(os.Symlink(target, p)) }
	for _, d := range []string{fx.ws, fx.out, fx.results} {
		must(os.MkdirAll(d, 0o755))
	}
	file(filepath.Join(fx.ws, "a.txt"))
	file(filepath.Join(fx.ws, "sub", "b.txt"))
	file(filepath.Join(fx.ws, "sub", "deep", "c.txt"))
	file(filepath.Join(fx.ws, ".env"))                        // a deny name at the top: masked per command
	file(filepath.Join(fx.ws, "sub", ".env.local"))           // deeper: masked from New on
	file(filepath.Join(fx.ws, "apps", "a1", "x.txt"))         // an app's: hidden
	file(filepath.Join(fx.ws, "apps", "a1", "data", "y.txt")) // its data: hidden too
	file(filepath.Join(fx.ws, "apps", "a2", "z.txt"))         // another app's: hidden
	file(filepath.Join(fx.out, "o.txt"))
	file(filepath.Join(fx.out, "denied", "d.txt"))
	file(filepath.Join(fx.out, "sib.txt"))
	link("a.txt", filepath.Join(fx.ws, "ln_in"))
	link(filepath.Join(fx.out, "o.txt"), filepath.Join(fx.ws, "ln_out"))
	link(filepath.Join(fakeHome, ".ssh", "id_ed25519"), filepath.Join(fx.ws, "ln_secret"))
	link(".env", filepath.Join(fx.ws, "ln_env"))
	link(fx.out, filepath.Join(fx.ws, "ln_dir_out"))
	link(filepath.Join(fx.out, "denied"), filepath.Join(fx.ws, "ln_dir_denied"))
	link("/tmp/hutch-files-x", filepath.Join(fx.ws, "ln_tmp"))
	link(fx.ws, filepath.Join(fx.ws, "ln_ws"))
	link("c2", filepath.Join(fx.ws, "c1"))
	link("c3", filepath.Join(fx.ws, "c2"))
	link("sub/deep/c.txt", filepath.Join(fx.ws, "c3"))
	link("l2", filepath.Join(fx.ws, "l1"))
	link("l1", filepath.Join(fx.ws, "l2"))
	link("../outside/o.txt", filepath.Join(fx.ws, "ln_dotdot"))
	link("../../outside/denied/d.txt", filepath.Join(fx.ws, "sub", "ln_up_denied"))
	link("/nonexistent-hutch", filepath.Join(fx.ws, "ln_dangling"))
	link(filepath.Join(fx.ws, "sub"), filepath.Join(fx.out, "ln_back_in"))
	// Hard links the host made: the same inode under another name.
	if err := os.Link(filepath.Join(fx.out, "sib.txt"), filepath.Join(fx.ws, "hl_out")); err != nil {
		t.Logf("no cross-directory hard link: %v", err)
	}
	fx.sb = newSandbox(t, fx.ws, func(p *runtime.Policy) {
		p.Deny = append(p.Deny, filepath.Join(fx.out, "denied"))
		p.Writable = append(p.Writable, fx.results)
		p.Apps = &runtime.AppIsolation{}
	})
	t.Cleanup(func() { fx.sb.Close() })
	return fx
}

// generatePaths makes n distinct path templates, the hand-picked ones
// first, then random walks over the fixture as it is on the host (so that
// most of them name something): each step takes an entry of the directory
// reached so far, symlinks included, or .., ., a doubled slash, or a name
// that does not exist. A fixed seed makes a failure reproduce; {ws},
// {out} and {base} stand for a fixture's directories (fileFixture.path).
// Without denyNames, no step names a deny name (a write creating one would
// mask it for what comes after).
func generatePaths(fx *fileFixture, n int, denyNames bool) []string {
	seen := map[string]bool{}
	var paths []string
	add := func(p string) {
		if p != "" && !seen[p] && !strings.ContainsAny(p, "\n") {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, p := range []string{"a.txt", "sub/b.txt", "sub/../a.txt", "{ws}/a.txt", "{ws}//sub/./b.txt", ".env",
		"sub/.env.local", "ln_in", "ln_out", "ln_secret", "ln_env", "ln_dir_out/o.txt", "ln_dir_out/denied/d.txt",
		"ln_dir_denied/d.txt", "ln_tmp", "ln_ws/a.txt", "ln_ws/ln_ws/ln_in", "c1", "l1", "ln_dotdot", "sub/ln_up_denied",
		"ln_dangling", "hl_out", "ln_dir_out/../ws/a.txt", "ln_dir_out/ln_back_in/b.txt", "../outside/o.txt", "c1/../a.txt",
		"{out}/o.txt", "{out}/denied/d.txt", "{out}/sib.txt", fakeHome + "/.ssh/id_ed25519", fakeHome + "/.netrc",
		fakeHome + "/.aws/credentials", "/etc/hostname", "/etc/hosts", "/etc/shadow", "/tmp/hutch-files-x", "sub", "/", "sub/", "a.txt/",
		"apps/a1/x.txt", "apps/a1/data/y.txt", "apps/a2/z.txt", "apps/a1/../a2/z.txt", "apps/a1/data/../x.txt", "{ws}/apps/a2",
		"apps/a1/data/new/f", "apps/a1/new", "apps/a2/data/f", "apps/new",
		// Into a hidden or private directory and out again by .., as the
		// kernel allows from a mount's root, and not deeper.
		"/run/../etc/hostname", "/var/run/../etc/hostname", "/run/no-such/../../etc/hostname", "/run/./../etc/hostname",
		"{out}/denied/../o.txt", "{out}/denied/no-such/../../o.txt", ".env/../a.txt", "/tmp/../etc/hostname",
		"/proc/self/cwd/a.txt", "/proc/1/cwd", "/proc/self/../1/root/etc/hostname"} {
		if denyNames || !strings.Contains(p, "env") && !strings.Contains(p, "ssh") && !strings.Contains(p, "netrc") && !strings.Contains(p, "aws") {
			add(p)
		}
	}
	deny := runtime.DefaultDenyNames()
	isDeny := func(name string) bool {
		for _, pat := range deny {
			if ok, _ := filepath.Match(pat, name); ok {
				return true
			}
		}
		return false
	}
	starts := []struct{ tmpl, host string }{{"", fx.ws}, {"./", fx.ws}, {"../", fx.base}, {"{ws}/", fx.ws}, {"{out}/", fx.out},
		{"{base}/", fx.base}, {fakeHome + "/", fakeHome}, {"/etc/", "/etc"}}
	rng := rand.New(rand.NewSource(16))
	for tries := 0; len(paths) < n && tries < 50*n; tries++ {
		st := starts[rng.Intn(len(starts))]
		tmpl, host := st.tmpl, st.host
		for k := 1 + rng.Intn(5); k > 0; k-- {
			var step string
			switch r := rng.Intn(20); {
			case r == 0:
				step = ".."
			case r == 1:
				step = "."
			case r == 2:
				step = "no-such"
			case r == 3:
				step = ""
			default:
				ents, _ := os.ReadDir(host)
				if len(ents) == 0 {
					step = ".."
					break
				}
				step = ents[rng.Intn(len(ents))].Name()
				if strings.HasPrefix(step, "files-") || strings.HasPrefix(step, "hutch") {
					continue // another fixture, or the suite's own binaries
				}
			}
			if !denyNames && isDeny(step) {
				continue
			}
			if tmpl != "" && !strings.HasSuffix(tmpl, "/") {
				tmpl += "/"
			}
			tmpl += step
			if next, err := filepath.EvalSymlinks(filepath.Join(host, step)); err == nil {
				host = next
			}
		}
		// Mostly end on a file: a read or a write of one is what is judged.
		if ents, err := os.ReadDir(host); err == nil && len(ents) > 0 && rng.Intn(10) < 7 {
			var files []string
			for _, e := range ents {
				if !e.IsDir() && (denyNames || !isDeny(e.Name())) {
					files = append(files, e.Name())
				}
			}
			if len(files) > 0 {
				if tmpl != "" && !strings.HasSuffix(tmpl, "/") {
					tmpl += "/"
				}
				tmpl += files[rng.Intn(len(files))]
			}
		}
		add(tmpl)
	}
	return paths
}

// path instantiates a template of generatePaths for fx.
func (fx *fileFixture) path(tmpl string) string {
	return strings.NewReplacer("{ws}", fx.ws, "{out}", fx.out, "{base}", fx.base).Replace(tmpl)
}

// abs instantiates tmpl for fx as an absolute path: WriteFile takes
// absolute paths only, relative ones are the workspace's.
func (fx *fileFixture) abs(tmpl string) string {
	p := fx.path(tmpl)
	if !strings.HasPrefix(p, "/") {
		p = fx.ws + "/" + p
	}
	return p
}

// eachPath runs body for each of paths in one sandboxed shell of fx, with
// $p the path and $i its index; whatever body does is judged on the host.
func (fx *fileFixture) eachPath(t *testing.T, paths []string, body string) {
	t.Helper()
	list := filepath.Join(fx.results, "paths")
	must(os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644))
	script := fmt.Sprintf(`i=0; while IFS= read -r p; do %s; i=$((i+1)); done < %s; exit 0`, body, list)
	if err := fx.sb.Command(context.Background(), "sh", "-c", script).Run(); err != nil {
		t.Fatalf("sandboxed loop over the paths: %v", err)
	}
}

// TestFileReadMatchesCommand: for every generated path, ReadFile reads it
// exactly when a sandboxed cat of the same path does, and returns the very
// bytes cat got. cat's verdict is judged on the host: it copies what it
// read into a results tree, and every fixture file's content is its own.
func TestFileReadMatchesCommand(t *testing.T) {
	fx := newFileFixture(t)
	var paths []string
	for _, p := range generatePaths(fx, 2000, true) {
		paths = append(paths, fx.path(p))
	}
	got := filepath.Join(fx.results, "got")
	must(os.Mkdir(got, 0o777))
	start := time.Now()
	fx.eachPath(t, paths, fmt.Sprintf(`cat -- "$p" > %s/$i 2>/dev/null`, got))
	var reads, refusals, private, mismatches, changing int
	for i, p := range paths {
		catBytes, err := os.ReadFile(filepath.Join(got, fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("path %q: no result file: %v", p, err)
		}
		c, rerr := fx.sb.ReadFile(p, runtime.ReadOptions{Mode: runtime.ReadBinary, Limit: 64 << 20})
		if errors.Is(rerr, runtime.ErrPrivate) {
			// The command read (or failed to read) its own /tmp, /dev or
			// /proc, which the file door does not reach: the host's
			// resolution of the path must lie there.
			private++
			abs := p
			if !filepath.IsAbs(abs) {
				abs = fx.ws + "/" + abs
			}
			if !throughPrivate(abs) {
				t.Errorf("%q: ErrPrivate, but the host resolves it through none of /tmp, /dev, /proc and /run", p)
			}
			continue
		}
		catRead := len(catBytes) > 0
		apiRead := rerr == nil && len(c.Data) > 0
		if (catRead != apiRead || apiRead && !bytes.Equal(catBytes, c.Data)) && changedSince(p, fx.ws, start) {
			// A file of the host's that changed while the test ran (the
			// walk reaches the whole host: a log being written) is not
			// the same file for cat and ReadFile.
			changing++
			continue
		}
		switch {
		case catRead != apiRead:
			mismatches++
			t.Errorf("%q: cat read %q, ReadFile: %v (%s)", p, catBytes, rerr, describe(c))
		case apiRead && !bytes.Equal(catBytes, c.Data):
			mismatches++
			t.Errorf("%q: cat read %q, ReadFile %q", p, catBytes, c.Data)
		case apiRead && c.HostPath == "":
			// A file of the view's own, made for each sandbox: its
			// /etc/hosts, the host's with the sandbox's hostname added
			// (TestOwnHostnameResolves), the only one this policy has.
			reads++
			if host, err := os.ReadFile("/etc/hosts"); err != nil || c.Path != "/etc/hosts" || !bytes.HasPrefix(c.Data, host) {
				t.Errorf("%q: ReadFile read %s, a file of the view's own, holding %q; want the view's /etc/hosts (%v)", p, c.Path, c.Data, err)
			}
		case apiRead:
			reads++
			if real, err := os.ReadFile(c.HostPath); err != nil || !bytes.Equal(real, c.Data) {
				t.Errorf("%q: ReadFile's HostPath %s does not hold what it returned (%v)", p, c.HostPath, err)
			}
		default:
			refusals++
		}
		if mismatches > 20 {
			t.Fatal("too many mismatches")
		}
	}
	t.Logf("%d paths: %d read by both, %d refused by both, %d in the command's own filesystems, %d changed on the host meanwhile", len(paths), reads, refusals, private, changing)
	if reads < 50 || refusals < 50 {
		t.Errorf("a weak sample: %d reads, %d refusals", reads, refusals)
	}
}

// changedSince says whether the host's file at p (relative to ws) was
// modified after t, or a second before (coarse timestamps).
func changedSince(p, ws string, t time.Time) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	fi, err := os.Stat(p)
	return err == nil && fi.ModTime().After(t.Add(-time.Second))
}

// throughPrivate says whether resolving p on the host, a component at a
// time, passes through /tmp, /dev, /proc or /run, where the view has
// filesystems of its own. It stops there: a magic link of the host's
// /proc (/proc/55/cwd) says nothing about the view.
func throughPrivate(p string) bool {
	cur, comps := "/", strings.Split(p, "/")
	for links := 0; len(comps) > 0 && links < 40; {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if underAny(next, "/tmp", "/dev", "/proc", "/run") {
			return true
		}
		if target, err := os.Readlink(next); err == nil {
			links++
			if filepath.IsAbs(target) {
				cur = "/"
			}
			comps = append(strings.Split(target, "/"), comps...)
			continue
		}
		cur = next
	}
	return false
}

func underAny(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func describe(c *runtime.FileContent) string {
	if c == nil {
		return "nothing"
	}
	return fmt.Sprintf("%d bytes of %s", len(c.Data), c.HostPath)
}

// TestFileWriteMatchesCommand: for every generated directory spelling, a
// new file WriteFile creates there (with its missing parents) lands exactly
// where a sandboxed `mkdir -p; echo >` of the same spelling lands, or both
// are refused; judged by looking for the files on the host.
func TestFileWriteMatchesCommand(t *testing.T) {
	// Two identical fixtures, one per side: a write can create a deny
	// name's match (a directory named .env.local), which masks it for
	// whatever comes after, so neither side may see the other's.
	cmdFx, apiFx := newFileFixture(t), newFileFixture(t)
	dirs := generatePaths(cmdFx, 600, false)
	var cmdPaths []string
	for i, d := range dirs {
		cmdPaths = append(cmdPaths, fmt.Sprintf("%s/w-%d", cmdFx.abs(d), i))
	}
	cmdFx.eachPath(t, cmdPaths, `(mkdir -p -- "$(dirname -- "$p")" && echo "token $i" > "$p") 2>/dev/null`)
	for i, d := range dirs {
		_, _ = apiFx.sb.WriteFile(fmt.Sprintf("%s/w-%d", apiFx.abs(d), i), []byte(fmt.Sprintf("token %d\n", i)), runtime.WriteOptions{})
	}
	// Where each landed, on the host, relative to its fixture (or the
	// shared home and the host's own trees, where nothing may land).
	landed := func(fx *fileFixture) map[string]string {
		m := map[string]string{}
		for _, root := range []string{fx.base, fakeHome, "/etc", "/var/tmp"} {
			_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "w-") {
					return nil
				}
				if rel, err := filepath.Rel(fx.base, p); err == nil && !strings.HasPrefix(rel, "..") {
					p = "{base}/" + rel
				} else if strings.HasPrefix(p, scratchBase) || strings.HasPrefix(p, filepath.Join("/var/tmp", scratchPrefix)) {
					return nil // the other fixture's, or another suite's running beside this one
				}
				if b, err := os.ReadFile(filepath.Join(filepath.Dir(strings.Replace(p, "{base}", fx.base, 1)), d.Name())); err == nil {
					m[d.Name()] = filepath.Dir(p) + " " + strings.TrimSpace(string(b))
				}
				return nil
			})
		}
		return m
	}
	cmdLanded, apiLanded := landed(cmdFx), landed(apiFx)
	var both, neither int
	for i := range dirs {
		name := fmt.Sprintf("w-%d", i)
		c, cmdOK := cmdLanded[name]
		a, apiOK := apiLanded[name]
		switch {
		case cmdOK != apiOK || c != a:
			t.Errorf("%q: the command's write: %q (%v), WriteFile's: %q (%v)", dirs[i], c, cmdOK, a, apiOK)
		case cmdOK:
			both++
			if !strings.HasPrefix(c, "{base}/ws") && !strings.HasPrefix(c, "{base}/results") {
				t.Errorf("%q: a write landed outside the writable trees, in %s", dirs[i], c)
			}
		default:
			neither++
		}
	}
	t.Logf("%d directory spellings: %d written by both, %d refused by both", len(dirs), both, neither)
	if both < 30 || neither < 30 {
		t.Errorf("a weak sample: %d written, %d refused", both, neither)
	}
}

// TestFileDoorRefusals: what the file door refuses and how it says so.
func TestFileDoorRefusals(t *testing.T) {
	fx := newFileFixture(t)
	cases := []struct {
		name string
		op   func() error
		want error
	}{
		{"masked deny name", func() error { _, err := fx.sb.ReadFile(".env", runtime.ReadOptions{}); return err }, runtime.ErrDenied},
		{"secret in home", func() error {
			_, err := fx.sb.ReadFile(fakeHome+"/.ssh/id_ed25519", runtime.ReadOptions{})
			return err
		}, fs.ErrPermission},
		{"private tmp", func() error { _, err := fx.sb.ReadFile("/tmp/hutch-files-x", runtime.ReadOptions{}); return err }, runtime.ErrPrivate},
		// Through a symlink the path is the kernel's to resolve, in the
		// file server's view, whose /tmp is its own and holds nothing.
		{"private tmp through a symlink", func() error { _, err := fx.sb.ReadFile("ln_tmp", runtime.ReadOptions{}); return err }, fs.ErrNotExist},
		{"write to the private tmp", func() error {
			_, err := fx.sb.WriteFile("/tmp/hutch-files-x", []byte("x"), runtime.WriteOptions{})
			return err
		}, runtime.ErrPrivate},
		{"write through a symlink into the private tmp", func() error {
			_, err := fx.sb.WriteFile(fx.ws+"/ln_tmp", []byte("x"), runtime.WriteOptions{})
			return err
		}, runtime.ErrPrivate},
		{"write outside", func() error {
			_, err := fx.sb.WriteFile(fx.out+"/new", []byte("x"), runtime.WriteOptions{})
			return err
		}, runtime.ErrDenied},
		{"write through a symlink out", func() error {
			_, err := fx.sb.WriteFile(fx.ws+"/ln_out", []byte("x"), runtime.WriteOptions{})
			return err
		}, runtime.ErrDenied},
		{"loop", func() error { _, err := fx.sb.ReadFile("l1", runtime.ReadOptions{}); return err }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.op()
			if err == nil {
				t.Fatal("allowed")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("got %v, want errors.Is %v", err, c.want)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Errorf("%v is not an *fs.PathError", err)
			}
		})
	}
	for _, bad := range []string{"a\x00b", "a\x01b", strings.Repeat("a", 4097), ""} {
		_, err := fx.sb.ReadFile(bad, runtime.ReadOptions{})
		var fe *runtime.FilePathError
		if !errors.As(err, &fe) || fe.Field != "name" {
			t.Errorf("ReadFile(%q): %v, want a FilePathError on name", bad, err)
		}
	}
	if _, err := fx.sb.WriteFile("a.txt", nil, runtime.WriteOptions{}); err == nil {
		t.Error("WriteFile took a relative path")
	}
	if _, err := fx.sb.ReadFile("ln_in", runtime.ReadOptions{NoFollow: true}); err == nil {
		t.Error("NoFollow read a symlink")
	}
	if _, err := os.Stat(fx.out + "/new"); err == nil {
		t.Error("a refused write created its file")
	}
}

// TestFileDoorRace: while a goroutine keeps swapping a directory of the
// workspace with a symlink to a denied directory (the home's .ssh) and
// with one to a read-only tree outside, reads and writes through that
// path run; no read ever returns the secret, and no write lands outside
// the workspace. Judged on the host: what ReadFile returned, and what the
// trees outside hold afterwards.
func TestFileDoorRace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a race run for seconds")
	}
	fx := newFileFixture(t)
	x, toSSH, toOut := filepath.Join(fx.ws, "x"), filepath.Join(fx.ws, "x-ssh"), filepath.Join(fx.ws, "x-out")
	must(os.Mkdir(x, 0o755))
	must(os.WriteFile(filepath.Join(x, "id_ed25519"), []byte("inside\n"), 0o644))
	must(os.Symlink(filepath.Join(fakeHome, ".ssh"), toSSH))
	must(os.Symlink(fx.out, toOut))
	outBefore, sshBefore := listTree(t, fx.out), listTree(t, filepath.Join(fakeHome, ".ssh"))

	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swapped <- n
				return
			default:
			}
			other := toSSH
			if n%2 == 1 {
				other = toOut
			}
			// Atomically: x is the directory, then a symlink, then back.
			if err := unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE); err == nil {
				n++
			}
		}
	}()
	var reads, writes, inside int
	// Three seconds at least, longer on a loaded host until both reads
	// and writes got through (each swap can make the file server be
	// built again: x/id_ed25519 comes and goes).
	start := time.Now()
	for i := 0; time.Since(start) < 3*time.Second || (reads < 5 || writes < 5) && time.Since(start) < 60*time.Second; i++ {
		if c, err := fx.sb.ReadFile("x/id_ed25519", runtime.ReadOptions{}); err == nil {
			reads++
			if strings.Contains(string(c.Data), sshSecret) {
				t.Fatalf("read the secret through the swapped path: %s", c.HostPath)
			}
			if string(c.Data) == "inside\n" || string(c.Data) == "overwritten\n" {
				inside++
			}
			if !strings.HasPrefix(c.HostPath, fx.ws+"/") {
				t.Errorf("read %s through the swapped path", c.HostPath)
			}
		}
		if _, err := fx.sb.WriteFile(fmt.Sprintf("%s/race-%d", x, i), []byte("x"), runtime.WriteOptions{}); err == nil {
			writes++
		}
		_, _ = fx.sb.WriteFile(x+"/id_ed25519", []byte("overwritten\n"), runtime.WriteOptions{})
	}
	close(stop)
	n := <-swapped
	t.Logf("%d swaps; %d reads (%d of the directory's own file), %d writes", n, reads, inside, writes)
	if n < 100 || reads == 0 || writes == 0 {
		t.Errorf("the race did not run: %d swaps, %d reads, %d writes", n, reads, writes)
	}
	if after := listTree(t, fx.out); !slices.Equal(after, outBefore) {
		t.Errorf("the read-only tree outside changed: %v, was %v", after, outBefore)
	}
	if after := listTree(t, filepath.Join(fakeHome, ".ssh")); !slices.Equal(after, sshBefore) {
		t.Errorf("the denied directory changed: %v, was %v", after, sshBefore)
	}
	if b, err := os.ReadFile(filepath.Join(fakeHome, ".ssh", "id_ed25519")); err != nil || string(b) != sshSecret+"\n" {
		t.Errorf("the secret changed: %q, %v", b, err)
	}
}

// listTree lists every file under root with its size, for before/after
// comparisons.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			if info, err := d.Info(); err == nil {
				out = append(out, fmt.Sprintf("%s %d %v", p, info.Size(), info.ModTime().UnixNano()))
			}
		}
		return nil
	})
	return out
}

// TestFileCommands: hutch read, write, ls and stat give the CLI the same
// door, on the same flags as hutch run; judged by the host's files.
func TestFileCommands(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("héllo\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=1\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "keep.pem"), []byte("k\n"), 0o644))

	r := runCLIArgs(t, "read", "--workspace", ws, "a.txt")
	var got struct {
		Path, Kind string
		Text       string `json:"content"`
		HostPath   string `json:"host_path"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Text != "héllo\n" || got.Kind != "text" || got.HostPath != filepath.Join(ws, "a.txt") {
		t.Errorf("read a.txt: %+v\n%s", got, r)
	}
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"read", "--workspace", ws, ".env"}, "a default deny name"},
		{[]string{"read", "--workspace", ws, "--deny-name", "*.pem", "keep.pem"}, "a --deny-name"},
		{[]string{"read", "--workspace", ws, fakeHome + "/.ssh/id_ed25519"}, "a default deny path"},
	} {
		r := runCLIArgs(t, c.args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "denied by the sandbox's policy") {
			t.Errorf("%s: %s", c.why, r)
		}
	}
	if r := runCLIArgs(t, "read", "--workspace", ws, "--no-default-deny", ".env"); r.code != 0 || !strings.Contains(r.stdout, "TOKEN=1") {
		t.Errorf("--no-default-deny still masks .env: %s", r)
	}

	target := filepath.Join(ws, "new", "dir", "f.txt")
	if r := runCLIArgs(t, "write", "--workspace", ws, "--content", "one\n", target); r.code != 0 {
		t.Fatalf("write: %s", r)
	}
	if r := runCLIArgs(t, "write", "--workspace", ws, "--append", "--content", "two\n", target); r.code != 0 {
		t.Fatalf("write --append: %s", r)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("the host's %s: %q, %v", target, b, err)
	}
	outside := filepath.Join(dir(t, "out-"), "f")
	if r := runCLIArgs(t, "write", "--workspace", ws, "--content", "x", outside); r.code != 1 {
		t.Errorf("write outside the workspace: %s", r)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("a refused write created its file")
	}
	if r := runCLIArgs(t, "write", "--workspace", ws, "--content", "x", "rel.txt"); r.code == 0 || !strings.Contains(r.stderr, "absolute") {
		t.Errorf("write of a relative path: %s", r)
	}
	// Neither --content nor --stdin: refused, the file kept (it would
	// have been emptied); --content '' empties one on purpose.
	if r := runCLIArgs(t, "write", "--workspace", ws, target); r.code != 125 || !strings.Contains(r.stderr, "--content") {
		t.Errorf("write with no content: %s", r)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("write with no content changed the host's %s: %q, %v", target, b, err)
	}
	if r := runCLIArgs(t, "write", "--workspace", ws, "--content", "", target); r.code != 0 {
		t.Errorf("write --content '': %s", r)
	}
	if b, err := os.ReadFile(target); err != nil || len(b) != 0 {
		t.Errorf("write --content '' left the host's %s: %q, %v", target, b, err)
	}

	r = runCLIArgs(t, "ls", "--workspace", ws)
	var ents []struct {
		Path   string
		Denied bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ents) != nil {
		t.Fatalf("ls: %s", r)
	}
	denied := map[string]bool{}
	for _, e := range ents {
		denied[filepath.Base(e.Path)] = e.Denied
	}
	if len(ents) != 4 || !denied[".env"] || denied["a.txt"] {
		t.Errorf("ls: %+v", ents)
	}
	if r := runCLIArgs(t, "stat", "--workspace", ws, "a.txt"); r.code != 0 || !strings.Contains(r.stdout, `"size": 7`) {
		t.Errorf("stat: %s", r)
	}
}

// TestFileReadContent: ReadFile tells images (by content, with their
// size), text and binary apart, and cuts text windows on whole UTF-8
// characters, reporting where the window it returns starts.
func TestFileReadContent(t *testing.T) {
	ws := dir(t, "ws-")
	img := image.NewRGBA(image.Rect(0, 0, 5, 3))
	var png bytes.Buffer
	must(pngenc.Encode(&png, img))
	must(os.WriteFile(filepath.Join(ws, "picture.txt"), png.Bytes(), 0o644)) // the name says nothing
	must(os.WriteFile(filepath.Join(ws, "blob"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 0xff}, 0o644))
	text := "ab€ü🙂z" // 1,1,3,2,4,1 bytes
	must(os.WriteFile(filepath.Join(ws, "t.txt"), []byte(text), 0o644))
	sb := newSandbox(t, ws)
	defer sb.Close()

	c, err := sb.ReadFile("picture.txt", runtime.ReadOptions{})
	if err != nil || c.Kind != runtime.ContentImage || c.MIME != "image/png" || c.Width != 5 || c.Height != 3 || !bytes.Equal(c.Data, png.Bytes()) {
		t.Errorf("the PNG: %v, %+v", err, c)
	}
	if c, err := sb.ReadFile("blob", runtime.ReadOptions{}); err != nil || c.Kind != runtime.ContentBinary {
		t.Errorf("the binary: %v, %+v", err, c)
	}
	for _, tt := range []struct {
		offset, limit int64
		want          string
		wantOffset    int64
		eof           bool
	}{
		{0, 0, text, 0, true},
		{3, 0, "", 0, false}, // inside €: set below
		{2, 3, "€", 2, false},
		{2, 4, "€", 2, false}, // ends inside ü: cut before it
		{5, 6, "ü🙂", 5, false},
		{6, 100, "🙂z", 7, true}, // starts inside ü: from the next character
		{12, 10, "", 12, true},
		{20, 10, "", 20, true},
	} {
		c, err := sb.ReadFile("t.txt", runtime.ReadOptions{Offset: tt.offset, Limit: tt.limit, Mode: runtime.ReadText})
		if err != nil {
			t.Errorf("offset %d limit %d: %v", tt.offset, tt.limit, err)
			continue
		}
		if tt.offset == 3 {
			// Offset 3 is inside € (bytes 2-4): the window starts at ü.
			tt.want, tt.wantOffset, tt.eof = "ü🙂z", 5, true
		}
		if string(c.Data) != tt.want || c.Offset != tt.wantOffset || c.EOF != tt.eof {
			t.Errorf("offset %d limit %d: %q at %d (eof %v), want %q at %d (eof %v)", tt.offset, tt.limit, c.Data, c.Offset, c.EOF, tt.want, tt.wantOffset, tt.eof)
		}
		if c.Offset < int64(len(text)) && !bytes.Equal(c.Data, []byte(text)[c.Offset:c.Offset+int64(len(c.Data))]) {
			t.Errorf("offset %d: %q is not the file's bytes at %d", tt.offset, c.Data, c.Offset)
		}
	}
}

// TestOpenForSend: only a regular file of the workspace, within the size
// limit, may leave the machine, and the handle returned is the file's.
func TestOpenForSend(t *testing.T) {
	fx := newFileFixture(t)
	f, fi, err := fx.sb.OpenForSend("sub/b.txt", 0)
	if err != nil {
		t.Fatalf("a workspace file: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if want, _ := os.ReadFile(filepath.Join(fx.ws, "sub", "b.txt")); !bytes.Equal(b, want) || fi.HostPath != filepath.Join(fx.ws, "sub", "b.txt") {
		t.Errorf("sent %q from %s", b, fi.HostPath)
	}
	for _, c := range []struct{ name, why string }{
		{"ln_out", "a symlink to a readable file outside"},
		{"hl_out", "a hard link the host made: in the workspace, allowed"},
		{fx.out + "/o.txt", "outside"},
		{".env", "masked"},
		{"sub", "a directory"},
		{"a.txt", "over a 10-byte limit"},
	} {
		limit := int64(0)
		if c.name == "a.txt" {
			limit = 10
		}
		f, _, err := fx.sb.OpenForSend(c.name, limit)
		if f != nil {
			f.Close()
		}
		if allowed := err == nil; allowed != (c.name == "hl_out") {
			t.Errorf("%s (%s): %v", c.name, c.why, err)
		}
	}
}

// TestFileOverwriteMatchesCommand: for every generated path, overwriting
// it with WriteFile changes exactly what a sandboxed `echo >` of the same
// path changes. Each side writes into a fixture of its own, the same
// tokens in the same order (two paths naming one file leave the last
// token on both sides); then every file of the two fixtures, and the
// home's secrets, are compared on the host.
func TestFileOverwriteMatchesCommand(t *testing.T) {
	cmdFx, apiFx := newFileFixture(t), newFileFixture(t)
	tmpls := generatePaths(cmdFx, 1500, true) // nothing new is named: deny names are fine
	var cmdPaths []string
	for _, p := range tmpls {
		cmdPaths = append(cmdPaths, cmdFx.abs(p))
	}
	secrets := listTree(t, fakeHome)
	// Only existing files are overwritten: echo > creates a missing one
	// without its parents, WriteFile with them (TestFileWriteMatchesCommand).
	cmdFx.eachPath(t, cmdPaths, `[ -f "$p" ] && (echo "token $i" > "$p") 2>/dev/null`)
	var written int
	for i, p := range tmpls {
		p = apiFx.abs(p)
		if st, err := apiFx.sb.Stat(p); err != nil || !st.Mode.IsRegular() {
			continue
		}
		if _, err := apiFx.sb.WriteFile(p, []byte(fmt.Sprintf("token %d\n", i)), runtime.WriteOptions{}); err == nil {
			written++
		}
	}
	contents := func(fx *fileFixture) map[string]string {
		m := map[string]string{}
		_ = filepath.WalkDir(fx.base, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasPrefix(p, fx.results) {
				return nil
			}
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(fx.base, p)
			m[rel] = strings.ReplaceAll(string(b), fx.base, "{base}")
			return nil
		})
		return m
	}
	cmdFiles, apiFiles := contents(cmdFx), contents(apiFx)
	var changed int
	for rel, c := range cmdFiles {
		if a, ok := apiFiles[rel]; !ok || a != c {
			t.Errorf("%s: the command left %q, WriteFile %q", rel, c, a)
		}
		if strings.HasPrefix(c, "token ") {
			changed++
			// Unless it is one inode with a file of the workspace (the
			// host's hard link hl_out): the kernel writes it through that
			// name too.
			if st, err := os.Stat(filepath.Join(cmdFx.base, rel)); !strings.HasPrefix(rel, "ws/") && (err != nil || st.Sys().(*syscall.Stat_t).Nlink < 2) {
				t.Errorf("%s, outside the writable trees, was overwritten", rel)
			}
		}
	}
	if len(apiFiles) != len(cmdFiles) {
		t.Errorf("%d files after the command, %d after WriteFile", len(cmdFiles), len(apiFiles))
	}
	if after := listTree(t, fakeHome); !slices.Equal(after, secrets) {
		t.Errorf("the home's secrets changed: %v", after)
	}
	t.Logf("%d paths; %d files overwritten the same way by both (%d WriteFile calls succeeded)", len(tmpls), changed, written)
	if changed < 5 {
		t.Errorf("a weak sample: %d files overwritten", changed)
	}
}

// TestFileViewFollowsGitDirs: the file door keeps its view while the
// trees it was read from are unchanged, and those include the git
// directories a .git file names: a commondir created there (a linked
// worktree's, inside the workspace) makes its common directory read-only
// for the next command, and for the next WriteFile too.
func TestFileViewFollowsGitDirs(t *testing.T) {
	ws := dir(t, "ws-")
	wt, common := filepath.Join(ws, "sub", "wtgit"), filepath.Join(ws, "sub", "maingit")
	must(os.MkdirAll(wt, 0o755))
	must(os.MkdirAll(common, 0o755))
	must(os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: sub/wtgit\n"), 0o644))
	sb := newSandbox(t, ws)
	defer sb.Close()
	if _, err := sb.WriteFile(filepath.Join(common, "before"), []byte("x"), runtime.WriteOptions{}); err != nil {
		t.Fatalf("a plain directory of the workspace: %v", err)
	}
	// Long enough that the view read above is trusted, not re-read anyway.
	time.Sleep(100 * time.Millisecond)
	if _, err := sb.WriteFile(filepath.Join(common, "before2"), []byte("x"), runtime.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	must(os.WriteFile(filepath.Join(wt, "commondir"), []byte("../maingit\n"), 0o644))
	_, err := sb.WriteFile(filepath.Join(common, "after"), []byte("x"), runtime.WriteOptions{})
	if !errors.Is(err, runtime.ErrDenied) {
		t.Errorf("WriteFile into the common git directory after commondir named it: %v, want ErrDenied", err)
	}
	if out, err := sb.Command(context.Background(), "sh", "-c", "echo x > sub/maingit/cmd; exit 0").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{"after", "cmd"} {
		if _, err := os.Stat(filepath.Join(common, f)); err == nil {
			t.Errorf("%s was written into the read-only common git directory", f)
		}
	}
}
