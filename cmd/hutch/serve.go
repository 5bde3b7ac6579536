package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/internal/grantshelper"
	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
)

// serveCommand is hutch serve: the local API (package localapi) over one
// Sandbox that run's flags describe, on a unix socket.
func serveCommand() *cobra.Command {
	f := newRunFlags()
	var (
		socket    string
		allow     []string
		prewarm   int
		grantable []string
		dataDir   string
		rulesPath string
		grantsDB  string
	)
	c := &cobra.Command{
		Use:   "serve --socket PATH [run's flags] [--allow-uid N]...",
		Short: "Serve the local API (JSON over HTTP on a unix socket) for one sandbox policy",
		Long: `Serve the local API: plain JSON over HTTP/1.1 on a unix socket, for agents in
any language (see the README's "Local API"). The same flags as run make the
policy every request runs under. The socket is made mode 0600 in a directory
only its owner can enter (made 0700 when missing); a connection from another
uid than the server's, or one --allow-uid names, is closed unread. The
socket's directory and the data directory are hidden from every command
and may not lie in a tree a command can write.

A call may be granted more than the policy (its allowed_domains,
package_managers and grant fields) only within --grantable's ceiling.
Durable processes (/v1/processes) keep their records in --data-dir and
outlive the server: the next one over the same directory adopts them.
POST /v1/approvals/decide judges an agent's tool call as hutch grants
decide does, by --rules and the remembered grants of --grants-db, and GET
/v1/approvals/rules lists the rules; no route adds, revokes or lists
grants (consent must not be writable by the agent it judges: hutch grants
keeps them). The grants database is hidden from every command.
SIGHUP, or POST /v1/policy/reload, reads the policy again (--policy's file
included) and puts it in effect for the commands that start after it.
SIGINT and SIGTERM stop the server: running commands are stopped (SIGTERM,
then SIGKILL after --kill-after), the socket removed; durable processes run
on. If the server is killed outright, its commands' sandboxes die with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return errors.New("serve: --socket PATH is required")
			}
			if f.resultJSON != "" {
				return &flagErr{"--result-json", f.resultJSON, "not for serve: each exec's result ends its response"}
			}
			if prewarm < 0 {
				return &flagErr{"--prewarm", strconv.Itoa(prewarm), "negative"}
			}
			uids, err := parseUIDs(allow)
			if err != nil {
				return err
			}
			killAfter, err := f.gracePeriod()
			if err != nil {
				return err
			}
			ceiling, err := runtime.ParseGrant(grantable)
			if err != nil {
				return &flagErr{"--grantable", strings.Join(grantable, ","), strings.TrimPrefix(err.Error(), "hutch: ")}
			}
			dir, err := processDataDir(dataDir)
			if err != nil {
				return err
			}
			explicit := dataDir != "" || os.Getenv("HUTCH_DATA_DIR") != ""
			rules, err := approvalRules(rulesPath)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), serveConfig{flags: f, socket: socket, allowUIDs: uids, prewarm: prewarm, killAfter: killAfter, grantable: ceiling, dataDir: dir, dataDirGiven: explicit, rules: rules, grantsDB: grantsDB})
		},
	}
	fl := c.Flags()
	addRunFlags(fl, &f)
	addDenialFlags(fl, &f)
	fl.StringVar(&socket, "socket", "", "the unix socket to serve on")
	fl.Var(repeated{&allow}, "allow-uid", "a further uid whose connections are accepted (repeatable; the server's own always are)")
	fl.IntVar(&prewarm, "prewarm", 2, "sandbox inits kept built ahead of time, so that a command starts at once (0: none)")
	fl.Var(repeated{&grantable}, "grantable", "a permission a call may be granted beyond the policy: @network, domain:NAME (domain:* any), package-manager:NAME, write:/PATH, @host-network, @git-write (repeatable)")
	fl.StringVar(&rulesPath, "rules", "", rulesUsage+", for /v1/approvals (as hutch grants --rules)")
	fl.StringVar(&grantsDB, "grants-db", "", "the remembered grants /v1/approvals/decide reads, as hutch grants --db (default grants.db in $HUTCH_DATA_DIR, $XDG_STATE_HOME/hutch or ~/.local/state/hutch)")
	fl.StringVar(&dataDir, "data-dir", "", "the durable processes' records and logs, as hutch process's --data-dir (default $HUTCH_DATA_DIR, else $XDG_STATE_HOME/hutch, else ~/.local/state/hutch)")
	return c
}

// parseUIDs reads the --allow-uid values.
func parseUIDs(vs []string) ([]int, error) {
	var uids []int
	for _, v := range vs {
		// 4294967295 is (uid_t)-1, no uid at all.
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n == 1<<32-1 {
			return nil, &flagErr{"--allow-uid", v, "not a uid (a whole number from 0 to 4294967294)"}
		}
		uids = append(uids, int(n))
	}
	return uids, nil
}

// serveConfig is what hutch serve's flags say.
type serveConfig struct {
	flags     runFlags
	socket    string
	allowUIDs []int
	prewarm   int
	killAfter time.Duration
	grantable runtime.Grant
	dataDir   string
	// dataDirGiven: --data-dir or $HUTCH_DATA_DIR named it. A default
	// that cannot serve turns the durable processes off; a named one
	// that cannot is an error.
	dataDirGiven bool
	// rules are --rules' (DefaultRules without it); grantsDB is
	// --grants-db ("" for the default).
	rules    map[string]approvals.Rule
	grantsDB string
	// grants is the store opened over grantsDB, which every policy
	// hides from its commands.
	grants *approvals.Store
}

// policy is the policy the server's commands run under: run's flags (and
// --policy's file, read again on every call), with --grantable's ceiling
// added and the server's own directories hidden.
func (c serveConfig) policy() (base, p runtime.Policy, err error) {
	// Read again on every SIGHUP and reload: a file being written then
	// is never put in effect half-done.
	c.flags.stablePolicy = true
	base, err = policyFrom(c.flags)
	if err != nil {
		return base, base, c.flags.flagError(err)
	}
	p = base.Clone()
	p.Prewarm = c.prewarm
	g := &p.Grantable
	g.Network, g.HostNetwork, g.GitWrite = g.Network || c.grantable.Network, g.HostNetwork || c.grantable.HostNetwork, g.GitWrite || c.grantable.GitWrite
	g.Domains = append(g.Domains, c.grantable.Domains...)
	g.PackageManagers = append(g.PackageManagers, c.grantable.PackageManagers...)
	g.Writable = append(g.Writable, c.grantable.Writable...)
	// A command that reached the socket would be a client of the
	// server, with every grant of its ceiling: the socket's directory is
	// masked in every sandbox (a path socket is reachable across network
	// namespaces, and connect(2) needs no write access to the mount).
	// The data directory holds every durable process's log.
	p.Deny = append(p.Deny, filepath.Dir(c.socket), c.dataDir)
	if c.grants != nil {
		if err := c.protectGrants(&p); err != nil {
			return base, p, err
		}
	}
	return base, p, nil
}

// checkPrivate refuses a server directory (the socket's, flag --socket,
// or the data directory) that lies in a tree the commands can write, or
// holds one: a command could replace the socket with its own and answer
// the agent in the server's name, or rewrite a durable process's record.
func checkPrivate(sb *runtime.Sandbox, flag, dir string) error {
	r := sb.Policy()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir // not made yet
	}
	for _, tree := range append([]string{r.Workspace, r.Home}, r.Writable...) {
		if tree != "" && (mounts.Within(real, tree) || mounts.Within(tree, real)) {
			return &flagErr{flag, dir, fmt.Sprintf("the server's own directory must lie apart from what its commands can write, and %s is writable in the sandbox", tree)}
		}
	}
	return nil
}

// openProcesses opens the durable processes' manager over c.dataDir, or
// says why there is none: a default directory that cannot serve turns
// them off (the reason is logged and answered on their routes).
func (c serveConfig) openProcesses(sb *runtime.Sandbox) (localapi.Processes, func(), string, error) {
	err := checkPrivate(sb, "--data-dir", c.dataDir)
	var procs localapi.Processes
	closeProcs := func() {}
	if err == nil {
		var closeOpened func()
		procs, closeOpened, err = openProcesses(c.dataDir)
		if err != nil {
			err = &flagErr{"--data-dir", c.dataDir, err.Error()}
		} else if closeOpened != nil {
			closeProcs = closeOpened // never nil: the caller defers it
		}
	}
	switch {
	case err == nil && procs == nil:
		return nil, closeProcs, "durable processes need Linux", nil
	case err == nil:
		return procs, closeProcs, "", nil
	case c.dataDirGiven:
		return nil, nil, "", err
	}
	why := "durable processes are off: " + err.Error() + "; name a data directory with --data-dir"
	slog.Warn("hutch serve: " + why)
	return nil, closeProcs, why, nil
}

// protectGrants hides the grants database from p's commands, and refuses
// a p that would let them write it.
func (c serveConfig) protectGrants(p *runtime.Policy) error {
	err := c.grants.Protect(p)
	var pe *runtime.PolicyError
	switch {
	case errors.As(err, &pe):
		// Said as the flag's fault, naming the tree, not a Go field.
		return &flagErr{"--grants-db", c.grants.Path(), fmt.Sprintf("%s (%s is writable in the sandbox)", pe.Reason, pe.Value)}
	case err != nil:
		return &flagErr{"--grants-db", c.grants.Path(), err.Error()}
	}
	return nil
}

// openApprovals opens the grants database of --grants-db into c.grants
// and hides it from p's commands, or says why there is none: as for the
// durable processes, a default that cannot serve (none can be made, or it
// lies where the commands write) turns the approvals routes off, and a
// named one that cannot is an error.
func (c *serveConfig) openApprovals(p *runtime.Policy) (string, error) {
	s, err := openGrants("--grants-db", c.grantsDB, grantshelper.OpenIdle)
	if err == nil {
		c.grants = s
		if err = c.protectGrants(p); err != nil {
			s.Close()
			c.grants = nil
		}
	}
	switch {
	case err == nil:
		return "", nil
	case c.grantsDB != "":
		return "", err
	}
	why := "the approvals routes are off: " + err.Error() + "; name a grants database with --grants-db"
	slog.Warn("hutch serve: " + why)
	return why, nil
}

// approvals is the engine of the approvals routes, nil when they are off.
func (c serveConfig) approvals() *approvals.Engine {
	if c.grants == nil {
		return nil
	}
	return &approvals.Engine{Rules: c.rules, Store: c.grants}
}

func serve(ctx context.Context, c serveConfig) error {
	var err error
	if c.socket, err = filepath.Abs(c.socket); err != nil {
		return &flagErr{"--socket", c.socket, err.Error()}
	}
	// Listen first: it makes the socket's directory, which the policy
	// masks.
	ln, err := localapi.Listen(c.socket, c.allowUIDs, slog.Default())
	if err != nil {
		return &flagErr{"--socket", c.socket, strings.TrimPrefix(err.Error(), "hutch: ")}
	}
	defer ln.Close()
	base, p, err := c.policy()
	if err != nil {
		return err
	}
	approvalsOff, err := c.openApprovals(&p)
	if err != nil {
		return err
	}
	if c.grants != nil {
		// Open for the server's life: every decide reads the grants as
		// they are then.
		defer c.grants.Close()
	}
	// The flags' policy, as GET /v1/policy answers it (hutch run with
	// HUTCH_SOCKET compares its own with it); Reload replaces it.
	var given atomic.Pointer[runtime.Policy]
	given.Store(&base)
	sb, err := runtime.New(p)
	if pe := (*runtime.PolicyError)(nil); errors.As(err, &pe) && pe.Field == "Prewarm" {
		return &flagErr{"--prewarm", pe.Value, pe.Reason} // serve's own flag, not run's
	}
	if err != nil {
		return c.flags.flagError(err)
	}
	defer sb.Close()
	if err := checkPrivate(sb, "--socket", filepath.Dir(c.socket)); err != nil {
		return err
	}
	procs, closeProcs, procsOff, err := c.openProcesses(sb)
	if err != nil {
		return err
	}
	defer closeProcs()
	reload := func() error {
		base, p, err := c.policy()
		if err != nil {
			// The flags are as they were when the server started: what
			// fails now is the --policy file, the caller's own value.
			return &localapi.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: strings.TrimPrefix(err.Error(), "hutch: ")}
		}
		err = sb.Reload(p)
		if err == nil {
			given.Store(&base)
		}
		return err
	}
	// Every request's context derives from reqBase: a stop cancels the
	// commands still running, which then end as a timeout does.
	reqBase, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	srv := &http.Server{
		Handler: localapi.NewHandler(sb, localapi.Options{Version: version(), WaitDelay: c.killAfter, Processes: procs, ProcessesOff: procsOff, Reload: reload,
			Policy:    func() runtime.Policy { return given.Load().Clone() },
			Approvals: c.approvals(), ApprovalsOff: approvalsOff}),
		BaseContext:       func(_ net.Listener) context.Context { return reqBase },
		ReadHeaderTimeout: 10 * time.Second,
		// A kept-alive connection with no request for this long is
		// closed (bodies have localapi.BodyTimeout; a streamed stdin,
		// the command's life).
		IdleTimeout: 5 * time.Minute,
		ErrorLog:    slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() {
		<-sigCtx.Done()
		stopAll()
		// The commands get their grace, and their responses the time to
		// carry the results; then whatever is left is cut.
		sctx, cancel := context.WithTimeout(context.Background(), c.killAfter+5*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if err != nil {
			srv.Close()
		}
		done <- err
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer func() { signal.Stop(hup); close(hup) }()
	go func() {
		for range hup {
			if err := reload(); err != nil {
				slog.Error("hutch serve: the policy was not reloaded; the one in effect stays", "err", err)
			} else {
				slog.Info("hutch serve: policy reloaded")
			}
		}
	}()
	fmt.Fprintf(os.Stderr, "hutch: serving the local API (v%d) on %s\n", localapi.ProtocolVersion, c.socket)
	if err := srv.Serve(localapi.LimitConnections(ln, localapi.MaxConnections)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}
