//go:build linux

package integration

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// Guards no door undoes (issue 40): whatever route assembles a policy (a
// grant, a policy layer), no writable tree lies in a git directory; the
// CLI's data directory is masked in every sandbox; a file a command could
// have written is read by the host only as a small regular file; and the
// server's exit never panics. Each verdict is the host's.

// plantHook is a script that tries to plant a pre-commit hook in the
// repository at repo, and to add a program-running key to its config.
func plantHook(repo string) string {
	return fmt.Sprintf(`printf '#!/bin/sh\ntouch %[1]s/hook-ran\n' > %[1]s/.git/hooks/pre-commit 2>/dev/null;
		chmod +x %[1]s/.git/hooks/pre-commit 2>/dev/null; true`, repo)
}

// hookPlanted says, from the host, whether a hook landed, and whether the
// host's own git commit ran anything planted.
func hookPlanted(t *testing.T, repo string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(repo, ".git", "hooks", "pre-commit"))
	hostGit(t, repo, "commit", "-q", "--allow-empty", "-m", "host")
	_, ran := os.Stat(filepath.Join(repo, "hook-ran"))
	return err == nil || ran == nil
}

// TestGrantCannotLiftGitGuard: a grant write: of a repository's git
// directory, or of a part of it, is refused, from the library and through
// the local API, whatever the ceiling (the workspace is always within
// it); with @git-write, a part @git-write makes writable may be granted,
// never hooks or config. The host's commit runs nothing.
func TestGrantCannotLiftGitGuard(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	hostRepo(t, ws)
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Grantable = runtime.Grant{GitWrite: true} })
	defer sb.Close()
	for _, c := range []struct {
		grant runtime.Grant
		ok    bool
	}{
		{runtime.Grant{Writable: []string{ws + "/.git/hooks"}}, false},
		{runtime.Grant{Writable: []string{ws + "/.git"}}, false},
		{runtime.Grant{Writable: []string{ws + "/.git/objects"}}, false},
		{runtime.Grant{Writable: []string{ws + "/.git/hooks"}, GitWrite: true}, false},
		{runtime.Grant{Writable: []string{ws + "/.git"}, GitWrite: true}, false},
		{runtime.Grant{Writable: []string{ws + "/.git/objects"}, GitWrite: true}, true},
	} {
		cmd := sb.Command(context.Background(), "sh", "-c", plantHook(ws))
		cmd.Grant = c.grant
		err := cmd.Run()
		var pe *runtime.PolicyError
		switch {
		case c.ok && err != nil:
			t.Errorf("grant %v: %v", c.grant.Tags(), err)
		case !c.ok && (err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "git directory")):
			t.Errorf("grant %v: %v, want a refusal naming the git directory", c.grant.Tags(), err)
		}
		if hookPlanted(t, ws) {
			t.Fatalf("grant %v: a hook was planted, or the host's commit ran one", c.grant.Tags())
		}
	}
	s := startServe(t, ws, dir(t, "serve-data-"), "--grantable", "@git-write")
	body := mustJSON(map[string]any{"argv": []string{"sh", "-c", plantHook(ws)}, "grant": []string{"write:" + ws + "/.git/hooks"}})
	resp, err := unixHTTP(s.sock).Post("http://hutch/v1/exec", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), "git directory") {
		t.Errorf("/v1/exec with a grant of .git/hooks: %s %s", resp.Status, raw)
	}
	if hookPlanted(t, ws) {
		t.Fatal("/v1/exec: a hook was planted, or the host's commit ran one")
	}
}

