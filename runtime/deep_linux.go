//go:build linux

package runtime

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/internal/treewatch"
	"github.com/hutchbox/hutch/mounts"
)

// watchTrees starts keeping what lies in the writable trees in step with
// them: the entries matching the deny names and the repositories, at any
// depth (treewatch). Every command and file operation then reads them as
// of its start, at the cost of the changes since the last, not of a walk.
func (sb *Sandbox) watchTrees() error {
	roots, names := sb.roots(), compileNames(sb.names)
	t, err := treewatch.Watch(roots, func(root, p, base string, dir bool) treewatch.Action {
		switch {
		case dir && slices.Contains(roots, p):
			return treewatch.Skip // a writable tree in another: watched as its own
		case names.match(base), base == ".git":
			return treewatch.Record // masked whole, or a repository: not entered
		case base == "HEAD" && !dir:
			return treewatch.Record // perhaps a bare repository's: treesNow looks
		case dir && slices.Contains(skipDirs, base):
			return treewatch.Skip
		}
		return treewatch.Enter
	}, treeWatches())
	if err != nil {
		return &SetupError{Layer: LayerFilesystem, Op: "watch the writable trees", Err: err}
	}
	sb.trees = t
	return nil
}

// treeWatches bounds the watches the Sandboxes of this process keep on
// their trees, together, at a quarter of the host user's inotify watches:
// the kernel counts them per user, and the user's editors and file
// watchers need the rest. Past it a Sandbox walks its trees at every
// command instead (Result.TreesWalked says so).
var treeWatches = sync.OnceValue(func() *treewatch.Budget {
	limit := 8192 // the kernel's smallest default, before 5.11
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			limit = n
		}
	}
	return treewatch.NewBudget(limit / 4)
})

// treesWalked says why the writable trees are walked for every command
// instead of followed by their watch, or "".
func (sb *Sandbox) treesWalked() string {
	if sb.trees == nil {
		return ""
	}
	return sb.trees.Degraded()
}

// treesNow is what the writable trees hold now: the paths to mask for
// the deny names, and the repositories.
func (sb *Sandbox) treesNow() (named, []gitRepo, error) {
	roots := sb.roots()
	n := named{counts: make([]int, len(roots))}
	found, err := sb.trees.Found()
	if err != nil {
		return n, nil, err
	}
	var repos []gitRepo
	for _, p := range found {
		i := rootIndex(roots, p)
		if i < 0 {
			continue
		}
		base := filepath.Base(p)
		switch {
		case matchName(sb.names, base):
		case base == "HEAD":
			// A bare repository (HEAD, objects, refs): its hooks and
			// config run when the host's git pushes to it.
			if d := filepath.Dir(p); d != roots[i] && filepath.Base(d) != ".git" && isBareGitDir(d) {
				if r, ok := loadRepo(d, roots); ok {
					repos = append(repos, r)
				}
			}
			continue
		default:
			if r, ok := loadRepo(p, roots); ok {
				repos = append(repos, r)
			}
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue // gone since: its event is queued
		}
		n.add(i, maskTarget(p, fs.FileInfoToDirEntry(fi), roots)...)
	}
	return n, repos, nil
}

// rootIndex is the index in roots of the innermost root p lies in, or -1.
func rootIndex(roots []string, p string) int {
	best := -1
	for i, r := range roots {
		if mounts.Within(p, r) && (best < 0 || len(r) > len(roots[best])) {
			best = i
		}
	}
	return best
}
