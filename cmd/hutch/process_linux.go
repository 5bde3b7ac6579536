package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// processCommand is hutch process: durable processes through the CLI.
// Each subcommand opens the data directory's manager, acts, and prints
// JSON; the processes outlive it (see package processes).
func processCommand(code *int) *cobra.Command {
	var dataDir string
	proc := &cobra.Command{
		Use:   "process",
		Short: "Durable processes: sandboxed services that outlive hutch, restarted with backoff",
		Long: `Durable processes: sandboxed services (a dev server, a watcher, a bot) that
outlive the hutch command that started them. Each is kept by a supervisor
process of its own, which holds its sandbox for its whole life, writes its
log, and restarts it with backoff (2s, doubling, at most 60s). Records and
logs live in --data-dir/processes/<id>/. Every subcommand prints JSON.`,
	}
	proc.PersistentFlags().StringVar(&dataDir, "data-dir", "", "the directory of the records and logs (default $HUTCH_DATA_DIR, else $XDG_STATE_HOME/hutch, else ~/.local/state/hutch)")
	open := func() (*processes.Manager, error) {
		dir, err := processDataDir(dataDir)
		if err != nil {
			return nil, err
		}
		m, err := processes.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("--data-dir %s: %w", quote(dir), err)
		}
		m.Supervisor = selfSupervisor
		return m, nil
	}
	withManager := func(do func(context.Context, *processes.Manager) (any, error)) error {
		m, err := open()
		if err != nil {
			return err
		}
		defer m.Close()
		v, err := do(context.Background(), m)
		if err != nil {
			if errors.Is(err, processes.ErrNotFound) || errors.Is(err, processes.ErrActive) {
				*code = 1
			}
			return err
		}
		if v == nil {
			return nil
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}

	f := newRunFlags()
	var name, restart, restartDelay, maxRestartDelay, logMax string
	start := &cobra.Command{
		Use:   "start [flags] -- CMD ARGS...",
		Short: "Start a durable process in the sandbox run's flags describe (its record as JSON)",
		Long: `Start a durable process in the sandbox run's flags describe, and print its
record once it runs. --kill-after is its grace between SIGTERM and SIGKILL
on stop; --timeout, if given, ends each run. Its output goes to its log
(capped by --log-max-bytes and rotated once), so --output-limit and
--result-json do not apply.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "" {
				return errors.New("process start: no command given (hutch process start [flags] -- CMD ARGS...)")
			}
			for _, fl := range []string{"output-limit", "result-json"} {
				if cmd.Flags().Changed(fl) {
					return fmt.Errorf("--%s: not for a durable process: its output goes to its log (see --log-max-bytes)", fl)
				}
			}
			spec := processes.Spec{Name: name, Args: args, Restart: processes.Restart(restart)}
			p, err := policyFrom(f)
			if err != nil {
				return f.flagError(err)
			}
			spec.Policy = p
			if cmd.Flags().Changed("kill-after") {
				if spec.StopGrace, err = f.gracePeriod(); err != nil {
					return err
				}
			}
			for _, d := range []struct {
				flag, v string
				to      *time.Duration
			}{{"--restart-delay", restartDelay, &spec.RestartDelay}, {"--max-restart-delay", maxRestartDelay, &spec.MaxRestartDelay}} {
				if d.v == "" {
					continue
				}
				if *d.to, err = time.ParseDuration(strings.TrimSpace(d.v)); err != nil || *d.to <= 0 {
					return &flagErr{d.flag, d.v, "not a positive duration (2s, 500ms, 1m)"}
				}
			}
			if logMax != "" {
				n, err := units.ParseSize(logMax)
				if err != nil {
					return &flagErr{"--log-max-bytes", logMax, err.Error()}
				}
				spec.LogMaxBytes = n
			}
			return withManager(func(ctx context.Context, m *processes.Manager) (any, error) {
				got, err := m.Start(ctx, spec)
				return got, specFlagError(f, err, map[string][2]string{
					"Spec.Restart": {"--restart", restart}, "Spec.RestartDelay": {"--restart-delay", restartDelay},
					"Spec.MaxRestartDelay": {"--max-restart-delay", maxRestartDelay}, "Spec.LogMaxBytes": {"--log-max-bytes", logMax},
					"Spec.StopGrace": {"--kill-after", f.killAfter}, "Spec.Name": {"--name", name},
				})
			})
		},
	}
	fl := start.Flags()
	fl.SetInterspersed(false)
	addRunFlags(fl, &f)
	addPublishFlag(fl, &f)
	addDenialFlags(fl, &f)
	fl.StringVar(&name, "name", "", "a label for the process (it is known by its id)")
	fl.StringVar(&restart, "restart", string(processes.RestartAlways), "when it ends by itself: always, on-failure (exit status not 0) or never")
	fl.StringVar(&restartDelay, "restart-delay", "", "the first wait before a restart, doubled after each short run (default 2s)")
	fl.StringVar(&maxRestartDelay, "max-restart-delay", "", "the longest wait before a restart (default 60s)")
	fl.StringVar(&logMax, "log-max-bytes", "", "the size at which the log is rotated to process.log.1 (default 8MiB)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the durable processes (a JSON array of records)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return withManager(func(_ context.Context, m *processes.Manager) (any, error) {
				l, err := m.List()
				if l == nil {
					l = []processes.Process{}
				}
				return l, err
			})
		},
	}
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Print one durable process's record",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withManager(func(_ context.Context, m *processes.Manager) (any, error) {
				return m.Get(args[0])
			})
		},
	}
	stop := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a durable process: SIGTERM, SIGKILL after its grace; returns once it is gone (its record as JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withManager(func(ctx context.Context, m *processes.Manager) (any, error) {
				if err := m.Stop(ctx, args[0]); err != nil {
					return nil, err
				}
				return m.Get(args[0])
			})
		},
	}
	stopAll := &cobra.Command{
		Use:   "stop-all",
		Short: "Stop every durable process; returns once all are gone (the records as JSON)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return withManager(func(ctx context.Context, m *processes.Manager) (any, error) {
				if err := m.StopAll(ctx); err != nil {
					return nil, err
				}
				l, err := m.List()
				if l == nil {
					l = []processes.Process{}
				}
				return l, err
			})
		},
	}
	logs := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a durable process's log (its stdout and stderr, as written)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withManager(func(_ context.Context, m *processes.Manager) (any, error) {
				r, err := m.Log(args[0])
				if err != nil {
					return nil, err
				}
				defer r.Close()
				_, err = io.Copy(os.Stdout, r)
				return nil, err
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove the record and log of a durable process that does not run",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withManager(func(_ context.Context, m *processes.Manager) (any, error) {
				return nil, m.Remove(args[0])
			})
		},
	}
	proc.AddCommand(start, list, get, stop, stopAll, logs, rm)
	return proc
}

// specFlagError says a refused Spec field by its flag and the value typed
// (flags: field to flag and value), and a refused Policy field as run does.
func specFlagError(f runFlags, err error, flags map[string][2]string) error {
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) {
		return err
	}
	if fv, ok := flags[pe.Field]; ok {
		return &flagErr{fv[0], fv[1], pe.Reason}
	}
	return f.flagError(err)
}

// selfSupervisor is the supervisor program of hutch's managers: this
// binary, the very image running (a hutch upgraded in place since is
// another version, which might not read the Spec this one writes).
const selfSupervisor = "/proc/self/exe"

// superviseIfAsked runs this process as a durable process's supervisor
// if a Manager started it as one (processes.SupervisorMain).
func superviseIfAsked() { processes.SupervisorMain() }

// openProcesses opens dir's durable-process manager for hutch serve.
func openProcesses(dir string) (localapi.Processes, func(), error) {
	m, err := processes.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	m.Supervisor = selfSupervisor
	return m, func() { m.Close() }, nil
}

// reachProcess reads --reach ID:PORT: the Reach that makes 127.0.0.1:PORT
// in the command lead to the durable process ID's PORT, through the host
// port it publishes that port on (its record's published).
func reachProcess(v string) (runtime.Reach, error) {
	bad := func(why string) (runtime.Reach, error) { return runtime.Reach{}, &flagErr{"--reach", v, why} }
	id, portText, ok := strings.Cut(v, ":")
	port, err := strconv.Atoi(portText)
	if !ok || id == "" || err != nil {
		return bad("not ID:PORT (a durable process's id and a port it publishes)")
	}
	dir, err := processDataDir("")
	if err != nil {
		return runtime.Reach{}, err
	}
	m, err := processes.Open(dir)
	if err != nil {
		return bad(err.Error())
	}
	defer m.Close()
	p, err := m.Get(id)
	if err != nil {
		return bad(err.Error())
	}
	r, err := p.Reach(port)
	if err != nil {
		return bad(err.Error())
	}
	return r, nil
}
