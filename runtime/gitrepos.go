package runtime

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchbox/hutch/mounts"
)

// Git repositories in the writable trees.
//
// What a command leaves in a repository is run later by the host: the
// agent or its user runs git there, and git reads the repository's own
// configuration (core.fsmonitor, filters, aliases, the pager...) and runs
// its hooks. The routes to plant them are many: .git/config and
// .git/hooks, a .git/commondir that sends git to another directory's
// config, .git/config.worktree, a submodule's directory in .git/modules,
// a linked worktree in .git/worktrees, renaming .git away and putting a
// new one in its place, or a .git file naming a git directory elsewhere.
//
// So the rule is by repository, not by file: every repository present in
// the writable trees when a command starts keeps its git directories
// read-only for that command, and its .git entry cannot be renamed or
// removed (it is a mount point). git status, log and diff work on a
// read-only repository; commit does not. Policy.AllowGitWrite is for
// agents that commit inside the sandbox: objects, refs, the index and
// HEAD become writable, and only what git reads as configuration or runs
// as code stays read-only (gitCodePaths).
//
// What no mount can cover is reported instead: a repository the command
// creates (git init must work) or, with AllowGitWrite, redirects with a
// commondir or config.worktree that did not exist before. Result.
// Repositories lists them; hostgit.Command (hutch git) runs the host's git
// there with none of it in effect.

// gitCodePaths are the parts of a git directory that git reads as
// configuration or runs as code. With AllowGitWrite they stay read-only;
// the directories among them are made when missing (git init makes hooks
// and info itself, and git ignores an empty modules or worktrees), since a
// missing one could be created and filled. commondir and config.worktree
// are files that must not exist unless the repository uses them: they are
// kept read-only when present and reported when a command adds them; so is
// gitdir, with which a linked worktree's git directory names the worktree's
// .git file (git worktree prune, repair and remove act on what it names).
var (
	gitCodeDirs  = []string{"hooks", "info", "modules", "worktrees"}
	gitCodeFiles = []string{"config"}
	gitRedirects = []string{"commondir", "config.worktree", "gitdir"}
)

// maxGitFile bounds what is read of a .git file or a commondir: each is
// one path.
const maxGitFile = 4096

// gitRepo is a repository found in a writable tree.
type gitRepo struct {
	// Entry is the .git directory entry: a directory, or a file naming
	// the git directory ("gitdir: PATH"), or a symlink to one.
	Entry string
	// Dirs are the repository's git directories that lie inside the
	// writable trees: Entry itself when it is a directory, the one a .git
	// file or symlink names, and the common directory a commondir names.
	Dirs []string
	// Trees are those of the same that are writable trees themselves (a
	// worktree workspace's own git directory, see hostgit.Worktree): writable as
	// the caller asked, but for their gitCodePaths, read-only whatever
	// AllowGitWrite says.
	Trees []string
	// info identifies Entry as found, so that a replaced entry is told
	// from the one that was there; redirects are the gitRedirects files
	// present in Dirs then.
	info      fs.FileInfo
	redirects []string
	// holdsTrees says a writable tree lies in one of Dirs.
	holdsTrees bool
}

// loadRepo reads the repository whose .git entry is at entry. It reports
// false when there is none.
func loadRepo(entry string, roots []string) (gitRepo, bool) {
	fi, err := os.Lstat(entry)
	if err != nil {
		return gitRepo{}, false
	}
	r := gitRepo{Entry: entry, info: fi}
	var dir string
	switch {
	case fi.IsDir():
		dir = entry
	case fi.Mode().IsRegular():
		if dir = readGitPath(entry, "gitdir: "); dir == "" {
			return r, true
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		dir = entry
	default:
		return r, true
	}
	r.addDir(dir, roots)
	for _, d := range slices.Concat(r.Dirs, r.Trees) {
		// A linked worktree's git directory names its main one; both
		// are the repository's.
		if common := readGitPath(filepath.Join(d, "commondir"), ""); common != "" {
			r.addDir(common, roots)
		}
	}
	for _, d := range slices.Concat(r.Dirs, r.Trees) {
		for _, n := range gitRedirects {
			if p := filepath.Join(d, n); exists(p) {
				r.redirects = append(r.redirects, p)
			}
		}
	}
	return r, true
}

// addDir adds the git directory at p when it resolves to a directory
// strictly inside a writable tree (one outside is read-only in the view
// anyway), or to Trees when it is a writable tree itself.
func (r *gitRepo) addDir(p string, roots []string) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() || slices.Contains(r.Dirs, real) || slices.Contains(r.Trees, real) {
		return
	}
	if slices.Contains(roots, real) {
		r.Trees = append(r.Trees, real)
		return
	}
	for _, root := range roots {
		if mounts.Within(real, root) {
			r.Dirs = append(r.Dirs, real)
			// A writable tree in it (the parts a worktree commits to,
			// or with AllowGitWrite what @git-write makes writable:
			// checkGitTree lets nothing else be one) stays writable:
			// the directory is guarded as @git-write guards it.
			r.holdsTrees = r.holdsTrees || slices.ContainsFunc(roots, func(t string) bool { return t != real && mounts.Within(t, real) })
			return
		}
	}
}

