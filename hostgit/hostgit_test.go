//go:build linux

package hostgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// isolateGit keeps the machine's and the user's configuration, and the
// variables that name programs git would run instead of the repository's,
// out of a test's git.
func isolateGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git:", err)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_TERMINAL_PROMPT", "0")
	for _, v := range []string{"GIT_PAGER", "GIT_EDITOR", "VISUAL", "EDITOR", "GIT_SSH", "GIT_SSH_COMMAND",
		"GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_DIR", "GIT_WORK_TREE"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

// gitT runs plain git in dir for a test's setup.
func gitT(t *testing.T, dir string, args ...string) {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// newRepo returns a repository on branch main with one commit of a file
// f, its author in its own configuration.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "config", "user.name", "Test")
	gitT(t, dir, "config", "user.email", "test@example.com")
	writeFile(t, filepath.Join(dir, "f"), "hello\n")
	gitT(t, dir, "add", "f")
	gitT(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// plantedProg returns a program that appends its arguments to marker and
// fails, as a stand-in for what a sandboxed command would plant.
func plantedProg(t *testing.T) (prog, marker string) {
	t.Helper()
	dir := t.TempDir()
	prog, marker = filepath.Join(dir, "planted"), filepath.Join(dir, "marker")
	writeFile(t, prog, "#!/bin/sh\necho \"$0 $*\" >>"+marker+"\nexit 1\n")
	return prog, marker
}

// gitVersion returns the major and minor version of the git in PATH.
func gitVersion(t *testing.T) (major, minor int) {
	out, err := exec.Command("git", "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		t.Fatalf("git version: %q", out)
	}
	v := strings.SplitN(f[2], ".", 3)
	major, _ = strconv.Atoi(v[0])
	if len(v) > 1 {
		minor, _ = strconv.Atoi(v[1])
	}
	return major, minor
}

// openPty returns a new pseudo-terminal's master and slave.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminal:", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// A gitRoute is one way a sandboxed command can make the host's git run a
// program of its choosing.
type gitRoute struct {
	name string
	// plant sets the route up in repo, naming prog; plain git must not run
	// during it after anything is planted.
	plant   func(t *testing.T, repo, prog string)
	dir     string // where git runs, relative to repo
	args    []string
	stdin   string
	tty     bool   // git's stdout is a terminal (pagers)
	refused string // Command returns an error holding this
	skip    func(t *testing.T)
}

var gitRoutes = []gitRoute{{
	name:  "core.fsmonitor",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "core.fsmonitor", prog) },
	args:  []string{"status"},
}, {
	name: "core.hooksPath",
	plant: func(t *testing.T, repo, prog string) {
		hooks := filepath.Join(repo, "hooks")
		if err := os.Mkdir(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\nexec "+prog+"\n")
		gitT(t, repo, "config", "core.hooksPath", hooks)
	},
	args: []string{"commit", "-q", "--allow-empty", "-m", "x"},
}, {
	name: ".git/hooks/pre-commit",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, ".git", "hooks", "pre-commit"), "#!/bin/sh\nexec "+prog+"\n")
	},
	args: []string{"commit", "-q", "--allow-empty", "-m", "x"},
}, {
	name: "filter.<driver>.clean, required",
	plant: func(t *testing.T, repo, prog string) {
		changeFiltered(t, repo)
		gitT(t, repo, "config", "filter.x.clean", prog)
		gitT(t, repo, "config", "filter.x.required", "true")
	},
	args: []string{"add", "-A"},
}, {
	name: "filter.<driver>.process",
	plant: func(t *testing.T, repo, prog string) {
		changeFiltered(t, repo)
		gitT(t, repo, "config", "filter.x.process", prog)
	},
	args: []string{"add", "-A"},
}, {
	name: "filter.<driver>.smudge",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, ".gitattributes"), "f filter=x\n")
		gitT(t, repo, "add", ".gitattributes")
		gitT(t, repo, "commit", "-q", "-m", "attributes")
		os.Remove(filepath.Join(repo, "f"))
		gitT(t, repo, "config", "filter.x.smudge", prog)
	},
	args: []string{"checkout", "--", "f"},
}, {
	name:  "diff.<driver>.textconv, diff",
	plant: plantDiffDriver("textconv"),
	args:  []string{"diff"},
}, {
	name: "diff.<driver>.textconv, log -p",
	plant: func(t *testing.T, repo, prog string) {
		plantDiffDriver("textconv")(t, repo, prog)
		gitT(t, repo, "commit", "-q", "-am", "change")
		gitT(t, repo, "config", "diff.x.textconv", prog)
	},
	args: []string{"log", "-p"},
}, {
	name:  "diff.<driver>.command",
	plant: plantDiffDriver("command"),
	args:  []string{"diff"},
}, {
	name: "diff.external",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, "f"), "changed\n")
		gitT(t, repo, "config", "diff.external", prog)
	},
	args: []string{"diff"},
}, {
	name:  "core.pager",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "core.pager", prog) },
	args:  []string{"log"},
	tty:   true,
}, {
	name:  "pager.<command>",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "pager.log", prog) },
	args:  []string{"log"},
	tty:   true,
}, {
	name:  "alias.<name>",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "alias.pwn", "!"+prog) },
	args:  []string{"pwn"},
}, {
	name:  "core.editor",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "core.editor", prog) },
	args:  []string{"commit", "--allow-empty"},
}, {
	name:  "core.sshCommand",
	plant: plantRemote("ssh://example.invalid/x", "core.sshCommand", "{prog}"),
	args:  []string{"fetch", "o"},
}, {
	name:  "credential.helper",
	plant: func(t *testing.T, repo, prog string) { gitT(t, repo, "config", "credential.helper", "!"+prog) },
	args:  []string{"credential", "fill"},
	stdin: "protocol=https\nhost=example.invalid\n\n",
}, {
	name:  "core.gitProxy",
	plant: plantRemote("git://127.0.0.1:1/x", "core.gitProxy", "{prog}"),
	args:  []string{"fetch", "o"},
}, {
	name:  "protocol.allow, an ext:: URL",
	plant: plantRemote("ext::{prog}", "protocol.allow", "always"),
	args:  []string{"fetch", "o"},
}, {
	name: "include.path, core.fsmonitor",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, ".git", "planted.cfg"), "[core]\n\tfsmonitor = "+prog+"\n")
		gitT(t, repo, "config", "include.path", "planted.cfg")
	},
	args:    []string{"status"},
	refused: "include.path",
}, {
	name: "include.path, alias",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, "planted.cfg"), "[alias]\n\tpwn = !"+prog+"\n")
		gitT(t, repo, "config", "include.path", "../planted.cfg")
	},
	args:    []string{"pwn"},
	refused: "include.path",
}, {
	name: "includeIf.gitdir, alias",
	plant: func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, "planted.cfg"), "[alias]\n\tpwn = !"+prog+"\n")
		gitT(t, repo, "config", "includeIf.gitdir:"+repo+"/.git.path", "../planted.cfg")
	},
	args:    []string{"pwn"},
	refused: "includeif.gitdir:",
}, {
	name:  ".git/commondir, core.fsmonitor",
	plant: plantCommondir("[core]\n\tfsmonitor = %s\n"),
	args:  []string{"status"},
}, {
	name:  ".git/commondir, alias",
	plant: plantCommondir("[alias]\n\tpwn = !%s\n"),
	args:  []string{"pwn"},
}, {
	// Aliases come from the early configuration, which reads no
	// config.worktree and evaluates no onbranch: a filter is read later.
	name: "config.worktree, filter.<driver>.clean",
	plant: func(t *testing.T, repo, prog string) {
		changeFiltered(t, repo)
		gitT(t, repo, "config", "extensions.worktreeConfig", "true")
		gitT(t, repo, "config", "--worktree", "filter.x.clean", prog)
	},
	args:    []string{"add", "-A"},
	refused: "extensions.worktreeconfig",
}, {
	name: "submodule, core.fsmonitor",
	plant: func(t *testing.T, repo, prog string) {
		sub := plantSubmodule(t, repo, "")
		gitT(t, sub, "config", "core.fsmonitor", prog)
	},
	args: []string{"status"},
}, {
	name: "submodule, filter.<driver>.clean",
	plant: func(t *testing.T, repo, prog string) {
		sub := plantSubmodule(t, repo, "f filter=x\n")
		gitT(t, sub, "config", "filter.x.clean", prog)
		// A new mtime, the same size: status must read f again, through
		// the filter, to know whether it changed.
		later := time.Now().Add(time.Hour)
		os.Chtimes(filepath.Join(sub, "f"), later, later)
	},
	args: []string{"status"},
}, {
	name: "bare repository in a subdirectory",
	plant: func(t *testing.T, repo, prog string) {
		gitT(t, repo, "init", "-q", "--bare", "sub.git")
		gitT(t, filepath.Join(repo, "sub.git"), "config", "alias.pwn", "!"+prog)
	},
	dir:     "sub.git",
	args:    []string{"pwn"},
	refused: "cannot use bare repository",
}, {
	name: "-C in git's arguments, into a nested repository",
	plant: func(t *testing.T, repo, prog string) {
		gitT(t, repo, "init", "-q", "inner")
		gitT(t, filepath.Join(repo, "inner"), "config", "alias.pwn", "!"+prog)
	},
	args: []string{"-C", "inner", "pwn"},
}, {
	name:    "remote.<name>.uploadpack",
	plant:   plantRemote("{repo}", "remote.o.uploadpack", "{prog}"),
	args:    []string{"fetch", "o"},
	refused: "remote.o.uploadpack",
}, {
	name:    "remote.<name>.receivepack",
	plant:   plantRemote("{repo}", "remote.o.receivepack", "{prog}"),
	args:    []string{"push", "o", "HEAD:refs/heads/other"},
	refused: "remote.o.receivepack",
}, {
	name: "includeIf.onbranch, filter.<driver>.clean",
	plant: func(t *testing.T, repo, prog string) {
		changeFiltered(t, repo)
		writeFile(t, filepath.Join(repo, ".git", "planted.cfg"), "[filter \"x\"]\n\tclean = "+prog+"\n")
		gitT(t, repo, "config", "includeIf.onbranch:main.path", "planted.cfg")
	},
	args:    []string{"add", "-A"},
	refused: "includeif.onbranch:main.path",
}, {
	name: "hook.<name>.command",
	plant: func(t *testing.T, repo, prog string) {
		gitT(t, repo, "config", "hook.planted.command", prog)
		gitT(t, repo, "config", "hook.planted.event", "pre-commit")
	},
	args: []string{"commit", "-q", "--allow-empty", "-m", "x"},
	skip: func(t *testing.T) {
		if major, minor := gitVersion(t); major < 2 || major == 2 && minor < 46 {
			t.Skipf("git %d.%d has no hooks in its configuration (git 2.46 added hook.<name>.command)", major, minor)
		}
	},
}}

