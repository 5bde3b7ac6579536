//go:build linux

package treewatch

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// secretish records names like secrets and .git, does not enter
// node_modules, and enters everything else.
func secretish(root, p, base string, dir bool) Action {
	switch {
	case base == ".env" || strings.HasPrefix(base, "id_") || base == ".git":
		return Record
	case dir && base == "node_modules":
		return Skip
	}
	return Enter
}

// walk is what a fresh walk of roots records: the reference Found must
// equal.
func walk(t *testing.T, roots []string, match Match) []string {
	t.Helper()
	var out []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return nil
			}
			switch match(root, p, d.Name(), d.IsDir()) {
			case Record:
				out = append(out, p)
				if d.IsDir() {
					return filepath.SkipDir
				}
			case Skip:
				if d.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
	}
	slices.Sort(out)
	return out
}

// watched makes the test's Trees watch from the start, as trees larger
// than smallEntries do.
func watched(t *testing.T) { set(t, &smallEntries, 0) }

// walkedOnly makes the test's small trees walked at every look, however
// many.
func walkedOnly(t *testing.T) { set(t, &walkedLooks, 1<<30) }

func set(t *testing.T, v *int, to int) {
	old := *v
	*v = to
	t.Cleanup(func() { *v = old })
}

// bothWays runs test on watched trees, then on walked ones.
func bothWays(t *testing.T, test func(*testing.T)) {
	t.Run("watched", func(t *testing.T) { watched(t); test(t) })
	t.Run("walked", func(t *testing.T) { walkedOnly(t); test(t) })
}

func found(t *testing.T, tr *Trees) []string {
	t.Helper()
	f, err := tr.Found()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTreesFollowChanges: after each change, Found is what a walk finds.
func TestTreesFollowChanges(t *testing.T) { bothWays(t, testTreesFollowChanges) }

func testTreesFollowChanges(t *testing.T) {
	root := t.TempDir()
	write(t, root+"/a/b/.env")
	write(t, root+"/node_modules/x/.env")
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if d := tr.Degraded(); d != "" {
		t.Fatalf("degraded: %s", d)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"a deep file", func() { write(t, root+"/a/b/c/d/id_rsa") }},
		{"a tree made at once", func() {
			if err := os.MkdirAll(root+"/n/m/o", 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, root+"/n/m/o/.env")
		}},
		{"a repository", func() { os.MkdirAll(root+"/n/repo/.git/hooks", 0o755) }},
		{"a directory moved out", func() { os.Rename(root+"/a/b", t.TempDir()+"/b") }},
		{"a directory moved in", func() {
			out := t.TempDir() + "/in"
			write(t, out+"/deep/.env")
			os.Rename(out, root+"/moved-in")
		}},
		{"a directory renamed within", func() { os.Rename(root+"/n", root+"/renamed") }},
		{"a directory renamed to a recorded name", func() { os.Rename(root+"/renamed/m", root+"/renamed/.git") }},
		{"a file removed", func() { os.Remove(root + "/a/b/c/d/id_rsa") }},
		{"a tree removed", func() { os.RemoveAll(root + "/moved-in") }},
		{"an exchange", func() {
			write(t, root+"/x/.env")
			write(t, root+"/y/z/w/id_ed")
			unix.Renameat2(unix.AT_FDCWD, root+"/x", unix.AT_FDCWD, root+"/y/z", unix.RENAME_EXCHANGE)
		}},
		{"a symlink to a directory (not entered)", func() {
			write(t, root+"/target/.env")
			os.Symlink(root+"/target", root+"/link")
		}},
		{"the root's contents replaced", func() {
			os.RemoveAll(root + "/target")
			write(t, root+"/target/.env")
		}},
	}
	for _, s := range steps {
		s.do()
		if got, want := found(t, tr), walk(t, []string{root}, secretish); !slices.Equal(got, want) {
			t.Fatalf("after %s: found %v, a walk finds %v", s.name, got, want)
		}
	}
}

// TestTreesRandomChanges: random creations, removals, renames and
// exchanges, many between two reads; Found always agrees with a walk.
func TestTreesRandomChanges(t *testing.T) { bothWays(t, testTreesRandomChanges) }