// TestLayerCannotLiftGitGuard: the workspace's own policy layer, which a
// command can write, cannot make a git directory writable either.
func TestLayerCannotLiftGitGuard(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	hostRepo(t, ws)
	must(os.MkdirAll(filepath.Join(ws, ".hutch"), 0o777))
	for _, w := range []string{".git/hooks", ".git", ws + "/.git/hooks"} {
		must(os.WriteFile(filepath.Join(ws, ".hutch", "policy.toml"), []byte(fmt.Sprintf("version = 1\n[sandbox]\nwritable = [%q]\n", w)), 0o644))
		r := runCLI(t, ws, []string{"--policy-layers"}, "sh", "-c", plantHook(ws))
		// Refused as widening (a relative path the layers below do not
		// make writable) or by the git rule (one that lies in the
		// workspace, writable below, but in its git directory).
		if r.code != 125 || !strings.Contains(r.stderr, "git directory") && !strings.Contains(r.stderr, "may only narrow") {
			t.Errorf("a layer making %s writable: %s", w, r)
		}
		if hookPlanted(t, ws) {
			t.Fatalf("a layer making %s writable: a hook was planted, or the host's commit ran one", w)
		}
	}
}

// TestDataDirMasked: the CLI's data directory (its durable processes'
// logs and records, the grants database) is masked in every sandbox the
// CLI makes, not only in durable ones; judged by what a command could
// copy out of it.
func TestDataDirMasked(t *testing.T) {
	data := dir(t, "data-")
	const marker = "DURABLE-LOG-TOKEN-91ab"
	must(os.MkdirAll(filepath.Join(data, "p-1"), 0o755))
	must(os.WriteFile(filepath.Join(data, "p-1", "process.log"), []byte(marker+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(data, "grants.db"), []byte(marker+"\n"), 0o644))
	t.Setenv("HUTCH_DATA_DIR", data)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	got := filepath.Join(ws, "got")
	r := sh(t, ws, fmt.Sprintf("cat %[1]s/p-1/process.log %[1]s/grants.db > %[2]s 2>/dev/null; ls %[1]s >> %[2]s 2>/dev/null; true", data, got))
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	if b, _ := os.ReadFile(got); strings.Contains(string(b), marker) || strings.Contains(string(b), "p-1") {
		t.Errorf("a plain hutch run read the data directory: %q", b)
	}
	if r := runCLIArgs(t, "read", "--workspace", ws, filepath.Join(data, "p-1", "process.log")); r.code == 0 || strings.Contains(r.stdout, marker) {
		t.Errorf("hutch read of a durable process's log: %s", r)
	}
}

// TestPolicyFileNotBlindlyRead: a workspace policy layer that a command
// made a symlink to /dev/zero, or a FIFO, is refused at once, naming the
// file, with nothing read; so are a --policy and a policy check FILE that
// are not regular files, naming what the caller typed.
func TestPolicyFileNotBlindlyRead(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.MkdirAll(filepath.Join(ws, ".hutch"), 0o777))
	layer := filepath.Join(ws, ".hutch", "policy.toml")
	fifo := filepath.Join(dir(t, "fifo-"), "policy.toml")
	must(syscall.Mkfifo(fifo, 0o644))
	quick := func(name string, want []string, args ...string) {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, hutchBin, args...)
		out, err := c.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("%s: still running after 30s", name)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("%s: exit %v, want a refusal\n%s", name, err, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: %q does not say %q", name, out, w)
			}
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	must(os.Symlink("/dev/zero", layer))
	quick("a layer linked to /dev/zero", []string{layer, "symlink"}, "run", "--workspace", ws, "--policy-layers", "--", "true")
	os.Remove(layer)
	must(syscall.Mkfifo(layer, 0o644))
	quick("a layer that is a FIFO", []string{layer, "not a regular file"}, "run", "--workspace", ws, "--policy-layers", "--", "true")
	os.Remove(layer)
	quick("--policy that is a FIFO", []string{"--policy", fifo, "not a regular file"}, "run", "--workspace", ws, "--policy", fifo, "--", "true")
	quick("policy check of a FIFO", []string{fifo, "not a regular file"}, "policy", "check", fifo)
	big := filepath.Join(dir(t, "big-"), "policy.toml")
	must(os.WriteFile(big, []byte("version = 1\n"+strings.Repeat("# padding\n", 200000)), 0o644))
	quick("--policy of 2 MB", []string{"--policy", big, "bytes"}, "run", "--workspace", ws, "--policy", big, "--", "true")
}