// plantRemote adds remote o at url and sets key to value, where {prog}
// stands for the planted program and {repo} for the repository.
func plantRemote(url, key, value string) func(t *testing.T, repo, prog string) {
	return func(t *testing.T, repo, prog string) {
		r := strings.NewReplacer("{prog}", prog, "{repo}", repo)
		gitT(t, repo, "remote", "add", "o", r.Replace(url))
		gitT(t, repo, "config", key, r.Replace(value))
	}
}

// changeFiltered gives every file of repo filter driver x and changes f,
// for git add to clean.
func changeFiltered(t *testing.T, repo string) {
	writeFile(t, filepath.Join(repo, ".gitattributes"), "* filter=x\n")
	writeFile(t, filepath.Join(repo, "f"), "changed\n")
}

// plantDiffDriver changes f and plants diff driver x's key (textconv or
// command) for every file.
func plantDiffDriver(key string) func(t *testing.T, repo, prog string) {
	return func(t *testing.T, repo, prog string) {
		writeFile(t, filepath.Join(repo, ".gitattributes"), "* diff=x\n")
		gitT(t, repo, "add", ".gitattributes")
		gitT(t, repo, "commit", "-q", "-m", "attributes")
		writeFile(t, filepath.Join(repo, "f"), "changed\n")
		gitT(t, repo, "config", "diff.x."+key, prog)
	}
}

