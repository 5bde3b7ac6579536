// Package runtime is hutch's public API: a Policy says what a sandboxed
// command may see and do, New validates it once into a Sandbox, and
// Sandbox.Command returns a Cmd shaped like os/exec's.
//
//	sb, err := runtime.New(runtime.DefaultPolicy("/path/to/workspace"))
//	out, err := sb.Command(ctx, "sh", "-c", modelWrittenScript).Output()
//
// Every command runs in fresh user, mount, pid, network, ipc, uts and
// cgroup namespaces, with the host's tree read-only, the workspace
// writable, secrets masked, no network, and no capability. Commands are
// cloned from a small spawn server (package spawn), not from the host's own
// process, so their cost does not grow with the host's heap.
//
// Deciding and acting are apart. Check resolves and validates a Policy
// into a Resolved, the decision (paths, deny-list, network rules, grants'
// ceiling, level), reading the file system and starting nothing; New
// decides the same and then starts what commands need, and NewResolved
// makes a Sandbox of a decision taken before, perhaps by another process
// (a durable process's supervisor, package processes). Every door
// compiles that one decision: a command's plan, the file door
// (Sandbox.ReadFile and the rest, run by a file server inside the same
// view), package oci's bundles and Pods, and macOS's Seatbelt profile.
//
// A host binary that imports this package carries the sandbox's init: hutch
// starts it again once through /proc/self/exe with a role marker, and
// package nsinit's C stage takes that process over before the Go runtime
// starts (the zygote); every sandbox init is a clone of it and runs no Go
// code. No line in main is needed.
package runtime

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/seccomp"
)

// Layer names one isolation layer (see the Layer* constants).
type Layer = nsinit.Layer

// The layers a Result can report.
const (
	LayerUserNS       = nsinit.LayerUserNS
	LayerMountNS      = nsinit.LayerMountNS
	LayerPidNS        = nsinit.LayerPidNS
	LayerNetNS        = nsinit.LayerNetNS
	LayerIPCNS        = nsinit.LayerIPCNS
	LayerUTSNS        = nsinit.LayerUTSNS
	LayerCgroupNS     = nsinit.LayerCgroupNS
	LayerFilesystem   = nsinit.LayerFilesystem
	LayerLoopback     = nsinit.LayerLoopback
	LayerKeyring      = nsinit.LayerKeyring
	LayerUserCounts   = nsinit.LayerUserCounts
	LayerNoNewPrivs   = nsinit.LayerNoNewPrivs
	LayerCapabilities = nsinit.LayerCapabilities
	LayerSeccomp      = nsinit.LayerSeccomp
	LayerCgroup       = nsinit.LayerCgroup
	LayerRlimits      = nsinit.LayerRlimits
	LayerLandlock     = nsinit.LayerLandlock
	LayerUnixSockets  = nsinit.LayerUnixSockets
)

// LayerExec is the Layer of a SetupError from the sandbox's own steps
// around the command (its stdio, its lookup and exec); no Result lists it.
// That the command was not found or could not be executed is better
// asked with errors.Is(err, ErrNotFound) and ErrCannotExec.
const LayerExec = nsinit.LayerExec

// Skipped is a layer that was allowed to degrade and was not set up.
type Skipped = nsinit.Skipped

