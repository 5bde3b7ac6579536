//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hutchOutput runs hutch with args and returns its exit status and what it
// and git wrote to standard output and standard error.
func hutchOutput(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	files := make([]*os.File, 2)
	for i := range files {
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = files[0], files[1]
	code = execute(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	out, _ := os.ReadFile(files[0].Name())
	errOut, _ := os.ReadFile(files[1].Name())
	return code, string(out), string(errOut)
}

// plantedRepo returns a repository whose core.fsmonitor is a program that
// creates marker, which plain git status runs.
func plantedRepo(t *testing.T) (repo, marker string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git:", err)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	repo, dir := t.TempDir(), t.TempDir()
	marker, prog := filepath.Join(dir, "marker"), filepath.Join(dir, "fsmonitor")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"config", "core.fsmonitor", prog}, {"status"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.Remove(marker); err != nil {
		t.Fatalf("plain git status did not run the planted fsmonitor: %v", err)
	}
	return repo, marker
}

func TestGitRunsNothingPlanted(t *testing.T) {
	repo, marker := plantedRepo(t)
	code, stdout, stderr := hutchOutput(t, "git", "-C", repo, "status")
	if code != 0 || !strings.Contains(stdout, "No commits yet") {
		t.Errorf("hutch git -C %s status: exit %d\n%s%s", repo, code, stdout, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("hutch git status ran the planted fsmonitor")
	}
}

func TestGitExitStatus(t *testing.T) {
	repo, _ := plantedRepo(t)
	tests := []struct {
		args       []string
		want       int
		wantStderr string
	}{
		{args: []string{"git", "-C", repo, "--", "rev-parse", "--verify", "-q", "HEAD"}, want: 1},
		{args: []string{"git", "-C", repo, "--", "log"}, want: 128, wantStderr: "does not have any commits"},
		// git killed by SIGKILL, by an alias of the caller's own -c.
		{args: []string{"git", "-C", repo, "--", "-c", "alias.die=!kill -KILL $PPID", "die"}, want: 128 + 9},
		{args: []string{"git", "-C", "/nonexistent/hutch", "--", "status"}, want: exitHutchFailed, wantStderr: "/nonexistent/hutch"},
		{args: []string{"git", "-C", filepath.Join(repo, ".git", "config"), "status"}, want: exitHutchFailed, wantStderr: "config: not a directory"},
	}
	for _, tt := range tests {
		code, _, stderr := hutchOutput(t, tt.args...)
		if code != tt.want || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("hutch %s: exit %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), code, stderr, tt.want, tt.wantStderr)
		}
	}
}

// TestGitFlagsStopAtGitsArguments: git's own flags after its first
// argument are git's.
func TestGitFlagsStopAtGitsArguments(t *testing.T) {
	var code int
	c := gitCommand(&code)
	if err := c.Flags().Parse([]string{"-C", "ws", "log", "-C", "-p"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Flags().Args(); strings.Join(got, " ") != "log -C -p" {
		t.Errorf("git args %q", got)
	}
	if dir, _ := c.Flags().GetString("dir"); dir != "ws" {
		t.Errorf("-C = %q", dir)
	}
}