// plantCommondir points repo's .git/commondir at a copy of its .git whose
// config ends in format, filled in with the planted program.
func plantCommondir(format string) func(t *testing.T, repo, prog string) {
	return func(t *testing.T, repo, prog string) {
		common := filepath.Join(t.TempDir(), "common")
		if err := os.CopyFS(common, os.DirFS(filepath.Join(repo, ".git"))); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(common, "config"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, format, prog)
		f.Close()
		writeFile(t, filepath.Join(repo, ".git", "commondir"), common+"\n")
	}
}

// plantSubmodule commits a nested repository sub, holding f and the given
// .gitattributes, as a gitlink in repo, and returns its path.
func plantSubmodule(t *testing.T, repo, attributes string) string {
	t.Helper()
	sub := filepath.Join(repo, "sub")
	gitT(t, repo, "init", "-q", "sub")
	gitT(t, sub, "config", "user.name", "Test")
	gitT(t, sub, "config", "user.email", "test@example.com")
	writeFile(t, filepath.Join(sub, "f"), "sub\n")
	if attributes != "" {
		writeFile(t, filepath.Join(sub, ".gitattributes"), attributes)
	}
	gitT(t, sub, "add", "-A")
	gitT(t, sub, "commit", "-q", "-m", "sub")
	gitT(t, repo, "add", "sub")
	gitT(t, repo, "commit", "-q", "-m", "gitlink")
	return sub
}