// Policy says what commands of a Sandbox may see and do. Workspace is
// required; every other field's zero value is hutch's default, safe for
// limits too (see Unlimited). DefaultPolicy differs from Policy{Workspace:
// dir} only in allowing the cgroup and Landlock layers to degrade.
type Policy struct {
	// Workspace is the directory commands may write, bound read-write at
	// its own path. It must be an absolute path to an existing directory.
	// Like a Writable path it may not be /, lie in /proc, /sys, /dev or
	// /run, or hold the sandbox's /tmp and HOME (/tmp itself).
	Workspace string

	// Writable are further paths bound read-write. Relative paths are
	// resolved against Workspace.
	Writable []string

	// ReadOnly are paths inside the writable trees (the workspace,
	// Writable, Home) that commands and the file operations may read but
	// not change, nor anything below them: an agent's identity files, a
	// data directory it must not rewrite. Relative paths are resolved
	// against Workspace; a path missing when a command starts is skipped.
	// Mounts enforce them, so level landlock refuses them.
	ReadOnly []string

	// Reads says what of the host commands may read. ReadsHost ("", the
	// default) is the host's whole tree but the deny-list. ReadsListed
	// shows only what the policy lists: ListedSystemTrees, the workspace,
	// the Writable trees, Home, Tools and Read, besides the sandbox's own
	// /tmp, /dev and /proc; the deny-list applies inside them. Nothing
	// else of the host exists for a command or the file operations, not
	// even as an empty directory, so a forgotten secret elsewhere (another
	// user's home, /var/lib, a second checkout) is out of reach by
	// construction. At level namespaces the view is built on an empty
	// root; at level landlock, Landlock grants reads of exactly those
	// trees. Omitted from the policy's JSON when "".
	Reads ReadScope `json:",omitempty"`
	// Read are more host paths a listed view (ReadsListed) shows,
	// read-only at their own paths: absolute, existing, not in /proc, /sys,
	// /dev or the hidden socket directories, nor under a denied path.
	Read []string `json:",omitempty"`

	// Root is a root file system for the sandbox instead of the host's
	// tree: a host directory holding one (an image unpacked, see package
	// images), shown read-only at / with nosuid and nodev. The view is a
	// listed one built on it: of the host only the workspace, the
	// Writable trees, Home, Tools, Read and Binds are there, with the
	// deny-list applied in them, and the sandbox's own /tmp, /dev and
	// /proc; the image's /tmp and /dev are not used. PATH is the
	// standard one, not the host's (an image's Env may set it, through
	// Env). Absolute, an existing directory, not /, in no kernel tree or
	// hidden directory, under no denied path, neither in nor holding a
	// writable tree (a command would change its own root). Mounts make it, so level
	// landlock refuses it. Omitted from the policy's JSON when "".
	Root string `json:",omitempty"`

	// Binds show host trees at other paths of the sandbox (a user's
	// directory at /home/agent, a checkout at /workspace): commands and
	// the file operations see them there, and file results give the host
	// path beside the sandbox's. Each is writable, as a Writable tree and
	// checked as one, unless ReadOnly. The deny-list, deny names and git
	// guards apply to what is bound, at the sandbox path too. A Path must
	// not hide or overlap the workspace, a writable tree, Home, another
	// bind, a masked or a read-only path, nor lie in /proc, /sys, /dev or
	// the hidden socket directories; with the host's reads (the read-only
	// host tree is the root) it must exist on the host, or lie in the
	// private /tmp. Mounts make them, so level landlock refuses them.
	Binds []Bind `json:",omitempty"`

	// Deny are masked in addition to DefaultDeny (unless NoDefaultDeny):
	// unreadable even through symlinks. Relative paths are resolved
	// against Workspace.
	Deny []string
	// DenyNames are masked, in addition to DefaultDenyNames (unless
	// NoDefaultDeny), wherever they occur in the workspace and the
	// Writable trees: base names or path.Match patterns ("id_*", ".env.*"),
	// matching files and directories alike, at any depth (node_modules
	// included; not inside .git, .hg and .svn), as of each command's and
	// file operation's start: on Linux the trees are watched (small
	// ones are walked, for a Sandbox's first few commands), and walked
	// in full only when the watch cannot follow them
	// (Result.TreesWalked); elsewhere they are found once, by New. A
	// command whose trees hold more matches than MaxNameMounts can mask is refused with
	// a *MaskLimitError.
	DenyNames []string
	// NoDefaultDeny drops DefaultDeny and DefaultDenyNames from the
	// masked set.
	NoDefaultDeny bool

	// AllowGitWrite lets commands commit in the git repositories present
	// in the writable trees when they start. By default each one's git
	// directory is read-only (git status, log and diff work; commit does
	// not): the host's git reads its config and runs its hooks, so what a
	// command planted there would run on the host the next time the user
	// runs git. With AllowGitWrite objects, refs, the index and HEAD are
	// writable, and only config, hooks, info, modules, worktrees and an
	// existing commondir or config.worktree stay read-only. Either way
	// .git cannot be renamed or removed, repositories the command makes
	// are its own, and Result.Repositories reports those it created,
	// replaced or (possible only with AllowGitWrite) redirected with a
	// new commondir or config.worktree. Repositories are found at any
	// depth, as the deny names are.
	AllowGitWrite bool

	// AllowSystemWrite names the system trees (/etc, /usr, /var, /boot,
	// /bin, /sbin, /lib and the other /lib directories) that may be, or
	// lie in, a writable tree: the workspace, Writable, Home or a grant's
	// write:. A system tree not named here is refused as writable, naming
	// it: writable by mistake (an unset variable), it lets a command run
	// as root change the host's programs and configuration.
	AllowSystemWrite []string

	// Env are KEY=VALUE pairs given to every command, on top of the
	// sandbox's clean environment.
	Env []string

	// Tools is a host directory prepended to PATH inside the sandbox.
	Tools string

	// Apps, when set, keeps the agents of an app platform out of each
	// other's directories in the workspace (see AppIsolation).
	Apps *AppIsolation

	// Home, when set, is a host directory that is the sandbox's HOME and
	// stays across its commands: writable like the workspace, with XDG_*
	// and the language caches (GOCACHE, GOPATH, npm_config_cache,
	// PIP_CACHE_DIR, CARGO_HOME, ...) inside it, so package managers keep
	// their caches between commands and never touch the real home. It
	// must be an absolute path to an existing directory, neither the host's
	// home nor holding it. Empty: HOME is runtime.Home, in the private
	// /tmp, fresh for every command.
	Home string

	// Network says what commands can reach. NetworkNone (the default,
	// also for "") is a network namespace of their own with only
	// loopback. NetworkAllow adds one way out: a proxy on the host that
	// lets through only connections to AllowDomains and the hosts of the
	// PackageManagers presets, after refusing private, loopback and
	// metadata addresses (unless listed in AllowLocal); the proxy
	// variables (HTTP_PROXY and friends) point at it, and a program that
	// ignores them reaches nothing. NetworkHost shares the host's network:
	// no isolation at all, reported in every Result.
	Network NetworkMode
	// AllowDomains are "example.com", "*.example.com" (subdomains only)
	// or "*" (any domain, the address checks still apply), each with an
	// optional ":port".
	AllowDomains []string
	// PackageManagers name presets of AllowDomains: node, python, rust,
	// go, java, ruby, php, dotnet, dart.
	PackageManagers []string
	// AllowLocal are exact "host:port" destinations on loopback or private
	// networks that NetworkAllow may reach despite the address checks.
	AllowLocal []string
	// Publish are the sandbox's loopback ports reachable from the host
	// (see Publish): none unless listed. Each needs a network namespace of
	// the sandbox's own (not Network "host", not LevelLandlock). Omitted
	// from the policy's JSON when empty, as a build before it wrote that
	// JSON.
	Publish []Publish `json:",omitempty"`
	// Reach are ports of the command's own loopback that lead to one
	// service on the host's loopback each (see Reach), such as a durable
	// process's published port: none unless listed. Omitted from the
	// policy's JSON when empty.
	Reach []Reach `json:",omitempty"`

	// The limits below follow one rule: 0 means hutch's default, Unlimited
	// means no limit, and any other negative value is refused. The default
	// is a limit where a runaway command would hurt the host (Memory, Pids,
	// OutputLimit: the values DefaultPolicy sets) and none where no value
	// fits every command (Timeout, CPUs, TmpSize, FileSize). Sizes count
	// bytes (the CLI and policy files read 512MiB and the like). New refuses values no
	// kernel would apply as given (see checkLimits): a CPUs that is not
	// finite or is below 0.01, Pids 1 or above 4194304, Memory below
	// 4 MiB, TmpSize below one page, a Timeout below a millisecond, sizes
	// above 1 PiB. Policy() reports the limits in effect, defaults filled
	// in.

	// Timeout ends each command, and everything it started, after this
	// long. Default: none, only the context ends it.
	Timeout time.Duration

	// OutputLimit caps the bytes of stdout and stderr taken together; a
	// command that writes more is truncated and killed. Default:
	// DefaultOutputLimit.
	OutputLimit int64

	// TmpSize caps the private /tmp, which holds HOME. Default: none.
	TmpSize int64

	// Resource limits of each command, enforced by a cgroup of its own.
	// Memory counts everything the command's processes are charged (no
	// swap on top); default: half the host's memory. Pids bounds processes
	// and threads alive at once, the sandbox's init included; default:
	// DefaultPids. CPUs is a rate in cores (1.5: one and a half); default:
	// none. FileSize bounds any file the command writes (RLIMIT_FSIZE);
	// default: none. Where cgroups cannot be used (an unprivileged user on
	// a host without a delegated cgroup v2 subtree) New fails, unless
	// AllowDegraded names LayerCgroup: then Memory and Pids fall back to
	// RLIMIT_DATA and RLIMIT_NPROC, per process and approximate, and every
	// Result says so. So a Policy holding only a Workspace has memory and
	// process limits, and as an unprivileged user it fails closed where
	// DefaultPolicy (which allows that layer to degrade) runs on rlimits.
	Memory   int64
	Pids     int64
	CPUs     float64
	FileSize int64

	// Seccomp replaces the default system-call filter (seccomp.Default)
	// with an OCI seccomp profile, e.g. one parsed by seccomp.Parse.
	Seccomp *seccomp.Profile
	// AllowNested lets commands build sandboxes of their own: the
	// system-call filter lets them create user, pid, network, mount, ipc,
	// uts and cgroup namespaces, setns and chroot (seccomp.AllowNested),
	// which Chromium's sandbox needs (without it Chromium runs only with
	// --no-sandbox). Everything else of the policy holds, inside the
	// nested namespaces too: the view, the masks, the network, the
	// limits; mounts stay refused (by the filter and by Landlock), so a
	// sandbox that must mount (bubblewrap) still cannot be built. The
	// cost is attack surface: a user namespace of the command's own
	// reaches kernel code that an unprivileged process otherwise cannot,
	// the route of many local privilege escalations. Results say so
	// (Result.Nested, and a "+nested" SeccompProfile). The sandbox's user
	// namespace then also caps the namespaces it may hold to a share of
	// the host user's (LayerUserCounts). Omitted from the policy's JSON
	// when false, as a build before it wrote that JSON.
	AllowNested bool `json:",omitempty"`

	// SeccompAllow and SeccompDeny adjust the profile: names in
	// SeccompAllow are allowed outright (replacing any argument checks:
	// "clone" and "unshare" there let a command make namespaces, though
	// Landlock keeps a user namespace's id maps unwritable: AllowNested
	// is the way to nested sandboxes), names in SeccompDeny fail with
	// EPERM, even those AllowNested opens.
	SeccompAllow, SeccompDeny []string

	// AllowDegraded names layers that may be skipped when the host cannot
	// set them up. Anything skipped is reported in the Result. By default
	// nothing degrades: a layer that cannot be applied fails the command.
	AllowDegraded []Layer

	// Prewarm keeps this many inits built and confined ahead of time
	// (namespaces, filesystem view, privileges dropped, seccomp loaded),
	// each waiting for one command, so that a command pays little more than
	// its own fork and exec. Each pooled init serves exactly one command and
	// is replaced a few milliseconds after that command ends (or once it has
	// run for 100 ms), so that building the next never competes with a short
	// command, nor with a command issued right after it; a command that
	// finds the pool empty while an init is being built waits for it rather
	// than building another. A command that finds none ready (one right
	// after another) has the pool keep one more, up to twice Prewarm, until
	// for 10 s no command has found it empty or taken one of the extra ones.
	// A Sandbox with a pool has the spawn server keep no spare init (one
	// cloned as each init ends, when a command right after it starts).
	// Close releases them. 0 means none.
	Prewarm int

	// Backend is what enforces the sandbox: BackendAuto (the strongest
	// this host has, down to Landlock, never none), BackendNamespaces,
	// BackendLandlock, BackendSeatbelt, BackendOCI (package oci runs it;
	// New refuses it) or BackendNone (Unsandboxed). "" is MinLevel's rule alone. New refuses
	// one this platform or host does not have with an error matching
	// ErrBackendUnavailable; every Result names the backend and the level.
	Backend Backend

	// MinLevel is the weakest isolation level (a rung of the fallback
	// ladder) the policy accepts; "" means LevelNamespaces: New fails on
	// a host that cannot give full namespaces, naming why and the remedy.
	// LevelLandlock lets commands run on hosts without user namespaces
	// (AppArmor-restricted Ubuntu, containers) with what Landlock and
	// seccomp can enforce; each Result lists what is not.
	MinLevel Level

	// Unsandboxed is the disabled mode of self-hosted setups: commands
	// run as plain processes of the host, with its full access, and every
	// Result says so (Unsandboxed, LevelUnsandboxed). New refuses it
	// unless AllowUnsandboxed is set too: the host program's consent,
	// which a policy file cannot give (its mode = "disabled" sets only
	// Unsandboxed). Not on macOS.
	Unsandboxed      bool
	AllowUnsandboxed bool

	// Leaks is what hutch does with a secret found in a command's output
	// or in a file ReadFile reads: LeaksReport ("", the default) lists
	// it in Result.Leaks, LeaksRedact also replaces it in what the caller
	// receives, LeaksKill redacts it and kills the command, LeaksOff
	// scans nothing. Under every action but LeaksOff a command whose
	// arguments or environment hold a secret is refused before it starts
	// (*LeakError). Secrets are found by package leaks' rules (API keys,
	// tokens, private keys) and by the exact values of the host's
	// environment variables named like secrets (leaks.Scanner.AddEnv)
	// and of LeakValues, raw and URL-, base64- and hex-encoded. The
	// disabled mode (Unsandboxed) scans nothing.
	Leaks LeakAction
	// Denials says whether a command's refusals are recorded in
	// Result.Denials: DenialsRecord ("", the default) or DenialsOff.
	Denials DenialMode
	// Explain has hutch append to a command's stderr, after it ends, a
	// few lines naming what it was refused, by which rule, and how the
	// caller could allow each (the Result's Denials, summed up for the
	// agent's model). It needs Denials recorded.
	Explain bool

	// LeakValues are more of the host's own secrets (its API keys), by
	// name, each at least 8 bytes. They are never written out with the
	// policy (JSON, a durable process's record).
	LeakValues map[string]string `json:"-"`

	// Grantable is what a command of this Sandbox may be given on top of
	// this policy when it asks (Cmd.Grant): network, domains, more
	// writable trees, git writes. Commands get none of it unless they
	// ask; a Sandbox.Narrow for a sub-agent gets a part of it. Its
	// Writable trees must exist; a grant may also make writable again
	// what lies below the workspace, Writable and Home.
	Grantable Grant

	// SkipLayers are not set up at all, and reported as skipped in every
	// Result: for measuring what each layer costs, or for a host that
	// enforces the same thing by other means. Only LayerSeccomp,
	// LayerLoopback, LayerKeyring and LayerLandlock can be skipped.
	SkipLayers []Layer

	// Logger receives hutch's diagnostics: Debug for each Sandbox made and
	// each step worth tracing, Info for what every Result reports too (a
	// degraded layer, a shared network), said once per Sandbox, Warn for
	// failures reported nowhere else (a cgroup left behind). nil means
	// slog.Default(). It is not part of the sandbox's boundary. The spawn
	// server, shared by every Sandbox of the process, logs to
	// slog.Default().
	Logger *slog.Logger `json:"-"`
}

