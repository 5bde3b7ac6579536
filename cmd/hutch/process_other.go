//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// processCommand: durable processes need Linux (pidfds, the supervisor's
// sandbox); elsewhere the command says so.
func processCommand(*int) *cobra.Command {
	return &cobra.Command{
		Use:                "process",
		Short:              "Durable processes (Linux only)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("process: durable processes need Linux")
		},
	}
}