func testTreesRandomChanges(t *testing.T) {
	root := t.TempDir()
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rng := rand.New(rand.NewSource(7))
	names := []string{"a", "b", "c", ".env", "id_x", ".git", "node_modules"}
	randomDir := func() string {
		var dirs []string
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		return dirs[rng.Intn(len(dirs))]
	}
	for round := 0; round < 300; round++ {
		for k := rng.Intn(20); k >= 0; k-- {
			d := randomDir()
			p := filepath.Join(d, names[rng.Intn(len(names))])
			switch rng.Intn(6) {
			case 0:
				os.Mkdir(p, 0o755)
			case 1:
				os.WriteFile(p, nil, 0o644)
			case 2:
				if d != root {
					os.RemoveAll(d)
				}
			case 3:
				os.Rename(d, p)
			case 4:
				q := randomDir()
				if q != root && d != root {
					unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, q, unix.RENAME_EXCHANGE)
				}
			case 5:
				os.Symlink(randomDir(), p)
			}
		}
		if got, want := found(t, tr), walk(t, []string{root}, secretish); !slices.Equal(got, want) {
			t.Fatalf("round %d: found %v, a walk finds %v", round, got, want)
		}
	}
	if d := tr.Degraded(); d != "" {
		t.Errorf("degraded: %s", d)
	}
}

// TestTreesOverflow: more events than the kernel queues (a queue
// overflow) are made good by a walk.
func TestTreesOverflow(t *testing.T) {
	watched(t)
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip(err)
	}
	var max int
	fmt.Sscan(string(b), &max)
	if max > 100000 {
		t.Skipf("a queue of %d events", max)
	}
	root := t.TempDir()
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for i := 0; i < max+100; i++ {
		os.WriteFile(fmt.Sprintf("%s/f%d", root, i), nil, 0o644)
	}
	write(t, root+"/last/.env")
	if got, want := found(t, tr), walk(t, []string{root}, secretish); !slices.Equal(got, want) {
		t.Fatalf("found %v, a walk finds %v", got, want)
	}
}

// TestTreesNested: a root inside another is walked as its own, and both
// keep their records.
func TestTreesNested(t *testing.T) { bothWays(t, testTreesNested) }

func testTreesNested(t *testing.T) {
	outer := t.TempDir()
	inner := outer + "/in"
	write(t, inner+"/.env")
	write(t, outer+"/.env")
	roots := []string{outer, inner}
	match := func(root, p, base string, dir bool) Action {
		if dir && slices.Contains(roots, p) {
			return Skip
		}
		return secretish(root, p, base, dir)
	}
	tr, err := Watch(roots, match, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	write(t, inner+"/deep/id_a")
	if got, want := found(t, tr), []string{outer + "/.env", inner + "/.env", inner + "/deep/id_a"}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// TestTreesBusy: a tree renamed without pause does not keep Found from
// returning (it applies what was queued when it began), and once the
// renames stop it agrees with a walk again.
func TestTreesBusy(t *testing.T) {
	watched(t)
	root := t.TempDir()
	write(t, root+"/p/c/.env")
	write(t, root+"/q/r/c/id_x")
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.Renameat2(unix.AT_FDCWD, root+"/p", unix.AT_FDCWD, root+"/q/r", unix.RENAME_EXCHANGE)
		}
	}()
	// Mid-exchange what is found may be either chain's, under either
	// name (a mask by path meets the same race); it is never outside
	// the tree, and the reads come back.
	for i := 0; i < 200; i++ {
		for _, p := range found(t, tr) {
			if !strings.HasPrefix(p, root+"/") {
				t.Fatalf("found %s mid-exchange, outside the tree", p)
			}
		}
	}
	close(stop)
	<-done
	if got, want := found(t, tr), walk(t, []string{root}, secretish); !slices.Equal(got, want) {
		t.Fatalf("found %v, a walk finds %v", got, want)
	}
}

// TestTreesStayInside: a directory swapped with a symlink to another
// tree while it is walked never takes the walk there: nothing is found or
// watched outside the root.
func TestTreesStayInside(t *testing.T) { bothWays(t, testTreesStayInside) }

func testTreesStayInside(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write(t, outside+"/deep/.env")
	write(t, root+"/x/sub/.env")
	if err := os.Symlink(outside, root+"/y"); err != nil {
		t.Fatal(err)
	}
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.Renameat2(unix.AT_FDCWD, root+"/x", unix.AT_FDCWD, root+"/y", unix.RENAME_EXCHANGE)
		}
	}()
	// The outside tree's deep/.env, under whatever name, would say the
	// walk went there.
	for i := 0; i < 300; i++ {
		for _, p := range found(t, tr) {
			if !strings.HasPrefix(p, root+"/") || strings.HasSuffix(p, "/deep/.env") {
				t.Fatalf("found %s: the walk left the tree", p)
			}
		}
	}
	close(stop)
	<-done
	for _, p := range found(t, tr) {
		if strings.HasPrefix(p, outside) {
			t.Fatalf("found %s", p)
		}
	}
}

