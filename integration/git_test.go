//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// hostGit runs the host's git in dir as the test's own user, as the agent
// or its user would after a command: with no system or global
// configuration of the machine's in the way, and an identity to commit
// with. It returns git's combined output and error.
func hostGit(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=host", "GIT_AUTHOR_EMAIL=host@example.com",
		"GIT_COMMITTER_NAME=host", "GIT_COMMITTER_EMAIL=host@example.com")
	out, err := c.CombinedOutput()
	return string(out), err
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this host")
	}
}

// hostRepo makes a repository with one commit at dir, as the host user.
func hostRepo(t *testing.T, dir string) {
	t.Helper()
	must(os.MkdirAll(dir, 0o755))
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "host"}} {
		if out, err := hostGit(t, dir, args...); err != nil {
			t.Fatalf("host git %v: %v\n%s", args, err, out)
		}
	}
}

// sandboxGit is how the scripts below run git inside the sandbox: with an
// identity (the sandbox's HOME has no .gitconfig).
const sandboxGit = "git -c user.name=agent -c user.email=agent@example.com"

// TestGitPlantingRoutes: every way a command can leave something in a
// repository that the host's git then runs. Each route is first played
// on the host without a sandbox, to prove that git really runs what it
// plants (the marker appears); then through hutch on the default policy,
// after which the host's own git, run as the host user, must run nothing.
func TestGitPlantingRoutes(t *testing.T) {
	needGit(t)
	// Each script runs in the workspace, which holds a repository made by
	// the host (and proj/, a second one below the top level); MARKER is
	// a host path outside the workspace that the planted code would
	// touch. The host then runs `git <hostArgs>` in hostDir.
	routes := []struct {
		name     string
		script   string
		hostDir  string
		hostArgs []string
	}{
		{"hook", `printf '#!/bin/sh\ntouch MARKER\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit`,
			".", []string{"commit", "-q", "--allow-empty", "-m", "x"}},
		{"config fsmonitor", `git config core.fsmonitor 'touch MARKER; false'`,
			".", []string{"status"}},
		{"config hooksPath", `mkdir -p h && printf '#!/bin/sh\ntouch MARKER\n' > h/pre-commit && chmod +x h/pre-commit && git config core.hooksPath "$PWD/h"`,
			".", []string{"commit", "-q", "--allow-empty", "-m", "x"}},
		{"commondir", `cp -r .git evil && git --git-dir=evil config core.fsmonitor 'touch MARKER; false'; echo ../evil > .git/commondir`,
			".", []string{"status"}},
		{"config.worktree", `git config extensions.worktreeConfig true; git config --worktree core.fsmonitor 'touch MARKER; false'`,
			".", []string{"status"}},
		{"rename .git away", `mv .git .git-old && cp -r .git-old .git && git config core.fsmonitor 'touch MARKER; false'`,
			".", []string{"status"}},
		{"remove .git", `rm -rf .git; git init -q . && git config core.fsmonitor 'touch MARKER; false'`,
			".", []string{"status"}},
		{".git file", `cp -r .git evil && git --git-dir=evil config core.fsmonitor 'touch MARKER; false' && rm -rf .git; echo 'gitdir: evil' > .git`,
			".", []string{"status"}},
		{"submodule", `git init -q sub && (cd sub && ` + sandboxGit + ` commit -q --allow-empty -m s && git config core.fsmonitor 'touch MARKER; false') && git add sub`,
			".", []string{"status"}},
		{"linked worktree", `cp -r .git evil && git --git-dir=evil config core.fsmonitor 'touch MARKER; false'; mkdir -p .git/worktrees/w && echo "$PWD/w/.git" > .git/worktrees/w/gitdir && echo "$PWD/evil" > .git/worktrees/w/commondir && cp .git/HEAD .git/worktrees/w/HEAD; mkdir w && echo "gitdir: $PWD/.git/worktrees/w" > w/.git`,
			"w", []string{"status"}},
		{"nested repository", `git -C proj config core.fsmonitor 'touch MARKER; false'`,
			"proj", []string{"status"}},
		{"nested hook", `printf '#!/bin/sh\ntouch MARKER\n' > proj/.git/hooks/pre-commit; chmod +x proj/.git/hooks/pre-commit`,
			"proj", []string{"commit", "-q", "--allow-empty", "-m", "x"}},
		{"rename nested parent", `mv proj proj-old && cp -r proj-old proj && git -C proj config core.fsmonitor 'touch MARKER; false'`,
			"proj", []string{"status"}},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, sandboxed := range []bool{false, true} {
				ws := dir(t, "ws-")
				hostRepo(t, ws)
				hostRepo(t, filepath.Join(ws, "proj"))
				marker := filepath.Join(dir(t, "out-"), "ran")
				script := strings.ReplaceAll(r.script, "MARKER", marker)
				var res cliResult
				if sandboxed {
					res = sh(t, ws, script)
				} else {
					c := exec.Command("sh", "-c", script)
					c.Dir = ws
					c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
					out, _ := c.CombinedOutput()
					res.stdout = string(out)
				}
				out, _ := hostGit(t, filepath.Join(ws, r.hostDir), r.hostArgs...)
				_, err := os.Stat(marker)
				switch {
				case !sandboxed && err != nil:
					t.Fatalf("without a sandbox the route plants nothing git runs (the test proves nothing):\n%s\nhost git: %s", res, out)
				case sandboxed && err == nil:
					t.Errorf("host: git %v in %s ran what the command planted:\n%s\nhost git: %s", r.hostArgs, r.hostDir, res, out)
				}
			}
		})
	}
}

