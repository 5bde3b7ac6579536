//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
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

// superviseIfAsked: no durable processes, no supervisors.
func superviseIfAsked() {}

// openProcesses: no durable processes here; hutch serve says so on
// their routes.
func openProcesses(string) (localapi.Processes, func(), error) {
	return nil, func() {}, nil
}

// reachProcess: no durable processes to reach here.
func reachProcess(v string) (runtime.Reach, error) {
	return runtime.Reach{}, &flagErr{"--reach", v, "durable processes need Linux"}
}