// readGitPath reads the one path a .git file ("gitdir: PATH") or a
// commondir ("PATH") holds, resolved against the file's directory; ""
// when the file is missing, too long or not of that form.
func readGitPath(file, prefix string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, maxGitFile+1))
	if err != nil || len(b) > maxGitFile {
		return ""
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	s, ok := strings.CutPrefix(strings.TrimRight(string(line), "\r"), prefix)
	if !ok || s == "" || strings.IndexByte(s, 0) >= 0 {
		return ""
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(filepath.Dir(file), s)
	}
	return filepath.Clean(s)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// same reports whether two lists of repositories name the same entries,
// each still the same file.
func sameRepos(a, b []gitRepo) bool {
	return slices.EqualFunc(a, b, func(x, y gitRepo) bool {
		return x.Entry == y.Entry && os.SameFile(x.info, y.info) && slices.Equal(x.Dirs, y.Dirs) && slices.Equal(x.Trees, y.Trees) && slices.Equal(x.redirects, y.redirects)
	})
}

// topRepos are the repositories at the top level of each root now.
func topRepos(roots []string) []gitRepo {
	var out []gitRepo
	for _, root := range roots {
		if r, ok := loadRepo(filepath.Join(root, ".git"), roots); ok {
			out = append(out, r)
		}
	}
	return out
}

// deepRepos are the repositories below the top level of the roots.
func deepRepos(roots []string) []gitRepo {
	_, repos := scanDeep(roots, nil)
	return repos
}

// skipDirs are not searched for deny names or repositories below the top
// level: version-control stores, which hold objects, not files a command
// reads by name. Dependency trees (node_modules, vendor) are searched like
// the rest: a package installed from git is a repository whose hooks the
// host's git would run, and a package may ship a .env.
var skipDirs = []string{".git", ".hg", ".svn"}

// walkTrees walks each root and calls visit for every entry below it,
// but not in skipDirs nor in a root nested in another (walked on its
// own). visit returns false to not enter a directory.
func walkTrees(roots []string, visit func(root, p string, d fs.DirEntry) bool) {
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return nil
			}
			if d.IsDir() && slices.Contains(roots, p) {
				return filepath.SkipDir
			}
			enter := visit(root, p, d)
			if d.IsDir() && (!enter || slices.Contains(skipDirs, d.Name())) {
				return filepath.SkipDir
			}
			return nil
		})
	}
}

// gitGuard is what keeps the repositories' configuration and code as they
// were for a command: paths bound read-only, and directories pinned (they
// cannot be renamed or removed; what is in them stays writable). It only
// computes; makeGitCodeDirs must have made the missing gitCodeDirs first
// (a missing path's mount is skipped).
func gitGuard(repos []gitRepo, allowWrite bool) (readOnly, pins []string) {
	for _, r := range repos {
		if r.info.Mode().IsRegular() {
			// A .git file is bound read-only: it cannot be rewritten to
			// name another directory, nor renamed. (A symlink cannot be
			// bound; its target is among Dirs.)
			readOnly = append(readOnly, r.Entry)
		}
		for _, d := range r.Dirs {
			if !allowWrite && !r.holdsTrees {
				readOnly = append(readOnly, d)
				continue
			}
			pins = append(pins, d)
			readOnly = append(readOnly, gitCodePaths(d)...)
		}
		// A writable tree is a mount point already: no pin.
		for _, d := range r.Trees {
			readOnly = append(readOnly, gitCodePaths(d)...)
		}
	}
	return readOnly, pins
}

// gitCodePaths are the paths of git directory d that stay read-only when
// the rest of it is writable.
func gitCodePaths(d string) []string {
	var out []string
	for _, n := range slices.Concat(gitCodeDirs, gitCodeFiles, gitRedirects) {
		out = append(out, filepath.Join(d, n))
	}
	return out
}

// makeGitCodeDirs makes the gitCodeDirs missing in the git directories
// that will be writable (Trees, and with allowWrite Dirs), so that they
// can be bound read-only rather than created and filled by a command. A
// directory that cannot be made is left out of the view's mounts (the
// repository is then likely read-only to the command anyway).
func makeGitCodeDirs(repos []gitRepo, allowWrite bool) {
	for _, r := range repos {
		dirs := r.Trees
		if allowWrite || r.holdsTrees {
			dirs = slices.Concat(r.Dirs, r.Trees)
		}
		for _, d := range dirs {
			for _, n := range gitCodeDirs {
				_ = os.Mkdir(filepath.Join(d, n), 0o755)
			}
		}
	}
}

// RepositoryChange is a git repository in a writable tree whose
// configuration a command may have written: the host's git run there reads
// it, and would run what it names. Run git there with hostgit.Command.
type RepositoryChange struct {
	// Path is the repository's .git entry, or for "redirected" the file
	// that redirects it.
	Path string `json:"path"`
	// Change is "created" (a .git that was not there when the command
	// started), "replaced" (a .git entry that is not the one that was),
	// or "redirected" (a commondir or config.worktree added to a git
	// directory: possible only with Policy.AllowGitWrite).
	Change string `json:"change"`
}

// repoChanges tells, of the repositories in the writable trees now, those
// that differ from known, the ones there when the command started: one
// whose .git entry (or bare directory) was not there is "created",
// whatever its timestamps say (a directory renamed to .git keeps its
// birth time); one whose entry is another file now is "replaced" (a file
// born at or after since, too: an inode number can be reused at once, as
// tmpfs does); one of the same that has gained a redirect is
// "redirected". Both lists are sorted by Entry, as the watch on the trees
// gives them.
func repoChanges(known, now []gitRepo, since time.Time) []RepositoryChange {
	var out []RepositoryChange
	for _, r := range now {
		i := slices.IndexFunc(known, func(k gitRepo) bool { return k.Entry == r.Entry })
		born, hasBirth := birthTime(r.Entry)
		switch {
		case i < 0:
			out = append(out, RepositoryChange{Path: r.Entry, Change: "created"})
		case !os.SameFile(known[i].info, r.info) || hasBirth && !born.Before(since):
			out = append(out, RepositoryChange{Path: r.Entry, Change: "replaced"})
		default:
			for _, f := range r.redirects {
				if !slices.Contains(known[i].redirects, f) {
					out = append(out, RepositoryChange{Path: f, Change: "redirected"})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b RepositoryChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}