// logger is p.Logger, or slog.Default().
func (p *Policy) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// AppIsolation is Policy.Apps: the workspace's directory of app
// directories, <Workspace>/<Dir>/<id>, is hidden from the sandbox (an
// empty read-only directory in its place).
//
// An ordinary agent (ID empty) reaches no app's directory and the rest of
// the workspace as usual. An app agent (ID set) is confined to its app:
// of the whole workspace it reads only <Dir>/<ID> and writes only
// <Dir>/<ID>/data, as app platforms require of the agents they run. The
// workspace is then an empty read-only directory holding only the way down
// to <Dir>/<ID>; it stays the commands' default working directory, so
// that paths relative to it keep their meaning. The mount plan and
// Landlock's writable trees agree (<Dir>/<ID>/data instead of the
// workspace), and so does the file door. Deny names, Deny, ReadOnly and
// the git guards hold inside <Dir>/<ID>; outside the workspace nothing
// changes. A Writable path or Home elsewhere in the workspace is refused.
// Mounts enforce it, so level landlock refuses it.
type AppIsolation struct {
	// Dir is the directory of app directories, relative to the
	// workspace; "apps" when empty. Check makes it absolute, and takes
	// such an absolute path inside the workspace back.
	Dir string
	// ID is the app the sandbox runs as; empty for an ordinary agent,
	// which reaches no app directory.
	ID string
}