// runGit runs c, with stdin and, for tty, a terminal as its stdout, and
// returns its error and output.
func runGit(t *testing.T, c *exec.Cmd, stdin string, tty bool) (error, string) {
	t.Helper()
	var out bytes.Buffer
	c.Stdin = strings.NewReader(stdin)
	c.Stdout, c.Stderr = &out, &out
	if tty {
		m, s := openPty(t)
		c.Stdout = s
		go io.Copy(io.Discard, m)
	}
	return c.Run(), out.String()
}

// TestGitCommandRunsNothingPlanted plants each route twice: plain git must
// run the planted program (the route is real), git from Command must
// not, whether it then succeeds or fails.
func TestGitCommandRunsNothingPlanted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: plain git and hutch git on every planting route (about 25 s)")
	}
	isolateGit(t)
	for _, tt := range gitRoutes {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip != nil {
				tt.skip(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			repo := newRepo(t)
			prog, marker := plantedProg(t)
			tt.plant(t, repo, prog)
			plain := exec.CommandContext(ctx, "git", tt.args...)
			plain.Dir = filepath.Join(repo, tt.dir)
			err, out := runGit(t, plain, tt.stdin, tt.tty)
			if _, statErr := os.Stat(marker); statErr != nil {
				t.Fatalf("plain git %s did not run the planted program (%v), so the route is not real: %v\n%s", strings.Join(tt.args, " "), statErr, err, out)
			}

			repo = newRepo(t)
			prog, marker = plantedProg(t)
			tt.plant(t, repo, prog)
			dir := filepath.Join(repo, tt.dir)
			cmd, err := Command(ctx, dir, tt.args...)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) || !strings.Contains(err.Error(), dir) {
					t.Errorf("Command: %v, want an error naming %s and %s", err, tt.refused, dir)
				}
				return
			}
			if err != nil {
				t.Fatalf("Command: %v", err)
			}
			err, out = runGit(t, cmd, tt.stdin, tt.tty)
			if b, statErr := os.ReadFile(marker); statErr == nil {
				t.Errorf("git %s from Command ran the planted program (%s): %v\n%s", strings.Join(tt.args, " "), bytes.TrimSpace(b), err, out)
			}
			t.Logf("git %s from Command: %v\n%s", strings.Join(tt.args, " "), err, out)
		})
	}
}

// TestGitCommandRefusesCoreWorktree: git reads core.worktree from the
// repository's file alone; plain git follows it out of the workspace.
func TestGitCommandRefusesCoreWorktree(t *testing.T) {
	isolateGit(t)
	repo, elsewhere := newRepo(t), t.TempDir()
	gitT(t, repo, "config", "core.worktree", elsewhere)
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--show-toplevel").Output()
	if err != nil || strings.TrimSpace(string(out)) != elsewhere {
		t.Fatalf("plain git's work tree: %q, %v; want %s", out, err, elsewhere)
	}
	_, err = Command(t.Context(), repo, "status")
	if err == nil || !strings.Contains(err.Error(), "core.worktree") || !strings.Contains(err.Error(), repo) {
		t.Errorf("Command: %v, want an error naming core.worktree and %s", err, repo)
	}
}