// TestGitRepositoriesReported: what no mount can stop is reported. A
// repository the command makes is its own (git init must work), so the
// Result names it, at the top of the workspace and below; a repository
// that was there is not reported.
func TestGitRepositoriesReported(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	hostRepo(t, filepath.Join(ws, "old"))
	res := sh(t, ws, "git init -q . && git init -q a/b && mkdir c && echo 'gitdir: /nowhere' > c/.git && git -C old status --short")
	if res.code != 0 || res.result == nil {
		t.Fatalf("%s", res)
	}
	got := res.result.Repositories
	want := []runtime.RepositoryChange{
		{Path: filepath.Join(ws, ".git"), Change: "created"},
		{Path: filepath.Join(ws, "a/b/.git"), Change: "created"},
		{Path: filepath.Join(ws, "c/.git"), Change: "created"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Repositories = %+v, want %+v", got, want)
	}
	// The next command made none: nothing to report (each CLI run is a
	// Sandbox of its own, whose New finds the repositories above).
	if res := sh(t, ws, "git status --short >/dev/null"); res.code != 0 || res.result == nil || len(res.result.Repositories) != 0 {
		t.Errorf("a command that made no repository: %+v\n%s", res.result.Repositories, res)
	}
}

// TestGitWorksInSandbox: ordinary git keeps working on the default
// policy in a repository the command makes; in the workspace's own
// repository it reads (status, log, diff) but does not commit unless the
// policy allows it (--allow-git-write), and then config and hooks still
// stay as they were. Verdicts from the host's git.
func TestGitWorksInSandbox(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	res := sh(t, ws, "git init -q r && cd r && echo hi > f && git add f && "+sandboxGit+" commit -q -m one && git log --oneline")
	if res.code != 0 {
		t.Fatalf("git init/add/commit/log in a new repository:\n%s", res)
	}
	if out, err := hostGit(t, filepath.Join(ws, "r"), "log", "--format=%s"); err != nil || strings.TrimSpace(out) != "one" {
		t.Errorf("host: the new repository's log = %q, %v; want the sandbox's commit", out, err)
	}

	ws = dir(t, "ws-")
	hostRepo(t, ws)
	head := func() string {
		out, err := hostGit(t, ws, "rev-parse", "HEAD")
		if err != nil {
			t.Fatalf("host git rev-parse: %v %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	before := head()
	res = sh(t, ws, "echo hi > f && git status --short && git log --oneline && git diff --stat && git add f")
	if res.code == 0 || !strings.Contains(res.stdout, "?? f") || !strings.Contains(res.stdout, "host") {
		t.Errorf("default policy: status/log should work and add fail (read-only .git):\n%s", res)
	}
	if head() != before {
		t.Errorf("host: the default policy let a command commit")
	}

	config, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	res = sh(t, ws, "git add f && "+sandboxGit+" commit -q -m agent && git log --oneline; echo '[core]' >> .git/config; touch .git/hooks/pre-commit; mkdir .git/modules/x", "--allow-git-write")
	if out, _ := hostGit(t, ws, "log", "-1", "--format=%s"); strings.TrimSpace(out) != "agent" {
		t.Errorf("--allow-git-write: host log = %q, want the agent's commit:\n%s", out, res)
	}
	if now, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(now) != string(config) {
		t.Errorf("--allow-git-write: host .git/config changed to %q", now)
	}
	for _, p := range []string{".git/hooks/pre-commit", ".git/modules/x"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
			t.Errorf("--allow-git-write: host: %s was made", p)
		}
	}
	// A commondir cannot be mounted over before it exists: it is
	// reported.
	res = sh(t, ws, "echo ../elsewhere > .git/commondir", "--allow-git-write")
	want := []runtime.RepositoryChange{{Path: filepath.Join(ws, ".git", "commondir"), Change: "redirected"}}
	if res.result == nil || !slices.Equal(res.result.Repositories, want) {
		t.Errorf("--allow-git-write: a new commondir reported as %+v, want %+v\n%s", res.result, want, res)
	}
}

// TestHostGitOnCreatedRepository: a repository the command creates is
// its own, and plain git run there by the host runs what it planted; the
// Result names it, and hutch git runs git there with nothing planted in
// effect, normal work included.
func TestHostGitOnCreatedRepository(t *testing.T) {
	needGit(t)
	for _, via := range []string{"git", "hutch git"} {
		ws := dir(t, "ws-")
		marker := filepath.Join(dir(t, "out-"), "ran")
		res := sh(t, ws, "git init -q . && echo hi > f && git add f && "+sandboxGit+" commit -q -m agent && "+
			"git config core.fsmonitor 'touch "+marker+"; false' && "+
			"printf '#!/bin/sh\\ntouch "+marker+"\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && "+
			"git config filter.x.clean 'touch "+marker+"; cat' && echo '* filter=x' > .gitattributes")
		want := []runtime.RepositoryChange{{Path: filepath.Join(ws, ".git"), Change: "created"}}
		if res.code != 0 || res.result == nil || !slices.Equal(res.result.Repositories, want) {
			t.Fatalf("Repositories = %+v, want %+v\n%s", res.result, want, res)
		}
		var out string
		var err error
		if via == "git" {
			out, err = hostGit(t, ws, "status")
		} else {
			r := runCLIArgs(t, "git", "-C", ws, "--", "status")
			out = r.stdout + r.stderr
			if r.code != 0 {
				err = fmt.Errorf("exit %d", r.code)
			}
			must(os.WriteFile(filepath.Join(ws, "f"), []byte("host\n"), 0o644))
			if r2 := runCLIArgs(t, "git", "-C", ws, "--", "-c", "user.name=h", "-c", "user.email=h@example.com", "commit", "-q", "-am", "host"); r2.code != 0 {
				t.Errorf("hutch git commit: %s", r2)
			}
		}
		_, ran := os.Stat(marker)
		switch {
		case via == "git" && ran != nil:
			t.Fatalf("plain git ran nothing planted: the test proves nothing (%v)\n%s", err, out)
		case via == "hutch git" && ran == nil:
			t.Errorf("hutch git ran what the command planted (%v)\n%s", err, out)
		case via == "hutch git" && err != nil:
			t.Errorf("hutch git status: %v\n%s", err, out)
		}
	}
}

// TestHostGitHoldsConfigStill: a command of a long-lived Sandbox makes a
// repository (its own to write) and then rewrites its .git/config in a
// loop, in place and by rename, between a clean one and one naming a
// diff.external that marks on the host that it ran; meanwhile the host
// runs hutch git diff there again and again. git must run on the
// configuration hutch git checked: the mark never appears.
func TestHostGitHoldsConfigStill(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	marker := filepath.Join(dir(t, "out-"), "ran")
	sb := newSandbox(t, ws)
	defer sb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := fmt.Sprintf(`set -e
		git init -q repo && cd repo && echo a > f && git add f && %[1]s commit -q -m agent && echo b > f
		cp .git/config ../clean.cfg
		cp .git/config ../planted.cfg && printf '[diff]\n\texternal = "touch %[2]s; false"\n' >> ../planted.cfg
		touch ../ready
		while :; do
			cat ../planted.cfg > .git/config; cat ../clean.cfg > .git/config
			cp ../planted.cfg .git/c.tmp && mv .git/c.tmp .git/config
			cp ../clean.cfg .git/c.tmp && mv .git/c.tmp .git/config
		done`, sandboxGit, marker)
	cmd := sb.Command(ctx, "sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cancel()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("the command never made its repository")
		}
		time.Sleep(10 * time.Millisecond)
	}
	runs, refused := 0, 0
	for deadline := time.Now().Add(10 * time.Second); runs < 60 && time.Now().Before(deadline); runs++ {
		if r := runCLIArgs(t, "git", "-C", filepath.Join(ws, "repo"), "--", "diff"); r.code == 125 {
			refused++ // a listing that met a half-written file
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("hutch git diff ran the diff.external a running command swapped in, on run %d", runs+1)
		}
	}
	if refused == runs {
		t.Fatalf("hutch git refused all %d runs", runs)
	}
	t.Logf("%d runs, %d refused", runs, refused)
}

// TestHostGitLeavesNothing: hutch git removes the copy of the repository's
// configuration it gave git before it exits, in a repository and outside
// one, and when git fails.
func TestHostGitLeavesNothing(t *testing.T) {
	needGit(t)
	repo, plain, tmp := dir(t, "repo-"), dir(t, "plain-"), dir(t, "tmp-")
	hostRepo(t, repo)
	for _, args := range [][]string{
		{"git", "-C", repo, "--", "status"},
		{"git", "-C", plain, "--", "status"},
		{"git", "-C", repo, "--", "no-such-subcommand"},
	} {
		c := exec.Command(hutchBin, args...)
		c.Env = append(os.Environ(), "TMPDIR="+tmp)
		c.Run()
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Errorf("hutch %s left %d entries in TMPDIR: %v", strings.Join(args, " "), len(ents), ents[0].Name())
			os.RemoveAll(tmp)
			must(os.Mkdir(tmp, 0o755))
		}
	}
}