// clone returns p with every slice (and the seccomp profile) copied.
// Clone is a deep copy of p: changing its slices leaves p as it was.
func (p Policy) Clone() Policy { return p.clone() }

func (p Policy) clone() Policy {
	p.Writable = slices.Clone(p.Writable)
	p.AllowSystemWrite = slices.Clone(p.AllowSystemWrite)
	p.LeakValues = maps.Clone(p.LeakValues)
	p.ReadOnly = slices.Clone(p.ReadOnly)
	p.Read = slices.Clone(p.Read)
	p.Binds = slices.Clone(p.Binds)
	if p.Apps != nil {
		a := *p.Apps
		p.Apps = &a
	}
	p.Deny = slices.Clone(p.Deny)
	p.DenyNames = slices.Clone(p.DenyNames)
	p.Env = slices.Clone(p.Env)
	p.SeccompAllow = slices.Clone(p.SeccompAllow)
	p.SeccompDeny = slices.Clone(p.SeccompDeny)
	p.AllowDegraded = slices.Clone(p.AllowDegraded)
	p.SkipLayers = slices.Clone(p.SkipLayers)
	p.AllowDomains = slices.Clone(p.AllowDomains)
	p.PackageManagers = slices.Clone(p.PackageManagers)
	p.AllowLocal = slices.Clone(p.AllowLocal)
	p.Publish = slices.Clone(p.Publish)
	p.Reach = slices.Clone(p.Reach)
	p.Grantable.Domains = slices.Clone(p.Grantable.Domains)
	p.Grantable.PackageManagers = slices.Clone(p.Grantable.PackageManagers)
	p.Grantable.Writable = slices.Clone(p.Grantable.Writable)
	if p.Seccomp != nil {
		prof := *p.Seccomp
		prof.Syscalls = slices.Clone(prof.Syscalls)
		prof.Architectures = slices.Clone(prof.Architectures)
		p.Seccomp = &prof
	}
	return p
}

