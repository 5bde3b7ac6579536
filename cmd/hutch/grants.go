package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/internal/grantshelper"
)

// grantsCommand is hutch grants: the approval decisions and remembered
// grants of package approvals, for agents that are not written in Go.
// decide prints the verdict on a call (prompt: ask the user, then add a
// grant if they said to remember), by the default rules or a --rules
// file's; rules prints those rules; add, list and revoke keep the
// grants.
func grantsCommand(code *int) *cobra.Command {
	var dbPath string
	g := &cobra.Command{
		Use:   "grants",
		Short: "Decisions on tool calls and remembered approvals (a consent layer, not a boundary)",
	}
	g.PersistentFlags().StringVar(&dbPath, "db", "", "the grants database (default grants.db in $HUTCH_DATA_DIR, $XDG_STATE_HOME/hutch or ~/.local/state/hutch)")
	withStore := func(do func(*approvals.Store) (any, error)) error {
		s, err := openGrants("--db", dbPath, grantshelper.Open)
		if err != nil {
			return err
		}
		defer s.Close()
		v, err := do(s)
		if err != nil {
			if errors.Is(err, approvals.ErrNoGrant) {
				*code = 1
			}
			return err
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var call approvals.Call
	callFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&call.Agent, "agent", "", "the calling agent")
		c.Flags().StringVar(&call.Tool, "tool", "", "the tool (read, read_file, glob, grep, ls, write, write_file, edit, edit_file, spawn_agent; bash, sh, shell, exec, process_start, run_command, whose --arg is judged command by command; or another: `hutch grants rules` lists them)")
		c.Flags().StringVar(&call.Workspace, "workspace", "", "the workspace the call acts in")
	}
	var rulesPath string
	loadRules := func() (map[string]approvals.Rule, error) { return approvalRules(rulesPath) }
	decide := &cobra.Command{
		Use:   "decide --tool T [--agent A] [--workspace W] [--rules FILE] --arg ARG",
		Short: "Print the verdict on a call: allow, deny, or prompt (ask, then `grants add` to remember)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if call.Tool == "" {
				return errors.New("decide: --tool is required")
			}
			rules, err := loadRules()
			if err != nil {
				return err
			}
			return withStore(func(s *approvals.Store) (any, error) {
				// No hook: a prompt is the caller's to put to the user.
				e := approvals.Engine{Rules: rules, Store: s}
				return e.Lookup(call)
			})
		},
	}
	callFlags(decide)
	decide.Flags().StringVar(&call.Arg, "arg", "", "the call's argument: a command line, a path")
	decide.Flags().StringVar(&rulesPath, "rules", "", rulesUsage)
	var rulesJSON bool
	rulesCmd := &cobra.Command{
		Use:   "rules [--rules FILE] [--json]",
		Short: "Print the tools' rules in effect (tool, decision, danger, shell), sorted; a tool not listed is prompted at high danger",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rules, err := loadRules()
			if err != nil {
				return err
			}
			rows := approvals.RuleRows(rules)
			if rulesJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "TOOL\tDECISION\tDANGER\tSHELL")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", quote(r.Tool), r.Decision, r.Danger, r.Shell)
			}
			return w.Flush()
		},
	}
	rulesCmd.Flags().StringVar(&rulesPath, "rules", "", rulesUsage)
	rulesCmd.Flags().BoolVar(&rulesJSON, "json", false, "print a JSON array of {tool, decision, danger, shell}")
	var pattern, forDur, decision string
	add := &cobra.Command{
		Use:   "add --tool T [--agent A] [--workspace W] --pattern P [--for 24h] [--deny]",
		Short: "Remember an approval (or, with --decision deny, a refusal) for the calls matching it",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if call.Tool == "" || pattern == "" {
				return errors.New("add: --tool and --pattern are required")
			}
			gr := approvals.Grant{Agent: call.Agent, Tool: call.Tool, Workspace: call.Workspace, Pattern: pattern, Decision: approvals.Decision(decision), Created: time.Now()}
			if gr.Decision != approvals.Allow && gr.Decision != approvals.Deny {
				return &flagErr{"--decision", decision, "not allow or deny"}
			}
			if forDur != "" {
				d, err := time.ParseDuration(forDur)
				if err != nil || d <= 0 {
					return &flagErr{"--for", forDur, "not a positive duration (1h, 30m)"}
				}
				gr.Expires = gr.Created.Add(d)
			}
			return withStore(func(s *approvals.Store) (any, error) {
				id, err := s.Add(gr)
				gr.ID = id
				return gr, err
			})
		},
	}
	callFlags(add)
	add.Flags().StringVar(&pattern, "pattern", "", "the arguments it covers: * matches anything, \\* a star")
	add.Flags().StringVar(&forDur, "for", "", "how long it holds (default: until revoked)")
	add.Flags().StringVar(&decision, "decision", string(approvals.Allow), "allow or deny")
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the remembered grants (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return withStore(func(s *approvals.Store) (any, error) {
				gs, err := s.List(time.Now(), all)
				if gs == nil {
					gs = []approvals.Grant{}
				}
				return gs, err
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "also the expired and revoked ones")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a remembered grant: the calls it decided are prompted again",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return &flagErr{"ID", args[0], "not a grant id"}
			}
			return withStore(func(s *approvals.Store) (any, error) {
				return map[string]int64{"revoked": id}, s.Revoke(id, time.Now())
			})
		},
	}
	g.AddCommand(decide, rulesCmd, add, list, revoke)
	return g
}

// rulesUsage is --rules' help, in hutch grants and hutch serve.
const rulesUsage = "a TOML file of [tools.NAME] tables (decision, danger, shell) over the default rules"

// approvalRules are the rules of --rules path: DefaultRules when path is
// "", the file's over them otherwise.
func approvalRules(path string) (map[string]approvals.Rule, error) {
	if path == "" {
		return approvals.DefaultRules(), nil
	}
	rules, err := approvals.LoadRules(path)
	if err != nil {
		// LoadRules's errors name the file (and the line, tool, field).
		return nil, fmt.Errorf("--rules: %w", err)
	}
	return rules, nil
}

// openGrants opens the grants database at path, flag's value, or at
// grants.db in the data directory when path is "" (hutch grants' --db and
// hutch serve's --grants-db have the same default); errors name flag.
// open is grantshelper.Open, or OpenIdle for a server that may never ask.
func openGrants(flag, path string, open func(string) (*approvals.Store, error)) (*approvals.Store, error) {
	if path == "" {
		dir, err := processDataDir("")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "grants.db")
	}
	s, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, quote(path), err)
	}
	return s, nil
}