// TestGitCommandEverydayWork: in a repository that plants nothing, the
// usual commands work, committing as the author the repository's own
// configuration names.
func TestGitCommandEverydayWork(t *testing.T) {
	isolateGit(t)
	repo := newRepo(t)
	writeFile(t, filepath.Join(repo, "f"), "hello\nworld\n")
	writeFile(t, filepath.Join(repo, "g"), "new\n")
	steps := []struct {
		args []string
		want string // in the output
	}{
		{[]string{"status", "--short"}, " M f\n?? g\n"},
		{[]string{"diff"}, "+world"},
		{[]string{"add", "f", "g"}, ""},
		{[]string{"commit", "-q", "-m", "second"}, ""},
		{[]string{"log", "--format=%an <%ae> %s"}, "Test <test@example.com> second\nTest <test@example.com> init\n"},
		{[]string{"diff", "HEAD~", "--stat"}, "2 files changed"},
		{[]string{"status", "--porcelain"}, ""},
	}
	for _, s := range steps {
		cmd, err := Command(t.Context(), repo, s.args...)
		if err != nil {
			t.Fatalf("Command(%q): %v", s.args, err)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), s.want) || s.want == "" && len(out) != 0 {
			t.Errorf("git %s: %v\n%s\nwant %q", strings.Join(s.args, " "), err, out, s.want)
		}
	}
}

// TestGitCommandOutsideRepository: git config --list works outside any
// repository, and so does Command.
func TestGitCommandOutsideRepository(t *testing.T) {
	isolateGit(t)
	cmd, err := Command(t.Context(), t.TempDir(), "version")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "git version") {
		t.Errorf("git version: %v\n%s", err, out)
	}
}

func TestGitCommandErrors(t *testing.T) {
	isolateGit(t)
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	for _, dir := range []string{"/nonexistent/hutch", file} {
		if _, err := Command(t.Context(), dir, "status"); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Command(%q): %v, want an error naming it", dir, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Command(t.Context(), t.TempDir(), "status"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Command without git in PATH: %v, want exec.ErrNotFound", err)
	}
}