// DefaultOutputLimit is the output cap when Policy.OutputLimit is 0.
const DefaultOutputLimit = 10 << 20

// Unlimited, as the value of one of Policy's limits (Memory, Pids, CPUs,
// FileSize, TmpSize, OutputLimit, Timeout), means no limit at all; 0
// means hutch's default.
const Unlimited = -1

// Home is HOME inside the sandbox: a private directory in the private
// /tmp, fresh for every command.
const Home = "/tmp/home"

// DefaultDeny returns the host paths masked by default; "~" is the host
// user's home. Inside the workspace and the writable trees,
// DefaultDenyNames are masked as well. Each call returns a new slice: the
// defaults are not the caller's to change for every other Sandbox of the
// process.
func DefaultDeny() []string { return slices.Clone(defaultDeny) }

// defaultDeny is what DefaultDeny returns.
var defaultDeny = []string{
	"~/.ssh", "~/.gnupg", "~/.aws", "~/.kube", "~/.docker", "~/.netrc",
	"~/.git-credentials", "~/.config/gh",
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/security/opasswd",
	"/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh", "/etc/ssl/private",
}

// DefaultPolicy returns the policy hutch's CLI runs with: workspace
// writable, everything else read-only, DefaultDeny masked, no network.
func DefaultPolicy(workspace string) Policy {
	return Policy{
		Workspace:   workspace,
		Network:     NetworkNone,
		OutputLimit: DefaultOutputLimit,
		Leaks:       LeaksReport,
		// A fork bomb or a memory hog is everyday model output; neither
		// may take the host down. Half the host's memory, and processes
		// far beyond any build's needs.
		Memory: defaultMemory(),
		Pids:   DefaultPids,
		// Most hosts give an ordinary user no cgroups; rlimits are the
		// honest fallback there, and each Result names it. Landlock is
		// defense in depth under the namespaces, and kernels before 5.19
		// (Landlock ABI < 2) cannot carry it without breaking renames.
		AllowDegraded: []Layer{LayerCgroup, LayerLandlock},
	}
}

