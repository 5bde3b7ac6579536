//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

// ociCommand is hutch oci export: the OCI form of the policy run's flags
// make.
func ociCommand(code *int) *cobra.Command {
	c := &cobra.Command{Use: "oci", Short: "The OCI form of a policy (config.json for runc, crun, runsc)"}
	f := newRunFlags()
	var bundle, rootfs, jsonOut string
	export := &cobra.Command{
		Use:   "export --bundle DIR [flags] -- CMD ARGS...",
		Short: "Write the policy run's flags make as an OCI bundle running CMD",
		Long: `Write the policy run's flags make as an OCI bundle: DIR/config.json with
its namespaces, mounts, masked and read-only paths, seccomp profile, rlimits,
cgroup resources, no capabilities and no new privileges, and DIR/rootfs.

With the host's tree as the root (no --rootfs), DIR/rootfs must hold / bound
read-only when the runtime starts; hutch run --backend oci does that itself.
What the OCI form does not express of the policy is listed on stderr, one
line each (and with --unexpressed-json, as a JSON array).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "" {
				return errors.New("oci export: no command given (hutch oci export --bundle DIR [flags] -- CMD ARGS...)")
			}
			if bundle == "" {
				return &flagErr{"--bundle", "", "required: the directory to write the bundle to"}
			}
			p, err := policyFrom(f)
			if err != nil {
				return err
			}
			form, err := oci.Export(p, args, oci.Options{Rootfs: rootfs})
			if err != nil {
				return f.flagError(err)
			}
			if err := form.Write(bundle); err != nil {
				return err
			}
			for _, u := range form.Unexpressed {
				fmt.Fprintln(os.Stderr, "hutch: not in the OCI form:", u)
			}
			if jsonOut != "" {
				b, err := json.MarshalIndent(form.Unexpressed, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("--unexpressed-json %q: %w", jsonOut, err)
				}
			}
			return nil
		},
	}
	fl := export.Flags()
	fl.SetInterspersed(false)
	addRunFlags(fl, &f)
	fl.StringVar(&bundle, "bundle", "", "the bundle directory to write (config.json, rootfs)")
	fl.StringVar(&rootfs, "rootfs", "", "an image's root directory to run in (default: the host's tree, read-only, as hutch runs commands)")
	fl.StringVar(&jsonOut, "unexpressed-json", "", "also write what the OCI form does not express, as a JSON array of lines, to this file")
	c.AddCommand(export)
	return c
}

// runOCI runs args through the OCI runtime f.ociRuntime names, with the
// OCI form of p. Signals hutch gets go to the runtime, which passes them
// on: ctx's cancellation by them does not kill the runtime.
func runOCI(ctx context.Context, f runFlags, p runtime.Policy, args []string, killAfter time.Duration, code *int) (*runtime.Result, error) {
	if f.ociRuntime == "" {
		*code = exitNotFound
		return nil, &flagErr{"--backend", "oci", "needs --oci-runtime (one of " + fmt.Sprint(oci.Runtimes) + ")"}
	}
	path, err := oci.LookRuntime(f.ociRuntime)
	if errors.Is(err, runtime.ErrBackendUnavailable) {
		*code = exitNotFound
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	form, err := oci.Export(p, args, oci.Options{})
	if err != nil {
		return nil, f.flagError(err)
	}
	form.Grace = killAfter
	r, err := oci.Run(context.WithoutCancel(ctx), form, path, oci.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if errors.Is(err, runtime.ErrBackendUnavailable) {
		*code = exitNotFound
	}
	if err != nil {
		return r, err
	}
	*code = r.ExitCode
	fmt.Fprintf(os.Stderr, "hutch: backend oci (%s); not enforced: %s\n", f.ociRuntime, strings.Join(r.Unenforced, "; "))
	if r.Reason != "" {
		fmt.Fprintf(os.Stderr, "hutch: command killed: %s\n", r.Reason)
	}
	return r, nil
}
