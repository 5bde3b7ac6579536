package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/hostgit"
)

func gitCommand(code *int) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "git [-C DIR] -- ARGS...",
		Short: "Run the host's git in a workspace with nothing a sandboxed command planted in its repository able to run",
		Long: `Run the host's git in DIR (default: the current directory) with ARGS.

Plain git in a workspace a sandboxed command wrote to runs whatever that
command planted in the repository: hooks, core.fsmonitor, filters, diff
drivers, pagers, aliases, credential helpers, and the same in submodules.
hutch git overrides every setting of the repository's own configuration
except a few that only describe data, and turns off hooks, fsmonitor and
recursion into submodules (see hostgit.Command). Settings no override can
disable (remote.<name>.uploadpack, core.worktree, ...) make it refuse to run.

The exit status is git's (128+N when signal N ended it); 125 means hutch
itself failed. Put -- before ARGS that begin with a flag.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGit(cmd.Context(), dir, args, code)
		},
	}
	fl := c.Flags()
	// Everything after the first argument is git's: hutch git log -p.
	fl.SetInterspersed(false)
	fl.StringVarP(&dir, "dir", "C", ".", "the directory to run git in")
	return c
}

// runGit runs git through hostgit.Command on hutch's own standard
// streams and sets code to git's exit status.
func runGit(ctx context.Context, dir string, args []string, code *int) error {
	// hostgit.Command keeps its copy of the repository's configuration in the
	// temporary directory until ctx is done, and removes it on its own
	// time; this process may be gone by then, so it removes its copies
	// itself once git has ended.
	defer removeGitCopies()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, err := hostgit.Command(ctx, dir, args...)
	if err != nil {
		*code = exitHutchFailed
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// git gets a terminal's interrupt itself; one sent to hutch alone is
	// passed on, so that git, not hutch, decides how to stop (and removes
	// its lock files).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer func() {
		signal.Stop(sigs)
		close(sigs)
	}()
	if err := cmd.Start(); err != nil {
		*code = exitHutchFailed
		return err
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		*code = exitHutchFailed
		return err
	}
	*code = processStatus(cmd.ProcessState)
	return nil
}

// processStatus is a finished process's exit status as a shell reports
// it: 128+N for signal N.
func processStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// removeGitCopies removes the copies of repositories' configurations
// hostgit.Command made for this process (hutch-git-PID-* in the
// temporary directory).
func removeGitCopies() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("hutch-git-%d-*", os.Getpid())))
	for _, m := range matches {
		os.RemoveAll(m)
	}
}
