// Command hutch runs commands in a hutch sandbox.
//
//	hutch run --workspace DIR [flags] -- CMD ARGS...
//
// It runs with an embedded default policy (runtime.DefaultPolicy): the
// workspace writable, the rest of the host read-only, secrets masked, no
// network, no capabilities. Its exit status mirrors the command's (128+N
// when signal N ended it); 125 means hutch itself failed, 126 that the
// command could not be executed, 127 that it was not found. SIGINT,
// SIGTERM, SIGHUP and SIGQUIT are passed on to the command, which is
// SIGKILLed with its sandbox if it still runs --kill-after later.
//
//	hutch git [-C DIR] -- ARGS...
//
// runs the host's git in a workspace a sandboxed command wrote to, with
// nothing that command planted in the repository able to run
// (hostgit.Command); its exit status is git's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hutchbox/hutch/hostgit"
	"github.com/hutchbox/hutch/images"
	"github.com/hutchbox/hutch/internal/imagehelper"
	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/leaks"
	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/policyfile"
	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// Exit codes of hutch itself, as chroot/env/docker use them.
const (
	exitHutchFailed = 125
	exitCannotExec  = 126
	exitNotFound    = 127
)

func main() {
	superviseIfAsked() // before anything else: it exits if it runs
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int {
	code := 0
	root := &cobra.Command{
		Use:           "hutch",
		Short:         "Run commands in a kernel-enforced sandbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	debug := root.PersistentFlags().Bool("debug", false, "log hutch's own steps on stderr (as HUTCH_LOG=debug; HUTCH_LOG takes debug, info, warn or error, default warn)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return setLogger(*debug) }
	root.AddCommand(runCommand(&code), demoCommand(&code), seccompCommand(), doctorCommand(), gitCommand(&code))
	root.AddCommand(fileCommands(&code)...)
	root.AddCommand(processCommand(&code), policyCommand(&code), whyCommand(&code), grantsCommand(&code), ociCommand(&code), serveCommand())
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hutch:", strings.TrimPrefix(err.Error(), "hutch: "))
		if code == 0 {
			code = exitHutchFailed
		}
	}
	return code
}

type runFlags struct {
	// stablePolicy reads --policy only once it reads the same twice a
	// moment apart (a server's reload: never a file half written).
	stablePolicy bool
	workspace    string
	// worktree is run's --worktree REPO[:BRANCH].
	worktree    string
	write, deny []string
	reads       string
	read        []string
	rootfs      string
	image       string
	// hasImage: the flag set holds run's --image (oci export's is its
	// Pod's).
	hasImage    bool
	binds       []string
	denyNames   []string
	noDefDeny   bool
	gitWrite    bool
	nested      bool
	verbose     bool
	allowSystem []string
	env         []string
	resultJSON  string
	seccomp     string
	// The limits, as typed: parsed by policyFrom, quoted back in errors.
	timeout     string
	killAfter   string
	outputLimit string
	memory      string
	pids        string
	cpus        string
	tmpSize     string
	minLevel    string
	backend     string
	// ociRuntime is run's --oci-runtime, for --backend oci.
	ociRuntime  string
	leaks       string
	denials     string // --denials and --explain, of run and process start (addDenialFlags)
	explain     bool
	network     string
	allowDomain []string
	packageMgrs []string
	allowLocal  []string
	publish     []string
	reach       []string
	home        string
	readOnly    []string
	appsDir     string
	app         string
	policyFile  string
	profile     string
	unsandboxed bool
	// policyLayers: read the system's, the user's and the project's
	// policy files (policyfile.Discover).
	policyLayers bool
	// fs is the flag set the flags were parsed into (nil in tests that
	// fill runFlags themselves); layer what policyFrom read from
	// --policy, to name a file's line in errors.
	fs    *pflag.FlagSet
	layer *fileLayer
}

// fileLayer is the policy file behind a command line, and the policy it
// gave before the flags were added.
type fileLayer struct {
	file *policyfile.File
	base runtime.Policy
}

// given says whether flag name was given on the command line (v, its
// value, when the flags were not parsed from one).
func (f runFlags) given(name, v string) bool {
	if f.fs == nil {
		return v != ""
	}
	return f.fs.Changed(name)
}

func runCommand(code *int) *cobra.Command {
	f := newRunFlags()
	c := &cobra.Command{
		Use:   "run [flags] -- CMD ARGS...",
		Short: "Run a command in the sandbox with the default policy",
		Long: `Run a command in the sandbox with the default policy.

Every limit (--timeout, --output-limit, --memory, --pids, --cpus, --tmp-size)
takes 0 to mean none. Sizes are bytes or a number with a unit: 512M, 1.5GiB,
1Gi, 512mb; K, M, G, T and P are powers of 1024, as memory limits count.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("run: no command given (hutch run [flags] -- CMD ARGS...)")
			}
			if args[0] == "" {
				return errors.New(`run: the command is "" (hutch run [flags] -- CMD ARGS...)`)
			}
			return run(cmd.Context(), f, args, code)
		},
	}
	fl := c.Flags()
	// Everything after the command is the command's: `hutch run ls -la`
	// works as well as `hutch run -- ls -la`.
	fl.SetInterspersed(false)
	addRunFlags(fl, &f)
	addPublishFlag(fl, &f)
	addDenialFlags(fl, &f)
	fl.Var(repeated{&f.reach}, "reach", "ID:PORT: the command's 127.0.0.1:PORT leads to the durable process ID's port PORT, which it publishes (hutch process start --publish 0:PORT); nothing else of the network opens (repeatable)")
	fl.BoolVar(&f.verbose, "verbose", false, "also say on stderr what the host did not enforce that is the same for every run (limits kept by rlimits for want of cgroups; the shared network of --net host); --result-json always holds it")
	fl.StringVar(&f.ociRuntime, "oci-runtime", "", "with --backend oci: the installed OCI runtime to run the command through: "+strings.Join(oci.Runtimes, ", "))
	fl.StringVar(&f.worktree, "worktree", "", "REPO[:BRANCH]: add a git worktree of the repository REPO on BRANCH (an existing one as it is, a new one from HEAD; default hutch/<random>) in the data directory's worktrees, and run in it as the workspace; the command can add, commit and stash there, the repository's config and hooks stay read-only (instead of --workspace)")
	return c
}

// newRunFlags are run's flags at their defaults.
func newRunFlags() runFlags {
	return runFlags{outputLimit: units.FormatSize(runtime.DefaultOutputLimit), killAfter: runtime.DefaultWaitDelay.String(), pids: strconv.Itoa(runtime.DefaultPids), layer: &fileLayer{}}
}

// addDenialFlags registers --denials and --explain, for the commands
// that run one (not the file commands, whose refusals are their errors).
func addDenialFlags(fl *pflag.FlagSet, f *runFlags) {
	fl.StringVar(&f.denials, "denials", "", "what the command is refused while it runs (a path, a system call, a connection), each with the rule that refused it, in --result-json: record (the default) or off")
	fl.BoolVar(&f.explain, "explain", false, "after the command ends, add to its stderr a few lines naming what it was refused, by which rule, and how to allow it (hutch: refused ...)")
}

// addPublishFlag registers --publish, for the commands that start a
// command (not the file commands).
func addPublishFlag(fl *pflag.FlagSet, f *runFlags) {
	fl.Var(repeated{&f.publish}, "publish", "[HOST_IP:]HOST_PORT:PORT[/tcp]: forward connections to HOST_IP:HOST_PORT on the host (127.0.0.1 unless named; HOST_PORT 0 picks a free one, said on stderr) to the sandbox's 127.0.0.1:PORT (repeatable)")
}

// addRunFlags registers run's flags, which the file commands share: the
// same flags make the same Sandbox.
func addRunFlags(fl *pflag.FlagSet, f *runFlags) {
	f.fs = fl
	fl.StringVar(&f.policyFile, "policy", "", "a policy file (TOML; see hutch policy default) read on top of the default policy; the other flags add to it")
	fl.StringVar(&f.profile, "profile", "", "with --policy: the [profiles.NAME] table to apply on top of its [sandbox]")
	fl.BoolVar(&f.policyLayers, "policy-layers", false, "read /etc/hutch/policy.toml, ~/.config/hutch/policy.toml and the workspace's .hutch/policy.toml, in that order, under --policy; the workspace's may only narrow the others")
	fl.BoolVar(&f.unsandboxed, "allow-unsandboxed", false, "let a policy file's mode = \"disabled\" take effect: commands then run with the host's full access (self-hosted setups only)")
	fl.StringVar(&f.workspace, "workspace", "", "writable workspace directory (default: the current directory)")
	fl.Var(repeated{&f.write}, "write", "a further writable path (repeatable)")
	fl.Var(repeated{&f.deny}, "deny", "a further path to mask (repeatable)")
	fl.StringVar(&f.reads, "reads", "", "what of the host the command may read: host (the default: everything but the masked paths) or listed (only /usr, /bin, /sbin, /lib*, /etc, the workspace, the --write and --home trees and --read paths; nothing else of the host exists)")
	fl.Var(repeated{&f.read}, "read", "with --reads listed or --rootfs: a further host path shown read-only (repeatable)")
	fl.StringVar(&f.rootfs, "rootfs", "", "a root file system (an unpacked image's directory) to run on instead of the host's tree: read-only at /, with of the host only the workspace, the --write and --home trees, --read paths and binds")
	if fl.Lookup("image") == nil {
		// oci export's --image is its Pod's (a registry's reference).
		f.hasImage = true
		fl.StringVar(&f.image, "image", "", "LAYOUT[:TAG]: run on the image TAG of the OCI image layout LAYOUT (skopeo copy docker://debian:12 oci:LAYOUT:12), unpacked once into $XDG_CACHE_HOME/hutch/images by the hutch-image helper (beside hutch or on $PATH), as --rootfs; its Env applies under --env")
	}
	fl.Var(repeated{&f.binds}, "bind", "HOST:PATH[:ro|rw]: show the host's HOST at PATH in the sandbox, writable (rw, the default) or read-only (ro); with the host's reads PATH must exist on the host (repeatable)")
	fl.Var(repeated{&f.denyNames}, "deny-name", "a further file name or pattern (id_*, *.key) to mask wherever it occurs in the workspace and --write trees (repeatable)")
	fl.BoolVar(&f.noDefDeny, "no-default-deny", false, "mask neither the default paths (~/.ssh, /etc/shadow...) nor the default names (.env, .env.*, .ssh, id_rsa...); --deny and --deny-name still apply")
	fl.Var(repeated{&f.allowSystem}, "allow-system-write", "a system tree (/etc, /usr, /var, /boot, /bin, /sbin, /lib...) the workspace or a --write path may be or hold: refused otherwise, as more often a slip than a wish (repeatable)")
	fl.BoolVar(&f.gitWrite, "allow-git-write", false, "let the command commit in the repositories present in the workspace and --write trees: their .git becomes writable except config, hooks, info, modules, worktrees (read-only by default: the host's git runs what is planted there)")
	fl.BoolVar(&f.nested, "allow-nested", false, "let the command build sandboxes of its own (Chromium's, unshare -Ur): the system-call filter then allows creating user, pid, network, mount, ipc, uts and cgroup namespaces, setns and chroot; mounts stay refused; more kernel code reachable, the route of many privilege escalations")
	fl.Var(repeated{&f.env}, "env", "KEY=VALUE for the command (repeatable)")
	fl.Var(repeated{&f.readOnly}, "read-only", "a path inside the workspace or a --write or --home tree that stays read-only (repeatable)")
	fl.StringVar(&f.appsDir, "apps-dir", "", "hide the workspace's directory of app directories (relative to it; with --app, \"apps\" by default) but for --app's")
	fl.StringVar(&f.app, "app", "", "the app the sandbox runs as: of the workspace it reads only its own directory in --apps-dir and writes only that directory's data; the rest of the workspace is an empty read-only directory (still the working directory)")
	fl.StringVar(&f.home, "home", "", "a directory of the host that is the sandbox's HOME across commands, with XDG_* and the language caches in it (default: a fresh HOME in the private /tmp for every command)")
	fl.StringVar(&f.resultJSON, "result-json", "", "write the result (exit code, signal, reason, timings, layers) as JSON to this file")
	fl.StringVar(&f.seccomp, "seccomp", "", "an OCI seccomp profile (JSON) to use instead of the default")
	// Every limit: 0 means none (see Long).
	fl.Var(typed{&f.timeout, "duration"}, "timeout", "stop the command and everything it started after this long, e.g. 30s, 5m (default none): SIGTERM, then SIGKILL after --kill-after")
	fl.Var(typed{&f.killAfter, "duration"}, "kill-after", "how long the command has to end after --timeout or a SIGINT, SIGTERM, SIGHUP or SIGQUIT passed on to it, before everything in the sandbox is SIGKILLed; also how long to wait for its output once it ended")
	fl.Var(typed{&f.outputLimit, "size"}, "output-limit", "cap on stdout and stderr together; the command is killed past it")
	fl.Var(typed{&f.memory, "size"}, "memory", "memory limit, e.g. 512MiB, 1.5G (default half the host's memory, "+units.FormatSize(runtime.DefaultPolicy("").Memory)+" here)")
	fl.Var(typed{&f.pids, "n"}, "pids", "limit on processes and threads alive at once, the sandbox's init included")
	fl.Var(typed{&f.cpus, "cores"}, "cpus", "CPU limit in cores, e.g. 1.5, at least 0.01 (default none)")
	fl.Var(typed{&f.tmpSize, "size"}, "tmp-size", "size cap of the private /tmp, which holds HOME, e.g. 1GiB (default none)")
	fl.StringVar(&f.network, "net", string(runtime.NetworkNone), "network: none (loopback only), allow (only --allow-domain and --package-managers hosts, through a proxy on the host) or host (no isolation)")
	fl.Var(repeated{&f.allowDomain}, "allow-domain", "with --net allow: a domain the command may reach: example.com, *.example.com, with an optional :port; Unicode names match their punycode (repeatable)")
	fl.StringSliceVar(&f.packageMgrs, "package-managers", nil, "with --net allow: registries to allow: node,python,rust,go,java,ruby,php,dotnet,dart")
	fl.Var(repeated{&f.allowLocal}, "allow-local", "with --net allow: an exact IP:PORT on loopback or a private network the proxy may still connect to (repeatable)")
	// No default value: the policy's own ("") is namespaces on Linux and
	// the Seatbelt profile on macOS, where naming namespaces would refuse.
	fl.StringVar(&f.leaks, "leaks", "", "a secret (API key, token, private key, the value of a host variable named like a secret) in the command's output or a file read: report (the default: listed in --result-json, never the secret), redact (replaced in the output by [REDACTED:rule]), kill (redacted, and the command killed) or off; under all but off, a command whose arguments or --env hold one is not run")
	fl.StringVar(&f.backend, "backend", "", "what enforces the sandbox: auto (the strongest this host has: namespaces, namespaces without a fresh /proc, then Landlock alone; Seatbelt on macOS; never none), namespaces, landlock, seatbelt, oci (through --oci-runtime) or none (with --allow-unsandboxed); default: namespaces or nothing (see --min-level); one this host lacks exits 127")
	fl.StringVar(&f.minLevel, "min-level", "", "weakest isolation level accepted: namespaces (the default on Linux), namespaces-no-proc or landlock (hosts without user namespaces); macOS always runs its Seatbelt profile; see hutch doctor")
}

func policyFrom(f runFlags) (runtime.Policy, error) {
	ws := f.workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return runtime.Policy{}, err
		}
		ws = wd
	} else if !filepath.IsAbs(ws) {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return runtime.Policy{}, err
		}
		ws = abs
	}
	p := runtime.DefaultPolicy(ws)
	switch {
	case f.policyFile != "" || f.policyLayers:
		// The files' policy is the base; the flags are the call's layer
		// on top: lists add to the files', a value replaces theirs only
		// when the flag is given.
		var layers []policyfile.Layer
		if f.policyLayers {
			found, err := policyfile.Discover(ws)
			if err != nil {
				return p, err
			}
			layers = found
		}
		var file *policyfile.File
		if f.policyFile != "" {
			var err error
			read := policyfile.ReadFile
			if f.stablePolicy {
				read = policyfile.ReadFileStable
			}
			file, err = read(f.policyFile)
			var fe *policyfile.Error
			switch {
			case errors.As(err, &fe):
				return p, err // names the file, line and key
			case err != nil:
				return p, &flagErr{"--policy", f.policyFile, err.Error()}
			}
			layers = append(layers, policyfile.Layer{File: file, Trusted: true})
		}
		var err error
		if p, err = policyfile.Layered(ws, f.profile, layers...); err != nil {
			return p, err
		}
		if f.layer != nil && file != nil {
			f.layer.file, f.layer.base = file, p
		}
	case f.profile != "":
		return p, &flagErr{"--profile", f.profile, "needs --policy FILE or --policy-layers, whose [profiles." + f.profile + "] it names"}
	}
	p.Writable = append(slices.Clip(p.Writable), f.write...)
	p.ReadOnly = append(slices.Clip(p.ReadOnly), f.readOnly...)
	if f.appsDir != "" || f.app != "" {
		p.Apps = &runtime.AppIsolation{Dir: f.appsDir, ID: f.app}
	}
	p.Deny = append(slices.Clip(p.Deny), f.deny...)
	p.Deny = append(p.Deny, dataDirDeny(ws)...)
	if f.given("reads", f.reads) {
		if f.reads == "" {
			return p, &flagErr{"--reads", "", "empty: host or listed"}
		}
		p.Reads = runtime.ReadScope(f.reads)
	}
	for _, s := range f.binds {
		b, err := runtime.ParseBind(s)
		if err != nil {
			return p, &flagErr{"--bind", s, err.Error()}
		}
		// The host's path may be relative to here; the sandbox's is
		// the sandbox's, and absolute.
		if b.Host, err = filepath.Abs(b.Host); err != nil {
			return p, &flagErr{"--bind", s, err.Error()}
		}
		p.Binds = append(slices.Clip(p.Binds), b)
	}
	if f.hasImage && f.given("image", f.image) {
		if f.image == "" {
			return p, &flagErr{"--image", "", "empty: give LAYOUT[:TAG], an OCI image layout's directory"}
		}
		if f.given("rootfs", f.rootfs) {
			return p, &flagErr{"--image", f.image, "not with --rootfs: the image is the root"}
		}
		if err := applyImage(&p, f); err != nil {
			return p, err
		}
	}
	if f.given("rootfs", f.rootfs) {
		if f.rootfs == "" {
			return p, &flagErr{"--rootfs", "", "empty: give a directory holding a root file system"}
		}
		abs, err := filepath.Abs(f.rootfs)
		if err != nil {
			return p, &flagErr{"--rootfs", f.rootfs, err.Error()}
		}
		p.Root = abs
	}
	for _, r := range f.read {
		abs, err := filepath.Abs(r)
		if err != nil {
			return p, &flagErr{"--read", r, err.Error()}
		}
		p.Read = append(slices.Clip(p.Read), abs)
	}
	p.DenyNames = append(slices.Clip(p.DenyNames), f.denyNames...)
	p.NoDefaultDeny = p.NoDefaultDeny || f.noDefDeny
	p.AllowGitWrite = p.AllowGitWrite || f.gitWrite
	p.AllowNested = p.AllowNested || f.nested
	p.AllowSystemWrite = append(slices.Clip(p.AllowSystemWrite), f.allowSystem...)
	p.AllowUnsandboxed = f.unsandboxed
	p.Env = append(slices.Clip(p.Env), f.env...)
	if f.home != "" {
		h, err := filepath.Abs(f.home)
		if err != nil {
			return p, err
		}
		p.Home = h
	}
	if f.given("min-level", f.minLevel) {
		p.MinLevel = runtime.Level(f.minLevel)
	}
	if f.given("backend", f.backend) {
		p.Backend = runtime.Backend(f.backend)
	}
	if f.given("leaks", f.leaks) {
		p.Leaks = runtime.LeakAction(f.leaks)
	}
	if f.given("denials", f.denials) {
		p.Denials = runtime.DenialMode(f.denials)
	}
	p.Explain = p.Explain || f.explain
	if f.given("net", f.network) {
		if f.network == "" {
			// Not "unset": a caller's own empty value (--net= from an
			// empty variable) is an error, never the default.
			return p, &flagErr{"--net", "", "empty: none, allow or host"}
		}
		p.Network = runtime.NetworkMode(f.network)
	}
	p.AllowDomains = append(slices.Clip(p.AllowDomains), f.allowDomain...)
	p.PackageManagers = append(slices.Clip(p.PackageManagers), f.packageMgrs...)
	p.AllowLocal = append(slices.Clip(p.AllowLocal), f.allowLocal...)
	for _, s := range f.publish {
		pub, err := runtime.ParsePublish(s)
		var pe *runtime.PolicyError
		if errors.As(err, &pe) {
			return p, &flagErr{"--publish", s, pe.Reason}
		}
		p.Publish = append(slices.Clip(p.Publish), pub)
	}
	for _, s := range f.reach {
		r, err := reachProcess(s)
		if err != nil {
			return p, err
		}
		p.Reach = append(slices.Clip(p.Reach), r)
	}
	if err := f.limits(&p); err != nil {
		return p, err
	}
	if f.seccomp != "" {
		prof, err := seccomp.ParseFile(f.seccomp)
		if err != nil {
			return p, &flagErr{"--seccomp", f.seccomp, err.Error()}
		}
		p.Seccomp = prof
	}
	return p, nil
}

func run(ctx context.Context, f runFlags, args []string, code *int) (runErr error) {
	var cmd *runtime.Cmd
	// noCmdResult is the Result of a run with no Cmd here: through an
	// OCI runtime, or through the server at HUTCH_SOCKET.
	var noCmdResult *runtime.Result
	var wt *hostgit.Worktree
	// Signals are hutch's before anything is created: one that comes
	// before the command runs ends the run as it would have ended the
	// command (128+N), with the --result-json written.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fwd := forwardSignals(cancel)
	defer fwd.stop()
	// A closed stdout (hutch run ... | head) is an EPIPE to the copier,
	// which passes it on to the command as a shell pipeline would, and
	// hutch lives on to report it, instead of dying of SIGPIPE with the
	// sandbox and no --result-json.
	signal.Ignore(syscall.SIGPIPE)
	if f.resultJSON != "" {
		// Opened before anything runs: an unwritable path is refused
		// first, and the result is written whatever happens next.
		out, err := os.OpenFile(f.resultJSON, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("--result-json %q: %w", f.resultJSON, err)
		}
		defer func() {
			res := noCmdResult
			if cmd != nil {
				res = cmd.Result
			}
			if err := writeResult(out, res, wt, args, *code, f.flagError(runErr)); err != nil && runErr == nil {
				runErr = fmt.Errorf("--result-json %q: %w", f.resultJSON, err)
				*code = exitHutchFailed
			}
		}()
	}
	if f.worktree != "" {
		var err error
		if wt, err = addWorktree(ctx, &f); err != nil {
			return err
		}
	}
	p, err := policyFrom(f)
	if err != nil {
		return err
	}
	if wt != nil {
		if err := wt.Apply(&p); err != nil {
			return f.flagError(err)
		}
	}
	killAfter, err := f.gracePeriod()
	if err != nil {
		return err
	}
	if p.Backend == runtime.BackendOCI {
		noCmdResult, err = runOCI(ctx, f, p, args, killAfter, code)
		return err
	}
	if sock := os.Getenv(socketEnv); sock != "" && wt == nil {
		var given time.Duration
		if f.given("kill-after", "") {
			given = killAfter
		}
		res, status, ran, err := remoteRun(ctx, sock, p, given, args, os.Stdin)
		if ran {
			noCmdResult = res
			var sig signalError
			switch {
			case errors.As(err, &sig):
				*code = 128 + int(sig.sig)
				return nil
			case res == nil:
				*code = exitHutchFailed
				return err
			}
			*code = status
			if err != nil {
				// Not found, cannot execute, or output lost: the
				// server's words, with its status.
				if status == 0 {
					*code = exitHutchFailed
				}
				return err
			}
			printNotes(res, f.verbose)
			return nil
		}
	}
	sb, err := runtime.New(p)
	if errors.Is(err, runtime.ErrUnsupportedPlatform) || errors.Is(err, runtime.ErrBackendUnavailable) {
		// As an agent's own backends say a missing sandbox: the command
		// cannot be run here, and nothing ran unconfined.
		*code = exitNotFound
		return f.flagError(err)
	}
	if err != nil {
		return f.flagError(err)
	}
	defer sb.Close()
	cmd = sb.Command(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.WaitDelay = killAfter
	fwd.to(cmd)
	if err = cmd.Start(); err == nil {
		// The one command this process runs has its init: closing the
		// Sandbox now leaves it running, and takes back the spawn
		// server's Prepare, so that the server clones no spare when the
		// init ends, only for it to be killed as hutch exits. A Sandbox
		// that publishes ports keeps them open until the command ends.
		if pub := sb.Published(); len(pub) == 0 {
			sb.Close()
		} else {
			for _, p := range pub {
				fmt.Fprintf(os.Stderr, "hutch: published %s\n", p)
			}
		}
		err = cmd.Wait()
	}
	var ee *runtime.ExitError
	var sig signalError
	switch {
	case errors.As(context.Cause(ctx), &sig) && cmd.Result.KillReason == runtime.KilledCanceled:
		// Interrupted while the sandbox was being built: the command never
		// ran, and hutch exits as a shell's command dying of it would.
		*code = 128 + int(sig.sig)
	case err == nil || errors.As(err, &ee):
		*code = runtime.ExitStatus(cmd.Result, err)
		printNotes(cmd.Result, f.verbose)
		if errors.Is(err, runtime.ErrWaitDelay) {
			fmt.Fprintf(os.Stderr, "hutch: output incomplete: stdout or stderr blocked for --kill-after (%v) after the command ended\n", killAfter)
		}
	case errors.Is(err, syscall.EPIPE):
		// The command ended well, but what it wrote last reached hutch
		// after hutch's reader had gone (hutch run ... | head): hutch is
		// the writer a shell pipeline sees, and ends as one, quietly.
		*code = 128 + int(syscall.SIGPIPE)
	case errors.Is(err, runtime.ErrNotFound), errors.Is(err, runtime.ErrCannotExec):
		*code = runtime.ExitStatus(cmd.Result, err)
		return err
	default:
		*code = exitHutchFailed
		return f.flagError(err)
	}
	return nil
}

// printNotes says on stderr, a line each, what a finished run's Result
// holds that its exit status does not: blocked connections, isolation not
// enforced, secrets found, why it was killed. What is the same for every
// command on a host and was not chosen by the caller's flags' strength
// (limits kept by rlimits for want of cgroups, as for an unprivileged
// user; the host's network, asked for with --net host; the namespaces of
// --allow-nested) is said only with
// verbose: an agent feeds a command's stderr to its model, and the Result
// (--result-json) holds it anyway. A level below namespaces, or a backend
// that leaves layers out, is always said: never quietly weaker.
func printNotes(r *runtime.Result, verbose bool) {
	for _, e := range r.NetworkEvents {
		if !e.Allowed {
			fmt.Fprintln(os.Stderr, e.String())
		}
	}
	if r.Network == runtime.NetworkHost && verbose {
		fmt.Fprintln(os.Stderr, "hutch: --net host: the command shared the host's network, with no isolation")
	}
	if r.Nested && verbose {
		fmt.Fprintln(os.Stderr, "hutch: --allow-nested: the command could create namespaces (setns, chroot too), which reach more of the kernel")
	}
	rlimits := slices.ContainsFunc(r.Skipped, func(s runtime.Skipped) bool { return s.Layer == runtime.LayerCgroup })
	switch {
	case r.Level != runtime.LevelNamespaces:
		fmt.Fprintf(os.Stderr, "hutch: isolation level %s; not enforced: %s\n", r.Level, strings.Join(r.Unenforced, "; "))
	case len(r.Unenforced) > 0 && rlimits && verbose:
		fmt.Fprintf(os.Stderr, "hutch: no cgroups here, limits are per-process rlimits; not enforced: %s\n", strings.Join(r.Unenforced, "; "))
	case len(r.Unenforced) > 0 && !rlimits:
		fmt.Fprintf(os.Stderr, "hutch: not enforced: %s\n", strings.Join(r.Unenforced, "; "))
	}
	if len(r.Leaks) > 0 {
		fmt.Fprintln(os.Stderr, "hutch: "+leaksFound(r))
	}
	if r.Reason != "" && r.KillReason != runtime.KilledStopped {
		fmt.Fprintf(os.Stderr, "hutch: command killed: %s\n", r.Reason)
	} else if r.Truncated {
		fmt.Fprintln(os.Stderr, "hutch: output truncated at the output limit")
	}
}

// signalForwarder passes SIGINT, SIGTERM, SIGHUP and SIGQUIT that hutch
// receives on to the command as its terminal or a supervisor meant them:
// to its process group, with the SIGKILL of the whole sandbox --kill-after
// later if it has not ended (Cmd.Stop). A signal that comes before the
// command runs (while the policy is checked or the sandbox built) ends
// the run at once, through the context.
type signalForwarder struct {
	cmd  atomic.Pointer[runtime.Cmd]
	sigs chan os.Signal
	done chan struct{}
}

// forwardSignals starts taking the signals; cancel ends the run for one
// that comes before there is a command to pass it to.
func forwardSignals(cancel context.CancelCauseFunc) *signalForwarder {
	fw := &signalForwarder{sigs: make(chan os.Signal, 4), done: make(chan struct{})}
	signal.Notify(fw.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for {
			select {
			case s := <-fw.sigs:
				cmd := fw.cmd.Load()
				if cmd == nil {
					cancel(signalError{s.(syscall.Signal)})
				} else if err := cmd.Stop(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
					cancel(signalError{s.(syscall.Signal)})
				}
			case <-fw.done:
				return
			}
		}
	}()
	return fw
}

// to passes the signals from now on to cmd.
func (fw *signalForwarder) to(cmd *runtime.Cmd) { fw.cmd.Store(cmd) }

// stop stops taking the signals.
func (fw *signalForwarder) stop() {
	signal.Stop(fw.sigs)
	close(fw.done)
}

// signalError is the cause of a run cancelled by a signal hutch received
// before its command ran.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

// resultSchema is the version of --result-json's document: the fields of
// runtime.Result, and these. It changes when a field changes meaning or
// goes away, not when one is added.
const resultSchema = 1

// resultFile is the --result-json document: the command's Result (or, when
// none exists because nothing ran, only the exit code hutch exits with)
// and what produced it.
type resultFile struct {
	Schema  int      `json:"schema"`
	Version string   `json:"hutch_version"`
	Argv    []string `json:"argv"`
	Command []string `json:"command"`
	// Error is why hutch exited 125, 126 or 127 instead of with the
	// command's own status.
	Error string `json:"error,omitempty"`
	// Worktree is the worktree --worktree made, the workspace.
	Worktree *worktreeDoc `json:"worktree,omitempty"`
	*runtime.Result
}

// worktreeDoc is a hostgit.Worktree in --result-json.
type worktreeDoc struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	GitDir string `json:"git_dir"`
}

// writeResult writes the document for a run that exits with code.
func writeResult(out *os.File, res *runtime.Result, wt *hostgit.Worktree, command []string, code int, runErr error) error {
	doc := resultFile{Schema: resultSchema, Version: version(), Argv: os.Args, Command: command}
	if wt != nil {
		doc.Worktree = &worktreeDoc{Path: wt.Dir, Branch: wt.Branch, GitDir: wt.GitDir}
	}
	doc.Result = res
	if doc.Result == nil || doc.Result.LeakAction != runtime.LeaksOff {
		// The document never holds a secret the command line did (a
		// command refused for one): it goes where results are kept.
		s := leaks.DefaultScanner()
		doc.Argv, doc.Command = redactArgs(s, doc.Argv), redactArgs(s, doc.Command)
	}
	if runErr != nil {
		doc.Error = strings.TrimPrefix(runErr.Error(), "hutch: ")
		if code == 0 {
			code = exitHutchFailed // as execute will exit
		}
	}
	switch {
	case doc.Result == nil:
		doc.Result = &runtime.Result{ExitCode: code}
	case runErr != nil:
		r := *doc.Result // what there is of it, with the status hutch exits with
		r.ExitCode = code
		doc.Result = &r
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if _, err := out.Write(append(b, '\n')); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// release is the version of this tree: the clients' packages carry the
// same (TestClientVersions).
const release = "0.1.0"

// version is hutch's version: its module version when it was built as a
// dependency at a tagged version, else release marked as a development
// build, with the commit it was built from when the build recorded it
// (-buildvcs).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	v := bi.Main.Version
	if !ok || v == "" || v == "(devel)" {
		v = release + "-dev"
	}
	if !ok {
		return v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += "+dirty"
			}
		}
	}
	return v
}

func seccompCommand() *cobra.Command {
	c := &cobra.Command{Use: "seccomp", Short: "Work with seccomp profiles"}
	c.AddCommand(&cobra.Command{
		Use:   "default",
		Short: "Print the default agent profile as OCI seccomp JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := seccomp.Marshal(seccomp.Default())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	})
	return c
}

// leaksFound says in one line which secrets the command's output held and
// what was done about them.
func leaksFound(r *runtime.Result) string {
	var where []string
	for _, l := range r.Leaks {
		what := l.Rule
		if l.Rule == leaks.HostValue {
			what = l.Name
		}
		where = append(where, fmt.Sprintf("%s (%s at %d)", what, l.Stream, l.Offset))
	}
	if r.LeaksDropped > 0 {
		where = append(where, fmt.Sprintf("%d more", r.LeaksDropped))
	}
	done := map[runtime.LeakAction]string{runtime.LeaksReport: "passed on (--leaks report)", runtime.LeaksRedact: "redacted", runtime.LeaksKill: "redacted, command killed"}[r.LeakAction]
	return fmt.Sprintf("secrets in the output, %s: %s", done, strings.Join(where, ", "))
}

// redactArgs replaces the secrets s finds in args as --leaks redact
// would.
func redactArgs(s *leaks.Scanner, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		r := s.Redactor(&b, nil)
		r.Write([]byte(a))
		r.Close()
		out[i] = b.String()
	}
	return out
}

// applyImage unpacks --image (once per digest, in the user's cache) and
// makes p run on it: its root, and its Env under the policy's. The
// unpacking is the hutch-image helper's (imagehelper says why).
func applyImage(p *runtime.Policy, f runFlags) error {
	layout, tag := images.ParseRef(f.image)
	cache, err := images.DefaultCache()
	if err != nil {
		return &flagErr{"--image", f.image, err.Error()}
	}
	helper, err := imagehelper.Find()
	if err != nil {
		return &flagErr{"--image", f.image, err.Error()}
	}
	im, err := imagehelper.Unpack(context.Background(), helper, layout, tag, cache)
	if err != nil {
		var ie *images.Error
		if errors.As(err, &ie) {
			reason := ie.Reason
			if ie.Err != nil {
				reason += ": " + ie.Err.Error()
			}
			return &flagErr{"--image", f.image, reason}
		}
		return &flagErr{"--image", f.image, err.Error()}
	}
	for _, l := range im.Apply(p) {
		if f.verbose {
			fmt.Fprintf(os.Stderr, "hutch: the image's %s: left out\n", l)
		}
	}
	return nil
}
