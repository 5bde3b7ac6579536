//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func doctorCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what this host gives a sandbox (Linux only)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("doctor: only Linux has layers to probe; on macOS hutch runs commands under a Seatbelt profile (package darwin)")
		},
	}
}
