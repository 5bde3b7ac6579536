package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadRepo: which git directories of a repository lie in the writable
// trees, whatever form its .git takes.
func TestLoadRepo(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	mk := func(p string) string {
		must(t, os.MkdirAll(p, 0o755))
		return p
	}
	write := func(p, s string) {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(s), 0o644))
	}
	main := mk(filepath.Join(ws, "main/.git"))
	wt := mk(filepath.Join(main, "worktrees/w"))
	write(filepath.Join(wt, "commondir"), "../..\n")
	write(filepath.Join(ws, "w/.git"), "gitdir: ../main/.git/worktrees/w\n")
	write(filepath.Join(ws, "abs/.git"), "gitdir: "+main+"\n")
	write(filepath.Join(ws, "out/.git"), "gitdir: "+outside+"\n")
	write(filepath.Join(ws, "junk/.git"), "not a gitdir line\n")
	write(filepath.Join(ws, "big/.git"), "gitdir: "+string(make([]byte, maxGitFile))+"\n")
	write(filepath.Join(ws, "root/.git"), "gitdir: "+ws+"\n")
	mk(filepath.Join(ws, "link/real"))
	must(t, os.Symlink("real", filepath.Join(ws, "link/.git")))
	write(filepath.Join(main, "config.worktree"), "")

	tests := []struct {
		entry     string
		dirs      []string
		redirects []string
	}{
		{"main/.git", []string{main}, []string{filepath.Join(main, "config.worktree")}},
		{"w/.git", []string{wt, main}, []string{filepath.Join(wt, "commondir"), filepath.Join(main, "config.worktree")}},
		{"abs/.git", []string{main}, []string{filepath.Join(main, "config.worktree")}},
		{"out/.git", nil, nil},  // outside: read-only in the view anyway
		{"junk/.git", nil, nil}, // not a .git file git would follow
		{"big/.git", nil, nil},
		{"root/.git", nil, nil}, // a writable tree itself is the caller's
		{"link/.git", []string{filepath.Join(ws, "link/real")}, nil},
	}
	for _, tt := range tests {
		r, ok := loadRepo(filepath.Join(ws, tt.entry), []string{ws})
		if !ok || !slices.Equal(r.Dirs, tt.dirs) || !slices.Equal(r.redirects, tt.redirects) {
			t.Errorf("loadRepo(%s) = %v %q %q, want %q %q", tt.entry, ok, r.Dirs, r.redirects, tt.dirs, tt.redirects)
		}
	}
	if _, ok := loadRepo(filepath.Join(ws, "none/.git"), []string{ws}); ok {
		t.Errorf("loadRepo of a missing .git reported a repository")
	}
}

// TestGitGuard: by default a repository's git directories are read-only
// whole; with AllowGitWrite only what git reads as configuration or code,
// with .git pinned and its missing code directories made.
func TestGitGuard(t *testing.T) {
	ws := t.TempDir()
	git := filepath.Join(ws, ".git")
	must(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "sub.git"), nil, 0o644))
	must(t, os.MkdirAll(filepath.Join(ws, "w"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "w/.git"), []byte("gitdir: ../.git\n"), 0o644))
	var repos []gitRepo
	for _, e := range []string{git, filepath.Join(ws, "w/.git")} {
		r, ok := loadRepo(e, []string{ws})
		if !ok {
			t.Fatalf("no repository at %s", e)
		}
		repos = append(repos, r)
	}

	ro, pins := gitGuard(repos, false)
	if want := []string{git, filepath.Join(ws, "w/.git"), git}; !slices.Equal(ro, want) || pins != nil {
		t.Errorf("default: read-only %q, pins %q; want %q and none", ro, pins, want)
	}
	if _, err := os.Stat(filepath.Join(git, "modules")); err == nil {
		t.Errorf("gitGuard made modules: it only computes")
	}

	makeGitCodeDirs(repos[:1], true)
	ro, pins = gitGuard(repos[:1], true)
	var want []string
	for _, n := range []string{"hooks", "info", "modules", "worktrees", "config", "commondir", "config.worktree", "gitdir"} {
		want = append(want, filepath.Join(git, n))
	}
	if !slices.Equal(ro, want) || !slices.Equal(pins, []string{git}) {
		t.Errorf("AllowGitWrite: read-only %q, pins %q; want %q and %s", ro, pins, want, git)
	}
	for _, n := range gitCodeDirs {
		if fi, err := os.Stat(filepath.Join(git, n)); err != nil || !fi.IsDir() {
			t.Errorf("AllowGitWrite: %s not made: %v", n, err)
		}
	}
}

