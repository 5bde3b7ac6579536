package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hutchbox/hutch/mounts"
)

// processDataDir is --data-dir, or its default.
func processDataDir(flag string) (string, error) {
	switch {
	case flag != "":
		return filepath.Abs(flag)
	case os.Getenv("HUTCH_DATA_DIR") != "":
		return filepath.Abs(os.Getenv("HUTCH_DATA_DIR"))
	case os.Getenv("XDG_STATE_HOME") != "":
		return filepath.Join(os.Getenv("XDG_STATE_HOME"), "hutch"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data-dir, HUTCH_DATA_DIR or XDG_STATE_HOME, and no home: %w", err)
	}
	return filepath.Join(home, ".local", "state", "hutch"), nil
}

// dataDirDeny is what every sandbox of this CLI masks of the data
// directory $HUTCH_DATA_DIR, $XDG_STATE_HOME or the home names (the
// durable processes' records and logs, the grants database, other agents'
// worktrees): the directory itself, or, when the workspace ws lies in it
// (a worktree of --worktree), each entry on the way but the one holding
// the workspace, as they are now. A server or durable process with a
// --data-dir of its own masks that one too. Nothing when there is no
// data directory.
func dataDirDeny(ws string) []string {
	dir, err := processDataDir("")
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if realWS, err := filepath.EvalSymlinks(ws); err == nil {
		ws = realWS
	}
	if !mounts.Within(ws, dir) {
		return []string{dir}
	}
	var out []string
	for d := dir; d != ws; {
		ents, err := os.ReadDir(d)
		if err != nil {
			return out
		}
		next := ""
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			if mounts.Within(ws, p) {
				next = p
			} else {
				out = append(out, p)
			}
		}
		if next == "" || slices.Contains(out, next) {
			return out
		}
		d = next
	}
	return out
}
