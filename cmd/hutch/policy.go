package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/policyfile"
	"github.com/hutchbox/hutch/runtime"
)

// policyCommand is hutch policy: the policy files' default, their check,
// and the policy a command line resolves to.
func policyCommand(code *int) *cobra.Command {
	pol := &cobra.Command{
		Use:   "policy",
		Short: "Policy files: the default, a check, the resolved policy",
	}
	def := &cobra.Command{
		Use:   "default",
		Short: "Print the default policy file (every key, with what it does)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := os.Stdout.Write(policyfile.DefaultTOML())
			return err
		},
	}
	var profile string
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a policy file (with --profile, that profile too): errors name the file, line and key",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			// The file is checked against a scratch workspace: what it
			// says does not depend on where it will be used.
			ws, err := os.MkdirTemp("", "hutch-policy-check-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(ws)
			f := newRunFlags()
			f.policyFile, f.profile, f.workspace = args[0], profile, ws
			if err := resolvedPolicy(f, func(runtime.Policy) error { return nil }); err != nil {
				*code = 1
				return err
			}
			fmt.Printf("%s: ok\n", args[0])
			return nil
		},
	}
	check.Flags().StringVar(&profile, "profile", "", "also check the [profiles.NAME] table, applied on top")
	sf := newRunFlags()
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [run's flags]",
		Short: "Print the policy run's flags (--policy, --profile and the rest) resolve to, as a policy file",
		Long: `Print the policy run's flags (--policy, --profile and the rest) resolve to, as a
policy file; with --json, the whole decision as JSON (runtime.Resolved: a
"format" version, the policy, the isolation level, the writable trees),
which a durable process's supervisor also runs.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if asJSON {
				r, err := checkedFrom(sf)
				if err != nil {
					return err
				}
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			return resolvedPolicy(sf, func(p runtime.Policy) error {
				b, err := policyfile.Format(p)
				if err == nil {
					_, err = os.Stdout.Write(b)
				}
				return err
			})
		},
	}
	addRunFlags(show.Flags(), &sf)
	show.Flags().BoolVar(&asJSON, "json", false, "print the whole decision as JSON instead of a policy file")
	pol.AddCommand(def, check, show)
	return pol
}

// resolvedPolicy decides what run would for f (runtime.Check: no Sandbox
// is made) and gives do the resolved policy (paths resolved, defaults
// filled in).
func resolvedPolicy(f runFlags, do func(runtime.Policy) error) error {
	r, err := checkedFrom(f)
	if err != nil {
		return err
	}
	return do(r.Policy())
}