// TestServeExitWithoutDataDir: a server whose default data directory
// cannot be made (durable processes and approvals off: their routes say
// why, 503 unavailable) stops on SIGTERM without a panic.
func TestServeExitWithoutDataDir(t *testing.T) {
	ws := dir(t, "ws-")
	sock := filepath.Join(dir(t, "serve-sock-"), "s", "hutch.sock")
	c := exec.Command(hutchBin, "serve", "--socket", sock, "--workspace", ws)
	c.Env = append(os.Environ(), "HOME=/proc/self/nonexistent", "HUTCH_DATA_DIR=", "XDG_STATE_HOME=")
	var stderr strings.Builder
	c.Stderr = &stderr
	must(c.Start())
	s := &served{cmd: c, sock: sock}
	if !waitFor(30*time.Second, func() bool { return s.health() == nil }) {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("hutch serve does not answer: %s", stderr.String())
	}
	var off struct {
		Error struct{ Code, Message string }
	}
	if code := s.call(t, "GET", "/v1/approvals/rules", "", &off); code != 503 || off.Error.Code != "unavailable" || !strings.Contains(off.Error.Message, "--grants-db") {
		t.Errorf("GET /v1/approvals/rules with no grants database: %d %+v", code, off)
	}
	c.Process.Signal(syscall.SIGTERM)
	err := c.Wait()
	if strings.Contains(stderr.String(), "panic") || err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Errorf("hutch serve's exit: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("hutch serve panicked on exit:\n%s", stderr.String())
	}
}

// TestRepositoriesByIdentity: a repository is known by what it is, not by
// its timestamps or its name: a directory older than the command renamed
// to .git is reported created; a bare repository the host keeps in the
// workspace is guarded like a .git (its hooks run when the host pushes to
// it); one the command makes is reported.
func TestRepositoriesByIdentity(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	must(os.MkdirAll(filepath.Join(ws, "olddir"), 0o777))
	bare := filepath.Join(ws, "remote.git")
	if out, err := hostGit(t, ws, "init", "-q", "--bare", bare); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // olddir is older than the command by a second
	r := sh(t, ws, fmt.Sprintf(`mv olddir .git && git init -q . && git config core.fsmonitor 'touch %[1]s/ran; false';
		printf '#!/bin/sh\ntouch %[1]s/ran\n' > remote.git/hooks/pre-receive 2>/dev/null; chmod +x remote.git/hooks/pre-receive 2>/dev/null;
		git init -q --bare made.git; true`, ws))
	if r.code != 0 || r.result == nil {
		t.Fatalf("%s", r)
	}
	want := []runtime.RepositoryChange{
		{Path: filepath.Join(ws, ".git"), Change: "created"},
		{Path: filepath.Join(ws, "made.git"), Change: "created"},
	}
	if !slices.Equal(r.result.Repositories, want) {
		t.Errorf("Repositories = %+v, want %+v", r.result.Repositories, want)
	}
	if _, err := os.Stat(filepath.Join(bare, "hooks", "pre-receive")); err == nil {
		t.Error("a command planted a hook in the host's bare repository")
	}
}

