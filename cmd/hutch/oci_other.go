//go:build !linux

package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/runtime"
)

// ociCommand: an OCI runtime runs Linux containers; elsewhere the command
// says so.
func ociCommand(*int) *cobra.Command {
	return &cobra.Command{
		Use:                "oci",
		Short:              "The OCI form of a policy (Linux only)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("oci: OCI runtimes run Linux containers; this is not Linux")
		},
	}
}

// runOCI: the oci backend is Linux's.
func runOCI(_ context.Context, _ runFlags, _ runtime.Policy, _ []string, _ time.Duration, code *int) (*runtime.Result, error) {
	*code = exitNotFound
	return nil, &runtime.BackendError{Backend: runtime.BackendOCI, Reason: "OCI runtimes run Linux containers; this is not Linux"}
}