// DefaultPids is the process limit when Policy.Pids is 0.
const DefaultPids = 4096

// PolicyError is invalid input: which field, which value, and why. No
// process is started for a policy or command that fails validation.
type PolicyError struct {
	Field string
	// Value is the value refused, as the caller gave it (a number in the
	// field's own units); Error quotes it, escaping control characters.
	Value  string
	Reason string
}

// Error implements error.
func (e *PolicyError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("hutch: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("hutch: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Bounds of the numeric fields of a Policy. Below a minimum a limit means
// nothing the kernel would enforce as written (it rounds it, or no command
// can start under it); above a maximum it is a mistake of units, or past
// what the kernel accepts.
const (
	// maxSize bounds byte counts: no host has a petabyte of memory.
	maxSize = 1 << 50
	// minMemory is the least memory any command starts in.
	minMemory = 4 << 20
	// minTmpSize is one page: tmpfs sizes are whole pages.
	minTmpSize = 4096
	// minPids are the sandbox's init and the command itself.
	minPids = 2
	// maxPids is the kernel's PID_MAX_LIMIT; pids.max refuses more.
	maxPids = 1 << 22
	// minCPUs is the smallest CFS quota the kernel takes, 1 ms per
	// 100 ms period; less would be rounded up to it.
	minCPUs = 0.01
	maxCPUs = 4096
	// minTimeout catches a Duration given as a bare number: Timeout = 30
	// is 30 nanoseconds, not seconds (the error shows it as 30ns).
	minTimeout = time.Millisecond
	// maxPrewarm bounds Policy.Prewarm: each pooled init is a live process.
	maxPrewarm = 64
)

// checkLimits refuses the numeric fields of p that are out of range, and
// then puts hutch's default in for each limit left at 0. It runs before
// anything is probed or set up, so that a limit a layer then fails to
// apply is the host's failure, never the caller's value (which a
// degradable layer would otherwise swallow).
func checkLimits(p *Policy) error {
	if err := checkCPUs(p.CPUs); err != nil {
		return err
	}
	for _, f := range []struct {
		field    string
		v, least int64
		why      string
	}{
		{"Memory", p.Memory, minMemory, "no command starts in less"},
		{"TmpSize", p.TmpSize, minTmpSize, "tmpfs sizes are whole pages"},
		{"FileSize", p.FileSize, 0, ""},
		{"OutputLimit", p.OutputLimit, 0, ""},
	} {
		if err := checkSize(f.field, f.v, f.least, f.why); err != nil {
			return err
		}
	}
	switch pids := strconv.FormatInt(p.Pids, 10); {
	case p.Pids < 0 && p.Pids != Unlimited:
		return &PolicyError{Field: "Pids", Value: pids, Reason: negative}
	case p.Pids > 0 && p.Pids < minPids:
		return &PolicyError{Field: "Pids", Value: pids, Reason: fmt.Sprintf("below the minimum of %d: the sandbox's init and the command are two processes (a shell that runs one more program needs 3)", minPids)}
	case p.Pids > maxPids:
		return &PolicyError{Field: "Pids", Value: pids, Reason: fmt.Sprintf("above the kernel's limit of %d processes", maxPids)}
	}
	switch {
	case p.Timeout < 0 && p.Timeout != Unlimited:
		return &PolicyError{Field: "Timeout", Value: p.Timeout.String(), Reason: negative}
	case p.Timeout > 0 && p.Timeout < minTimeout:
		return &PolicyError{Field: "Timeout", Value: p.Timeout.String(), Reason: "below the minimum of 1ms"}
	}
	if p.Prewarm < 0 || p.Prewarm > maxPrewarm {
		return &PolicyError{Field: "Prewarm", Value: strconv.Itoa(p.Prewarm), Reason: fmt.Sprintf("must be 0-%d", maxPrewarm)}
	}
	if p.Memory == 0 {
		p.Memory = defaultMemory()
	}
	if p.Pids == 0 {
		p.Pids = DefaultPids
	}
	if p.OutputLimit == 0 {
		p.OutputLimit = DefaultOutputLimit
	}
	return nil
}

// negative is why a negative limit other than Unlimited is refused: a
// value computed wrong must not lift a limit.
const negative = "negative: Unlimited (-1) means no limit, 0 the default"

// enforced is a limit checked by checkLimits as the layers take it: 0 for
// none.
func enforced[T int64 | float64](v T) T { return max(v, 0) }

// checkCPUs refuses a CPU rate that is not a number of cores the kernel
// can enforce as given.
func checkCPUs(c float64) error {
	v := strconv.FormatFloat(c, 'g', -1, 64)
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0):
		return &PolicyError{Field: "CPUs", Value: v, Reason: "not a finite number of cores"}
	case c < 0 && c != Unlimited:
		return &PolicyError{Field: "CPUs", Value: v, Reason: negative}
	case c > 0 && c < minCPUs:
		return &PolicyError{Field: "CPUs", Value: v, Reason: fmt.Sprintf("below the minimum of %g cores, the smallest CPU quota the kernel enforces", minCPUs)}
	case c > maxCPUs:
		return &PolicyError{Field: "CPUs", Value: v, Reason: fmt.Sprintf("above %d cores", maxCPUs)}
	}
	return nil
}