// TestTreesBudget: Trees sharing a Budget take no more watches than it
// holds; past it they walk on every Found (Degraded says why) and give
// their watches back, and Close gives back the rest.
func TestTreesBudget(t *testing.T) {
	watched(t)
	small, big := t.TempDir(), t.TempDir()
	write(t, small+"/a/.env")
	for i := range 6 {
		write(t, fmt.Sprintf("%s/d%d/e/id_x", big, i))
	}
	b := NewBudget(8)
	ts, err := Watch([]string{small}, secretish, b)
	if err != nil {
		t.Fatal(err)
	}
	if d := ts.Degraded(); d != "" || b.Used() != 2 {
		t.Fatalf("small tree: degraded %q, %d watches used, want 2", d, b.Used())
	}
	tb, err := Watch([]string{big}, secretish, b)
	if err != nil {
		t.Fatal(err)
	}
	if d := tb.Degraded(); !strings.Contains(d, "8 watches") {
		t.Errorf("a tree of 13 directories with 6 watches left: Degraded = %q", d)
	}
	if b.Used() != 2 {
		t.Errorf("after the big tree degraded, %d watches used, want the small tree's 2", b.Used())
	}
	write(t, big+"/d0/late/.env")
	write(t, small+"/b/.env")
	if got, want := found(t, tb), walk(t, []string{big}, secretish); !slices.Equal(got, want) {
		t.Errorf("degraded Found = %q, want %q", got, want)
	}
	if got, want := found(t, ts), walk(t, []string{small}, secretish); !slices.Equal(got, want) {
		t.Errorf("Found = %q, want %q", got, want)
	}
	if b.Used() != 3 {
		t.Errorf("the small tree grew a directory: %d watches used, want 3", b.Used())
	}
	tb.Close()
	ts.Close()
	if b.Used() != 0 {
		t.Errorf("after Close, %d watches used", b.Used())
	}
}

// inotifyInstances counts this process's inotify instances, as the
// kernel lists its open files.
func inotifyInstances(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// TestSmallTreesWalked: small trees are read by walks, with no inotify
// instance (whose closing would cost the process the kernel's grace
// period), and Found is what a walk finds; looked at walkedLooks times, or
// grown past smallEntries entries, they are watched; larger trees are
// watched from the start. Walking is not degraded: Degraded stays empty.
func TestSmallTreesWalked(t *testing.T) {
	set(t, &smallEntries, 20)
	set(t, &walkedLooks, 4)
	base := inotifyInstances(t)
	root := t.TempDir()
	write(t, root+"/a/.env")
	tr, err := Watch([]string{root}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	check := func(step string, walked bool) {
		t.Helper()
		if got, want := found(t, tr), walk(t, []string{root}, secretish); !slices.Equal(got, want) {
			t.Fatalf("%s: found %v, a walk finds %v", step, got, want)
		}
		if tr.walked() != walked || (inotifyInstances(t) > base) == walked || (tr.Watched() > 0) == walked || tr.Degraded() != "" {
			t.Fatalf("%s: walked %v, %d inotify instances (%d before), %d watched, Degraded %q; want walked %v", step, tr.walked(), inotifyInstances(t), base, tr.Watched(), tr.Degraded(), walked)
		}
	}
	check("a small tree", true)
	write(t, root+"/b/.git/HEAD")
	check("a repository made", true)
	os.RemoveAll(root + "/a")
	check("a secret removed", true)
	check("the fourth look", false) // walkedLooks: watched from now on
	write(t, root+"/c/id_x")
	check("a key made, watched", false)
	tr.Close()
	if n := inotifyInstances(t); n != base {
		t.Errorf("after Close, %d inotify instances, want %d", n, base)
	}

	// Grown past smallEntries while walked: watched at the next look.
	grow := t.TempDir()
	tg, err := Watch([]string{grow}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if !tg.walked() {
		t.Fatal("an empty tree is watched")
	}
	for i := range 30 {
		write(t, fmt.Sprintf("%s/d/f%d", grow, i))
	}
	write(t, grow+"/d/.env")
	if got, want := found(t, tg), walk(t, []string{grow}, secretish); !slices.Equal(got, want) {
		t.Fatalf("grown: found %v, a walk finds %v", got, want)
	}
	if tg.walked() || tg.Watched() == 0 || inotifyInstances(t) != base+1 {
		t.Errorf("a tree grown to 32 entries: walked %v, %d watched, %d inotify instances; want watched", tg.walked(), tg.Watched(), inotifyInstances(t))
	}

	// Larger from the start: watched at once.
	big := t.TempDir()
	for i := range 30 {
		write(t, fmt.Sprintf("%s/e%d/id_%d", big, i%3, i))
	}
	tb, err := Watch([]string{big}, secretish, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if tb.walked() || tb.Watched() != 4 {
		t.Errorf("a tree of 33 entries: walked %v, %d watched; want its 4 directories watched", tb.walked(), tb.Watched())
	}
	if got, want := found(t, tb), walk(t, []string{big}, secretish); !slices.Equal(got, want) {
		t.Fatalf("big: found %v, a walk finds %v", got, want)
	}
}