// TestGitGuardTree: a git directory that is a writable tree itself (a
// worktree workspace's own) stays writable but for its code paths,
// whatever AllowGitWrite says, and is not pinned (it is a mount point);
// the common directory its commondir names, outside the writable trees,
// is left to the view's read-only host.
func TestGitGuardTree(t *testing.T) {
	dir := t.TempDir()
	ws, admin := filepath.Join(dir, "ws"), filepath.Join(dir, "main/.git/worktrees/ws")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.MkdirAll(admin, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+admin+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(admin, "commondir"), []byte("../..\n"), 0o644))
	roots := []string{ws, admin}
	repos := topRepos(roots)
	if len(repos) != 1 || repos[0].Dirs != nil || !slices.Equal(repos[0].Trees, []string{admin}) {
		t.Fatalf("repositories %+v; want the workspace's, with Trees %s", repos, admin)
	}
	if want := []string{filepath.Join(admin, "commondir")}; !slices.Equal(repos[0].redirects, want) {
		t.Errorf("redirects %q; want %q", repos[0].redirects, want)
	}
	makeGitCodeDirs(repos, false)
	for _, allow := range []bool{false, true} {
		ro, pins := gitGuard(repos, allow)
		want := append([]string{filepath.Join(ws, ".git")}, gitCodePaths(admin)...)
		if !slices.Equal(ro, want) || pins != nil {
			t.Errorf("AllowGitWrite %v: read-only %q, pins %q; want %q and none", allow, ro, pins, want)
		}
	}
	for _, n := range gitCodeDirs {
		if fi, err := os.Stat(filepath.Join(admin, n)); err != nil || !fi.IsDir() {
			t.Errorf("%s not made: %v", n, err)
		}
	}
}

// TestRepoChanges: created, replaced and redirected repositories are
// told apart from the ones there when the command started, by identity,
// not by time: a directory renamed to .git is created.
func TestRepoChanges(t *testing.T) {
	ws := t.TempDir()
	roots := []string{ws}
	for _, d := range []string{".git", "kept/.git", "kept/sub", "replaced/.git", "redirected/.git", "old"} {
		must(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	repos := func() []gitRepo {
		r := append(topRepos(roots), deepRepos(roots)...)
		slices.SortFunc(r, func(a, b gitRepo) int { return strings.Compare(a.Entry, b.Entry) })
		return r
	}
	known := repos()
	time.Sleep(20 * time.Millisecond) // past a coarse clock tick
	since := fsNow()

	must(t, os.RemoveAll(filepath.Join(ws, "replaced/.git")))
	must(t, os.MkdirAll(filepath.Join(ws, "replaced/.git"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "redirected/.git/commondir"), []byte("../x\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(ws, "new/deep/.git"), 0o755))
	must(t, os.Rename(filepath.Join(ws, "old"), filepath.Join(ws, "kept/sub/.git")))

	got := repoChanges(known, repos(), since)
	want := []RepositoryChange{
		{Path: filepath.Join(ws, "kept/sub/.git"), Change: "created"},
		{Path: filepath.Join(ws, "new/deep/.git"), Change: "created"},
		{Path: filepath.Join(ws, "redirected/.git/commondir"), Change: "redirected"},
		{Path: filepath.Join(ws, "replaced/.git"), Change: "replaced"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("repoChanges = %+v\nwant %+v", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