// checkSize refuses a byte count that is negative (but not Unlimited),
// above maxSize, or positive but below least (why says why).
func checkSize(field string, v, least int64, why string) error {
	n := strconv.FormatInt(v, 10)
	switch {
	case v < 0 && v != Unlimited:
		return &PolicyError{Field: field, Value: n, Reason: negative}
	case v > maxSize:
		return &PolicyError{Field: field, Value: n, Reason: "above 1 PiB, more than any host has"}
	case v > 0 && v < least:
		return &PolicyError{Field: field, Value: n, Reason: fmt.Sprintf("below the minimum of %s: %s", units.FormatSize(least), why)}
	}
	return nil
}

// maxPath is PATH_MAX: longer paths are refused outright.
const maxPath = 4096

// pathFault says what makes p unusable as a path, whoever gives it (a
// policy field, a file operation): empty, longer than PATH_MAX, a NUL or
// another control character. "" when nothing does.
func pathFault(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > maxPath:
		return fmt.Sprintf("longer than %d bytes", maxPath)
	case strings.IndexByte(p, 0) >= 0:
		return "contains a NUL byte"
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "contains a control character"
	}
	return ""
}

// checkPath sanitizes a path given by the caller.
func checkPath(field, p string) error {
	why := pathFault(p)
	switch {
	case why == "":
		return nil
	case p == "":
		return &PolicyError{Field: field, Reason: why}
	case len(p) > maxPath:
		return &PolicyError{Field: field, Value: p[:64] + "...", Reason: why}
	}
	return &PolicyError{Field: field, Value: p, Reason: why}
}

