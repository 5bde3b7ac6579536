package main

import (
	"fmt"
	"os"
	"path/filepath"
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
