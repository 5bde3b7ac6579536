package hostgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hutchbox/hutch/internal/smallfile"
)

// Holding a repository's configuration still.
//
// A sandboxed command may still be running while the host runs git, and
// may write the repository (one it made is its own): whatever Command
// lists, git reads the configuration again when it starts, and again in
// every git it starts. A check of the files themselves, however careful,
// is a check of what they held then. So git is not given the repository's
// configuration file at all: Command copies it, once, into a directory
// of its own (heldDir), lists that copy, and points git at it as the
// repository's common directory (GIT_COMMON_DIR), where git reads config.
// The copy is the host's; what git reads is what was listed.
//
// Everything else of the common directory (objects, refs, logs, info, ...)
// is a symbolic link to the repository's own, so that git reads and writes
// the repository as usual: those are data, and git writes them by creating
// a lock file beside the file it replaces, which the link puts in the
// repository. The files git rewrites at the top of the common directory
// by renaming a lock file over them (config, packed-refs, shallow) would
// be rewritten in the copy and lost: their lock files are made in advance,
// so that git refuses to rewrite them (as it does when another git holds
// the lock) instead of losing what it wrote. So hutch git cannot change
// the repository's configuration, pack its refs, delete a packed ref or
// deepen a shallow clone; git says so and fails.
//
// The per-worktree files (HEAD, index, logs/HEAD, ...) are read from the
// repository's git directory, named by GIT_DIR: git finds no repository by
// itself, which could be another one by the time it looks.

// heldLocks are the lock files made in advance in a held directory: git
// renames these over the files of the same name without .lock.
var heldLocks = []string{"config.lock", "packed-refs.lock", "shallow.lock", "gc.pid.lock"}

// heldMaxConfig bounds the configuration file copied: a repository's is a
// few hundred bytes.
const heldMaxConfig = 1 << 20

// heldPrefix starts the name of every held directory, followed by the pid
// of the process that made it.
const heldPrefix = "hutch-git-"

// A repoLocation is where git found the repository of a directory.
type repoLocation struct {
	gitDir, commonDir string // absolute
	workTree          string // absolute, "" for none (bare, or in the git directory)
}

// locateRepo asks git where the repository of dir is, with opts (the
// repository-choosing options of git's arguments) and env. It reports
// ok false when dir is in no repository.
func locateRepo(ctx context.Context, git, dir string, opts, env []string) (loc repoLocation, ok bool, err error) {
	out, err := gitOutput(ctx, git, dir, env, append(opts, "rev-parse", "--path-format=absolute",
		"--git-dir", "--git-common-dir", "--is-inside-work-tree", "--show-toplevel")...)
	switch {
	case err == nil:
	case strings.Contains(err.Error(), "not a git repository"):
		return loc, false, nil
	case strings.Contains(err.Error(), "must be run in a work tree"):
		// A bare repository, or dir in the git directory: all but the
		// top level was said.
	default:
		return loc, false, err
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 3 || !filepath.IsAbs(lines[0]) || !filepath.IsAbs(lines[1]) ||
		lines[2] == "true" && (len(lines) != 4 || !filepath.IsAbs(lines[3])) {
		return loc, false, fmt.Errorf("git rev-parse said %q, not where the repository is", out)
	}
	loc.gitDir, loc.commonDir = lines[0], lines[1]
	if lines[2] == "true" {
		loc.workTree = lines[3]
	}
	return loc, true, nil
}

// gitOutput runs git with args in dir and returns its standard output,
// and an error holding its standard error if it failed. git speaks
// English here whatever the user's locale: locateRepo reads what it says.
func gitOutput(ctx context.Context, git, dir string, env []string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, git, append([]string{"--no-pager"}, args...)...)
	c.Dir, c.Env = dir, append(slices.Clone(env), "LC_ALL=C", "LANGUAGE=")
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
	}
	return stdout.String(), err
}

// holdRepo makes the held directory for the repository at loc, or, with
// loc nil, an empty one that makes git find no repository at all. It
// returns the variables that point git at it, and the function that
// removes it.
func holdRepo(loc *repoLocation) (env []string, remove func(), err error) {
	sweepHeld()
	name := heldPrefix + strconv.Itoa(os.Getpid()) + "-"
	if loc == nil {
		name += "no-repository-" // what git names when it needs one
	}
	held, err := os.MkdirTemp("", name)
	if err != nil {
		return nil, nil, err
	}
	remove = func() { os.RemoveAll(held) }
	if loc == nil {
		// No repository now: git must not find one a command makes
		// before it starts. An empty directory is no repository.
		return []string{"GIT_DIR=" + held}, remove, nil
	}
	if err := fillHeld(held, loc.commonDir); err != nil {
		remove()
		return nil, nil, err
	}
	env = []string{"GIT_DIR=" + loc.gitDir, "GIT_COMMON_DIR=" + held}
	if loc.workTree != "" {
		env = append(env, "GIT_WORK_TREE="+loc.workTree)
	}
	return env, remove, nil
}

// fillHeld copies common's config into held, links every other entry of
// common, and makes heldLocks.
func fillHeld(held, common string) error {
	cfg, err := readHeldConfig(filepath.Join(common, "config"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(held, "config"), cfg, 0o600); err != nil {
		return err
	}
	d, err := os.Open(common)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == "config" || name == "commondir" || strings.HasSuffix(name, ".lock") {
			continue
		}
		if err := os.Symlink(filepath.Join(common, name), filepath.Join(held, name)); err != nil {
			return err
		}
	}
	for _, name := range heldLocks {
		if err := os.WriteFile(filepath.Join(held, name), nil, 0o400); err != nil {
			return err
		}
	}
	return nil
}

// readHeldConfig reads a repository's configuration file as a file a
// command could have written: without following a symbolic link, without
// blocking on a FIFO, a regular file of at most heldMaxConfig. A missing
// one is empty, as git reads it.
func readHeldConfig(path string) ([]byte, error) {
	f, err := openUntrusted(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := smallfile.Read(f, heldMaxConfig, "a repository's configuration")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// sweepHeld removes the held directories, an hour old or more, of
// processes that ended without removing theirs (a hutch git whose caller
// never cancelled its context). (The age spares a live process of another
// pid namespace sharing the directory, which looks ended from here.)
func sweepHeld() {
	tmp := os.TempDir()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), heldPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || !processGone(pid) {
			continue
		}
		p := filepath.Join(tmp, e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && ownedByMe(fi) && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(p)
		}
	}
}