// lexical is p made absolute against base, without resolving anything.
func lexical(p, base string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// resolve makes p absolute (relative to base) and resolves symlinks in the
// part of it that exists, so that masks and binds name the real file
// (mounts.Resolve).
func resolve(p, base string) string { return mounts.Resolve(p, base) }

// workDir resolves dir, a command's working directory, on the host: empty
// means the workspace ws, a relative path is taken against it, and
// symlinks are followed. The result must lie in ws or one of the writable
// trees (both resolved already): anywhere else the command would start
// where the policy gives it nothing to do, and a symlink planted in the
// workspace (sub -> /etc) would choose that place for the next caller.
func workDir(dir, ws string, writable []string) (string, error) {
	if dir == "" {
		return ws, nil
	}
	if err := checkPath("Cmd.Dir", dir); err != nil {
		return "", err
	}
	abs := dir
	if !filepath.IsAbs(abs) {
		abs = ws + "/" + dir
	}
	// EvalSymlinks takes ".." after a symlink as chdir would (in/.. is
	// the link target's parent); resolve, for a directory not there
	// (yet), cleans first.
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		r = resolve(dir, ws)
	}
	for _, root := range append([]string{ws}, writable...) {
		if mounts.Within(r, root) {
			return r, nil
		}
	}
	where := r
	if lex := lexical(dir, ws); lex != r {
		where = lex + ", which resolves to " + r + ","
	}
	return "", &PolicyError{Field: "Cmd.Dir", Value: dir, Reason: "points to " + where + " outside the workspace " + ws + " and the writable paths"}
}

// cwdRefused are the trees a command's working directory may not lie
// in, however its chdir got there: the kernel's interfaces of its own
// /proc and /dev, where a symlink swapped in after workDir's check (which
// keeps Dir in the workspace and the writable trees) would have it start.
// The init compares where its chdir landed with them (nsinit.Command).
var cwdRefused = []string{"/proc", "/dev"}

// hostHome is the home directory "~" stands for in deny paths.
func hostHome() string {
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return h
	}
	return ""
}

// mergeEnv returns base with over's keys replacing or added.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}