// TestHostGitRefusesLocalTransport: a repository a command made, with an
// ordinary-looking remote that a planted url.insteadOf rewrites to a
// bare repository the command also made, whose pre-receive hook marks
// that it ran: hutch git push refuses the local transport, and nothing
// planted runs on the host.
func TestHostGitRefusesLocalTransport(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	marker := filepath.Join(dir(t, "out-"), "ran")
	r := sh(t, ws, fmt.Sprintf(`git init -q --bare %[1]s/planted.git &&
		printf '#!/bin/sh\ntouch %[2]s\n' > %[1]s/planted.git/hooks/pre-receive && chmod +x %[1]s/planted.git/hooks/pre-receive &&
		git init -q %[1]s/repo && cd %[1]s/repo && %[3]s commit -q --allow-empty -m agent &&
		git remote add origin https://example.invalid/project.git &&
		git config url.%[1]s/planted.git.insteadOf https://example.invalid/project.git`, ws, marker, sandboxGit))
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	res := runCLIArgs(t, "git", "-C", filepath.Join(ws, "repo"), "--", "push", "-q", "origin", "HEAD:refs/heads/x")
	if res.code == 0 {
		t.Errorf("hutch git push to a local path behind insteadOf: %s", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted bare repository's pre-receive hook ran on the host")
	}
}

// TestInotifyShareCapped: a command that takes every inotify instance it
// can get leaves its host user some: the sandbox's user namespace caps
// its share (a quarter of the host user's limit), judged by the command's
// own inotify fds, counted from the host, and by the host's own
// inotify_init while the command holds them.
func TestInotifyShareCapped(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/user/max_inotify_instances")
	if err != nil {
		t.Skip(err)
	}
	var limit int
	fmt.Sscan(string(b), &limit)
	if limit < 8 || limit > 4096 {
		t.Skipf("a host limit of %d inotify instances", limit)
	}
	ws := dir(t, "ws-")
	arg := uniqueSleep()
	c := exec.Command(hutchBin, "run", "--workspace", ws, "--timeout", "5m", "--", "python3", "-c", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
os.execvp("sleep", ["sleep", "`+arg+`"])
`)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	must(c.Start())
	ended := make(chan struct{})
	go func() { c.Wait(); close(ended) }()
	defer func() { c.Process.Kill(); <-ended }()
	// A guard against a hang, not a timing: python3's start in a slow
	// guest (QEMU without KVM) beside another job took over 30 s.
	var pids []int
	if !waitFor(4*time.Minute, func() bool {
		select {
		case <-ended:
			return true
		default:
		}
		pids = procsWithArg(arg)
		return len(pids) == 1
	}) || len(pids) != 1 {
		c.Process.Kill()
		<-ended // out is read once nothing writes it
		t.Fatalf("the command never got to sleep:\n%s", out.String())
	}
	held := 0
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pids[0]))
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pids[0], e.Name())); l == "anon_inode:inotify" {
			held++
		}
	}
	if held == 0 || held > limit/4 {
		t.Errorf("the command holds %d inotify instances; its share is %d of the host user's %d", held, limit/4, limit)
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Errorf("host: inotify_init while the command holds %d instances: %v", held, err)
	} else {
		syscall.Close(fd)
	}
	t.Logf("the command holds %d inotify instances of the host user's %d", held, limit)
}

// TestAbstractSocketsHostNet: with the host's network (--net host), a
// command cannot reach an abstract unix socket the host listens on (X11,
// D-Bus and container shims listen there), whichever layer keeps it: the
// host's listener accepts nothing.
func TestAbstractSocketsHostNet(t *testing.T) {
	name := fmt.Sprintf("@hutch-abstract-%d-%d", os.Getpid(), time.Now().UnixNano())
	_, accepted := counting(t, "unix", name)
	ws := dir(t, "ws-")
	r := runCLI(t, ws, []string{"--net", "host"}, "python3", "-c", `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0`+name[1:]+`")
    print("connected")
except OSError as e:
    print("refused", e.errno)
`)
	time.Sleep(200 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's abstract socket accepted %d connections from a --net host command (%s)", n, r.stdout)
	}
	if r.code != 0 {
		t.Errorf("%s", r)
	}
}

// TestNodeModulesSeen: node_modules is a tree like any other. A .env
// the host keeps deep in it is masked, a repository in it (a package
// installed from git) is guarded, and one a command makes there is
// reported: through hutch run, and for a long-lived Sandbox's next
// command when the host makes them after New.
func TestNodeModulesSeen(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777))
	pkg := filepath.Join(ws, "node_modules", "@scope", "pkg")
	must(os.MkdirAll(filepath.Join(pkg, "lib"), 0o777))
	must(os.WriteFile(filepath.Join(pkg, "lib", ".env"), []byte("TOKEN="+freshSecret+"\n"), 0o644))
	dep := filepath.Join(ws, "node_modules", "from-git")
	hostRepo(t, dep)
	got := filepath.Join(ws, "got")
	hook := filepath.Join(dep, ".git", "hooks", "pre-commit")
	r := sh(t, ws, fmt.Sprintf(`cat %[1]s/lib/.env > %[2]s 2>/dev/null;
		printf '#!/bin/sh\ntouch /tmp/ran\n' > %[3]s 2>/dev/null;
		git init -q node_modules/made; true`, pkg, got, hook))
	if r.code != 0 || r.result == nil {
		t.Fatalf("%s", r)
	}
	if b, _ := os.ReadFile(got); strings.Contains(string(b), freshSecret) {
		t.Errorf("a command read node_modules/@scope/pkg/lib/.env: %q", b)
	}
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("a command planted %s", hook)
	}
	want := []runtime.RepositoryChange{{Path: filepath.Join(ws, "node_modules", "made", ".git"), Change: "created"}}
	if !slices.Equal(r.result.Repositories, want) {
		t.Errorf("Repositories = %+v, want %+v", r.result.Repositories, want)
	}

	// Made by the host after New, between two commands of one Sandbox.
	ws2 := dir(t, "ws-")
	must(os.Chmod(ws2, 0o777))
	must(os.MkdirAll(filepath.Join(ws2, "node_modules"), 0o777))
	sb := newSandbox(t, ws2)
	defer sb.Close()
	if err := sb.Command(context.Background(), "true").Run(); err != nil {
		t.Fatal(err)
	}
	late := filepath.Join(ws2, "node_modules", "late")
	must(os.MkdirAll(late, 0o777))
	must(os.WriteFile(filepath.Join(late, ".env"), []byte("TOKEN="+freshSecret+"\n"), 0o644))
	hostRepo(t, filepath.Join(late, "dep"))
	if _, err := sb.ReadFile(filepath.Join(late, ".env"), runtime.ReadOptions{}); !errors.Is(err, runtime.ErrDenied) {
		t.Errorf("ReadFile of node_modules/late/.env: %v, want ErrDenied", err)
	}
	got2, hook2 := filepath.Join(ws2, "got"), filepath.Join(late, "dep", ".git", "hooks", "pre-commit")
	script := fmt.Sprintf(`cat %s/.env > %s 2>/dev/null; printf '#!/bin/sh\n' > %s 2>/dev/null; true`, late, got2, hook2)
	if err := sb.Command(context.Background(), "sh", "-c", script).Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got2); strings.Contains(string(b), freshSecret) {
		t.Errorf("a Sandbox's later command read node_modules/late/.env: %q", b)
	}
	if _, err := os.Stat(hook2); err == nil {
		t.Errorf("a Sandbox's later command planted %s", hook2)
	}
}

// TestSystemTreesRefused: a system tree given as the workspace or a
// --write path (an unset variable away from a project directory) is
// refused, naming the flag and the override, before anything runs: as
// root the command would have written the host's /etc. Named in
// --allow-system-write, it is writable as asked.
func TestSystemTreesRefused(t *testing.T) {
	ws := dir(t, "ws-")
	mark := fmt.Sprintf("hutch-system-tree-%d", os.Getpid())
	for _, tree := range []string{"/etc", "/usr", "/var", "/bin"} {
		target := filepath.Join(tree, mark)
		t.Cleanup(func() { os.Remove(target) })
		for _, flags := range [][]string{{"--write", tree}, {"--workspace", tree}} {
			args := append([]string{"run"}, flags...)
			if flags[0] == "--write" {
				args = append(args, "--workspace", ws)
			}
			r := runCLIArgs(t, append(args, "--", "touch", target)...)
			if r.code != 125 || !strings.Contains(r.stderr, flags[0]+" "+tree) || !strings.Contains(r.stderr, "--allow-system-write") {
				t.Errorf("hutch %s: %s", strings.Join(args, " "), r)
			}
			if _, err := os.Stat(target); err == nil {
				t.Errorf("hutch %s wrote the host's %s", strings.Join(args, " "), target)
			}
		}
	}
	if os.Geteuid() != 0 {
		return // the kernel keeps an unprivileged user out of /etc anyway
	}
	target := filepath.Join("/etc", mark)
	r := runCLIArgs(t, "run", "--workspace", ws, "--write", "/etc", "--allow-system-write", "/etc", "--", "touch", target)
	if _, err := os.Stat(target); r.code != 0 || err != nil {
		t.Errorf("--allow-system-write /etc: %s; %s: %v", r, target, err)
	}
}
