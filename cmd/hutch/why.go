package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/runtime"
)

// whyCommand is hutch why: which rule of the policy run's flags make
// decides a path for a read, a write or an execution, from the decision alone
// (runtime.Check's Resolved: no Sandbox, no command, nothing tried).
func whyCommand(code *int) *cobra.Command {
	f := newRunFlags()
	var (
		access string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "why [run's flags] [--access write|execute] PATH",
		Short: "Say which rule decides a path for a read (or --access write, execute), and how to allow it",
		Long: `Say which rule of the policy run's flags make decides PATH (absolute, or
relative to the workspace; symlinks followed as a command would) for a read,
or with --access write a write (not --write, which is run's: a writable tree),
or with --access execute running it as a program: masked by the deny-list or a
deny name, kept read-only by a repository's git guard, outside the writable
trees, not in a listed view, the private /tmp, a writable tree. It prints the
verdict and the rule on one line, and on a second how the policy could allow
it (a flag, a policy file's key, a grant's tag) where one can; --json prints
it as the local API's /v1/explain answers. Nothing is run or tried: the
answer is the decision's (runtime.Check), the one the kernel enforces for
every command.

Exit status: 0 allowed, 1 refused, 125 a PATH or flag hutch cannot take.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := checkedFrom(f)
			if err != nil {
				return err
			}
			a, err := runtime.ParseAccess(access)
			if err != nil {
				return &flagErr{"--access", access, "not read, write or execute"}
			}
			x, err := r.Explain(args[0], a)
			if fe := (*runtime.FilePathError)(nil); errors.As(err, &fe) {
				return &flagErr{"PATH", fe.Path, fe.Reason}
			}
			if err != nil {
				return err
			}
			if !x.Allowed {
				*code = 1
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(x)
			}
			_, err = fmt.Println(x)
			return err
		},
	}
	addRunFlags(c.Flags(), &f)
	c.Flags().StringVar(&access, "access", string(runtime.AccessRead), "read, write (create, change, rename, remove) or execute (run it as a program)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON (runtime.Explanation)")
	return c
}