func TestGitParseConfigList(t *testing.T) {
	tests := []struct {
		in      string
		want    []configEntry
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "local\x00core.bare\nfalse\x00", want: []configEntry{{scope: "local", key: "core.bare", value: "false"}}},
		{in: "local\x00foo.flag\x00", want: []configEntry{{scope: "local", key: "foo.flag", noValue: true}}},
		{in: "local\x00foo.empty\n\x00", want: []configEntry{{scope: "local", key: "foo.empty"}}},
		{in: "global\x00a.b\nline1\nline2\x00worktree\x00sec.sub.sect=x.key\nv=w\x00", want: []configEntry{
			{scope: "global", key: "a.b", value: "line1\nline2"},
			{scope: "worktree", key: "sec.sub.sect=x.key", value: "v=w"},
		}},
		{in: "local\x00core.bare\nfalse", wantErr: true},
		{in: "local\x00", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseConfigList([]byte(tt.in))
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseConfigList(%q) = %+v, %v; want %+v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestGitTreatmentOf(t *testing.T) {
	tests := []struct {
		key  string
		want treatment
	}{
		{"core.bare", keep},
		{"core.Bare", keep},
		{"CORE.BARE", keep},
		{"extensions.objectformat", keep},
		{"extensions.sub.objectformat", overrideEmpty},
		{"remote.origin.url", keep},
		{"remote.My.Remote.url", keep},
		{"remote.url", overrideEmpty},
		{"remote.origin.uploadpack", refuse},
		{"color.ui", keep},
		{"color.diff.meta", keep},
		{"user.name", keep},
		{"user.signingkey", overrideEmpty},
		{"core.fsmonitor", overrideEmpty},
		{"core.worktree", refuse},
		{"core.gitproxy", emptyProxyEnv},
		{"filter.x.clean", overrideEmpty},
		{"alias.st", overrideEmpty},
		{"hook.x.command", overrideEmpty},
		{"include.path", refuse},
		{"includeif.gitdir:/a/b.path", refuse},
		{"extensions.worktreeconfig", refuse},
		{"extensions.objectformat", keep},
		{"url.https://x/.insteadof", keep},
		{"nodot", overrideEmpty},
	}
	for _, tt := range tests {
		if got, _ := treatmentOf(tt.key); got != tt.want {
			t.Errorf("treatmentOf(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestGitRepoOverrides(t *testing.T) {
	local := func(key string) configEntry { return configEntry{scope: "local", key: key, value: "v"} }
	tests := []struct {
		name      string
		entries   []configEntry
		env       []string
		want      []string // keys overridden
		wantEnv   []string
		wantError string
	}{
		{name: "only the repository's own scopes", entries: []configEntry{
			{scope: "system", key: "alias.s"}, {scope: "global", key: "alias.g"}, {scope: "command", key: "alias.c"},
			local("alias.l"), {scope: "worktree", key: "alias.w"},
		}, want: []string{"alias.l", "alias.w"}},
		{name: "once each, multi-valued keys too", entries: []configEntry{local("credential.helper"), local("credential.helper"), local("remote.o.fetch"), local("remote.o.fetch")}, want: []string{"credential.helper"}},
		{name: "always set ones are left to alwaysConfig", entries: []configEntry{local("core.fsmonitor"), local("core.hookspath"), local("core.pager")}, want: []string{"core.pager"}},
		{name: "data kept", entries: []configEntry{local("core.repositoryformatversion"), local("user.email"), local("branch.main.merge")}},
		{name: "include", entries: []configEntry{local("include.path")}, wantError: "include.path"},
		{name: "includeIf", entries: []configEntry{local("includeif.gitdir:/x/.path")}, wantError: "includeif.gitdir:/x/.path"},
		{name: "worktree configuration", entries: []configEntry{local("extensions.worktreeConfig")}, wantError: "extensions.worktreeConfig"},
		{name: "worktree configuration off", entries: []configEntry{{scope: "local", key: "extensions.worktreeconfig", value: "false"}}},
		{name: "gitproxy", entries: []configEntry{local("core.gitproxy"), local("core.gitproxy")}, wantEnv: []string{"GIT_PROXY_COMMAND="}},
		{name: "gitproxy with the user's own", entries: []configEntry{local("core.gitproxy")}, env: []string{"GIT_PROXY_COMMAND=mine"}},
		{name: "uploadpack", entries: []configEntry{local("remote.o.uploadpack")}, wantError: "remote.o.uploadpack"},
		{name: "onbranch", entries: []configEntry{local("includeif.onbranch:main.path")}, wantError: "includeif.onbranch:main.path"},
		{name: "hasconfig", entries: []configEntry{local("includeif.hasconfig:remote.*.url:x.path")}, wantError: "hasconfig"},
	}
	for _, tt := range tests {
		got, env, err := repoOverrides(tt.entries, tt.env)
		var keys []string
		for _, e := range got {
			if e.value != "" || e.scope != "command" {
				t.Errorf("%s: override %+v, want an empty command-scope value", tt.name, e)
			}
			keys = append(keys, e.key)
		}
		switch {
		case tt.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("%s: error %v, want one naming %s", tt.name, err, tt.wantError)
			}
		case err != nil || !slices.Equal(keys, tt.want) || !slices.Equal(env, tt.wantEnv):
			t.Errorf("%s: overrides %q, env %q, %v; want %q, %q", tt.name, keys, env, err, tt.want, tt.wantEnv)
		}
	}
}

func TestGitRepoOptions(t *testing.T) {
	tests := []struct {
		args, want []string
	}{
		{nil, nil},
		{[]string{"status"}, nil},
		{[]string{"log", "-C", "x"}, nil}, // log's own -C
		{[]string{"-C", "sub", "status"}, []string{"-C", "sub"}},
		{[]string{"-C", "a", "-C", "b", "log"}, []string{"-C", "a", "-C", "b"}},
		{[]string{"-c", "core.pager=less", "-p", "log"}, []string{"-c", "core.pager=less"}},
		{[]string{"--git-dir=x.git", "--work-tree", "w", "status"}, []string{"--git-dir=x.git", "--work-tree", "w"}},
		{[]string{"--git-dir", "x.git", "--bare", "log"}, []string{"--git-dir", "x.git", "--bare"}},
		{[]string{"--config-env", "a.b=V", "--config-env=c.d=W", "log"}, []string{"--config-env", "a.b=V", "--config-env=c.d=W"}},
		{[]string{"--namespace", "-C", "-C", "x", "log"}, []string{"-C", "x"}}, // "-C" is --namespace's value
		{[]string{"--no-pager", "--literal-pathspecs", "-C", "x"}, []string{"-C", "x"}},
		{[]string{"--", "-C", "x"}, nil},
		{[]string{"-C"}, []string{"-C"}},
	}
	for _, tt := range tests {
		if got := repoOptions(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("repoOptions(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestGitEnviron(t *testing.T) {
	in := []string{
		"PATH=/bin", "HOME=/home/u", "GIT_DIR=/x", "GIT_WORK_TREE=/y", "GIT_COMMON_DIR=/z", "GIT_INDEX_FILE=i",
		"GIT_OBJECT_DIRECTORY=o", "GIT_ALTERNATE_OBJECT_DIRECTORIES=a", "GIT_CONFIG=c", "GIT_CONFIG_PARAMETERS='a.b'='c'",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_VALUE_0=x", "git_dir=/w",
		"GIT_CONFIG_GLOBAL=/home/u/.gitconfig", "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=/home", "GIT_PAGER=less",
		"GIT_DIRECTORY=kept",
	}
	want := []string{"PATH=/bin", "HOME=/home/u", "GIT_CONFIG_GLOBAL=/home/u/.gitconfig", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=/home", "GIT_PAGER=less", "GIT_DIRECTORY=kept"}
	if got := gitEnviron(in); !slices.Equal(got, want) {
		t.Errorf("gitEnviron = %q, want %q", got, want)
	}
}

// TestGitCommandHoldsConfigStill: a sandboxed command that can write a
// repository (one it made) rewrites its configuration while hutch git
// runs, swapping in diff.external between Command's listing and git's
// own reading, in place and by rename. git must read the configuration
// Command checked: the planted program never runs.
func TestGitCommandHoldsConfigStill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: git against a writer racing it (about 15 s)")
	}
	isolateGit(t)
	repo := newRepo(t)
	writeFile(t, filepath.Join(repo, "f"), "changed\n")
	prog, marker := plantedProg(t)
	cfg := filepath.Join(repo, ".git", "config")
	clean, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	planted := append(slices.Clone(clean), []byte("[diff]\n\texternal = "+prog+"\n")...)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmp := cfg + ".swap"
		for i := 0; ; i++ {
			select {
			case <-stop:
				os.WriteFile(cfg, clean, 0o644)
				return
			default:
			}
			c := clean
			if i%2 == 1 {
				c = planted
			}
			if i%4 < 2 {
				os.WriteFile(cfg, c, 0o644) // in place
			} else if os.WriteFile(tmp, c, 0o644) == nil {
				os.Rename(tmp, cfg) // by rename
			}
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	runs := 0
	for ; runs < 300 && time.Now().Before(deadline); runs++ {
		ctx, cancel := context.WithCancel(context.Background())
		cmd, err := Command(ctx, repo, "diff")
		if err == nil {
			cmd.Run()
		} // else a listing that met a half-written file
		cancel()
		if _, err := os.Stat(marker); err == nil {
			break
		}
	}
	close(stop)
	<-done
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("after %d runs, git from Command ran diff.external swapped in after its listing: %s", runs+1, b)
	}
	t.Logf("%d runs", runs)
}

// TestGitCommandAnyLocale: Command tells a directory in no repository
// (and a bare one) from an error by what git says, which git translates:
// in a German locale it must still run git version outside a repository.
func TestGitCommandAnyLocale(t *testing.T) {
	isolateGit(t)
	t.Setenv("LANGUAGE", "de")
	t.Setenv("LC_ALL", "C.UTF-8")
	cmd, err := Command(t.Context(), t.TempDir(), "version")
	if err != nil {
		t.Fatalf("Command outside a repository, LANGUAGE=de: %v", err)
	}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "git version") {
		t.Errorf("git version: %v\n%s", err, out)
	}
}
