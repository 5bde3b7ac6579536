//go:build linux

package runtime

import (
	"github.com/hutchbox/hutch/internal/hostprobe"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/internal/treewatch"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/leaks"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/spawn"
)

// machine is what a Linux Sandbox holds besides its policy: what was
// decided of the host (the level, the view, the compiled filters and
// ruleset) and what was started for its commands (the spawn server's
// spare, the pool, the cgroups, the file door's server).
type machine struct {
	grantState
	reloadState
	spec mounts.Spec // the view, minus what is re-read per command
	// names are the deny names in effect; trees keeps what matches them
	// in the writable trees, and their repositories, in step with the
	// trees (read as of now for every command: scanFresh).
	names []string
	trees *treewatch.Trees
	// denyGiven are spec.Deny's entries as written, the first
	// denyDefaults of them DefaultDeny's (Explain names them); checked is
	// what the trees held when New or Check decided (Resolved.Explain).
	denyGiven    []string
	denyDefaults int
	checked      fresh

	env []string // the base environment of every command
	// leaks scans arguments, environment, output and reads (Policy.Leaks);
	// nil for LeaksOff.
	leaks    *leaks.Scanner
	uid, gid int
	// initSetpcap: at LevelLandlock, the init holds CAP_SETPCAP (see
	// initHoldsSetpcap); read once, it is this process's.
	initSetpcap bool
	// filter is the compiled system-call filter, loaded by every init;
	// filterName says which profile it is, for results.
	filter     []byte
	filterName string
	// modeWall is seccomp.ModeWall compiled, for a profile of the caller's
	// own or the default with SeccompAllow.
	modeWall []byte
	// pool holds prewarmed inits when Policy.Prewarm > 0.
	pool *pool
	// withdraw takes back the spawn server's Prepare for this Sandbox's
	// kind of init (nil if it made none): Close calls it first, so that
	// the end of its last command clones no spare that nobody will take.
	withdraw func()

	// limits go into a cgroup per command when cgroups is set; rlimits
	// are set in every init (the fallback for limits without cgroups,
	// and the per-process limits cgroups do not have).
	limits     cgroups.Limits
	cgroups    *cgroups.Manager
	cgroupSkip string // why limits are not in a cgroup, when they are not
	rlimits    []cgroups.Rlimit
	// cgroupUnenforced is what the probe group could not enforce
	// (Group.Unenforced), for Results of commands without a group.
	cgroupUnenforced []string
	// probeGroup is that group, kept for the first init rather than
	// removed (one group made and removed less per Sandbox: hutch run's
	// has one init); Close removes it if no init took it.
	probeGroup atomic.Pointer[cgroups.Group]

	// landlock is the ruleset every init restricts its forking thread to;
	// landlockSkip says why there is none, when there is none.
	landlock     *landlock.Ruleset
	landlockSkip string

	// files is the file door's server, an init kept while what it was
	// built from is current.
	files fileDoor
	// fileSpawn starts the file door's servers: through the spawn
	// server, whose spare makes a Sandbox's first file call cost a
	// message (New); or from this process (spawn.Direct), when nothing
	// else would start the spawn server (NewFiles: hutch read).
	fileSpawn spawner
	// plans keeps the last init's plan for the next one.
	plans planMemo
	// rulesets holds the next cold init's Landlock ruleset, begun once
	// a command has ended (see rulesetAhead).
	rulesets rulesetAhead

	// netRules is the parsed allow-list of Network "allow".
	netRules *netns.Rules
	// pub holds the published ports' host listeners (Policy.Publish) of
	// a Sandbox made by New or NewResolved; nil without any.
	pub *publisher

	// unixWall is seccomp.UnixWall compiled, for inits whose Landlock
	// cannot guard unix sockets; nil when the layer is skipped or there
	// are no namespaces (LevelLandlock refuses socket(2) altogether).
	unixWall []byte
	// notify are the notifying forms of filter, for Policy.Denials; nil
	// when nothing is recorded.
	notify *notifyFilters

	levelState

	// life is read-held by each Start while it sets a command up, and
	// write-held by Close: a Sandbox is not torn down under a command
	// being started, and after Close nothing starts.
	life   sync.RWMutex
	closed bool
	// endings are the teardowns of ended commands (ending) still running,
	// which Close waits for. Added to under life's read lock while open.
	endings sync.WaitGroup
}

// resolvedSandbox is the Sandbox of resolved policy r, before the host is
// probed. It owns its copy (resolvePolicy made it): a caller changing its
// slices afterwards must not change what later commands get.
func resolvedSandbox(r resolved) *Sandbox {
	return &Sandbox{policy: r.policy, machine: machine{names: r.names, denyGiven: r.denyGiven, denyDefaults: r.defaults, netRules: r.rules, leaks: r.leaks, uid: os.Getuid(), gid: os.Getgid()}}
}

// New validates p and probes the host once. Every later Command reuses
// the result. It decides what Check decides, then acts on it: it starts
// the spawn server and a spare init, and makes what the level needs on
// the host (the probe cgroup, a private temporary directory, the pool).
func New(p Policy) (*Sandbox, error) { return newSandbox(p, true, "") }

// NewFiles is New for a caller that uses only the file operations
// (ReadFile, WriteFile, ReadDir, Stat, OpenForSend), such as hutch read:
// it starts nothing ahead for commands (no spawn server, no spare init,
// no pool of Policy.Prewarm), and its file door starts its file server
// from this process (spawn.Direct) instead of through the spawn server.
// A command started on it still runs, through a spawn server started
// then.
func NewFiles(p Policy) (*Sandbox, error) { return newSandbox(p, false, "") }

// NewResolved makes the Sandbox of a decision taken before, perhaps by
// another process (r read from its JSON form): New of r's policy, at r's
// level. A host that now offers another level than the one r was decided
// at gets a *LevelError, found before anything is made but the spawn
// server New starts beside its decision: the decision is carried whole or
// not at all.
func NewResolved(r *Resolved) (*Sandbox, error) { return newSandbox(r.policy, true, r.level) }

// newSandbox is New, and with commands false NewFiles; a level other
// than "" is the one the decision must come to (NewResolved).
func newSandbox(p Policy, commands bool, level Level) (*Sandbox, error) {
	// Every level here builds its commands' inits through the spawn
	// server: its start runs beside the rest of the decision and the
	// first command's setup (about 5 ms for a hutch run) instead of after
	// them.
	var prestart func()
	if commands {
		prestart = spawn.Default().Prestart
	}
	sb, err := decide(p, prestart)
	if err == nil && level != "" && sb.level != level {
		sb.closeTrees()
		return nil, &LevelError{Need: level, Have: sb.level, Reasons: []string{"the host offers another level than when the policy was checked"}}
	}
	if err != nil || sb.policy.Unsandboxed { // or Backend none
		return sb, err
	}
	sb.fileSpawn = spawn.Default().Spawn
	if !commands {
		sb.fileSpawn = spawn.Direct
	}
	if flags := sb.cloneflags(); flags != 0 && commands && sb.policy.Prewarm == 0 {
		// Its namespaces made ahead, an init waits in the server for this
		// Sandbox's next command (the latest Sandbox not closed wins).
		// A Sandbox with a pool keeps none: its pool holds its inits
		// made ahead, refilled once its commands leave the CPU free
		// (refillSettle), while a spare is cloned as each init ends,
		// which is when a command issued right after it starts: the
		// clone (its namespaces made, a network namespace's the most)
		// took as much CPU as that command's own start, and doubled it
		// on two cores (a pooled command right after another, p50 1.68
		// ms with a spare, 1.39 without; bare 0.83).
		sb.withdraw = spawn.Default().Prepare(spawn.Ahead{Cloneflags: flags, UID: sb.uid, GID: sb.gid})
	}
	// Everything is checked. What follows changes the host, and what it
	// made is removed again when a later step fails.
	if commands {
		err = sb.publish()
	}
	if err == nil {
		err = sb.setup(commands)
	}
	if err != nil {
		sb.closePublished()
		if sb.withdraw != nil {
			sb.withdraw()
		}
		if sb.tmpDir != "" {
			os.RemoveAll(sb.tmpDir)
		}
		sb.dropProbeGroup()
		sb.closeTrees()
		return nil, err
	}
	return sb, nil
}

// decide is everything New decides, in order, and nothing it does: the
// caller's input by the rules every platform shares, the grants' ceiling,
// the level (from what the host offers: the filesystem view, the filter
// and the Landlock ruleset depend on it), and what the writable trees hold
// now. Once the input is known to be good it calls inputGood (New starts
// the spawn server there). The Sandbox it returns watches its trees; it
// has started nothing else.
func decide(p Policy, inputGood func()) (*Sandbox, error) {
	r, err := resolvePolicy(p, linuxRules())
	if err != nil {
		return nil, err
	}
	sb := resolvedSandbox(r)
	if err := sb.setupGrants(p, r.policy); err != nil {
		return nil, err
	}
	if sb.policy.Unsandboxed { // or Backend none
		return sb.unsandboxed()
	}
	if inputGood != nil {
		inputGood()
	}
	if err := sb.chooseLevel(); err != nil {
		return nil, err
	}
	if err := sb.validate(r); err != nil {
		sb.closeTrees()
		return nil, err
	}
	return sb, nil
}

// Check decides what New would decide for p, and does nothing New does
// after that: it resolves and validates p by the same rules (paths, the
// deny-list and names, the environment, leaks, the network, the grants'
// ceiling, the backend), chooses the level from what the host offers, and
// counts what the writable trees hold, reading the file system and the
// kernel's settings. It starts no process, makes no cgroup, mount or file,
// and keeps nothing open. Its error is New's.
//
// Use it to validate a policy, or to show one, without paying for a
// Sandbox (hutch policy check and show, hutch process start).
//
// A policy whose Backend is BackendOCI, which New refuses, is checked
// for an OCI runtime, which makes the namespaces itself: by the same
// rules at LevelNamespaces, whatever this host offers, for package oci
// to compile.
func Check(p Policy) (*Resolved, error) {
	if p.Backend == BackendOCI {
		return checkOCI(p)
	}
	sb, err := decide(p, nil)
	if err != nil {
		return nil, err
	}
	sb.closeTrees()
	r := sb.resolved()
	r.explain = sb.explainer(sb.checked)
	return r, nil
}

// resolved is the decision sb holds, as Check gives it.
func (sb *Sandbox) resolved() *Resolved {
	ws, writable := sb.spec.Workspace, sb.spec.Writable
	if sb.policy.Unsandboxed {
		ws, writable = sb.policy.Workspace, sb.policy.Writable
	}
	return &Resolved{policy: sb.policy.clone(), level: sb.level, levelReasons: slices.Clone(sb.levelReasons), workspace: ws, writable: slices.Clone(writable)}
}

// closeTrees stops watching the writable trees.
func (sb *Sandbox) closeTrees() {
	if sb.trees != nil {
		sb.trees.Close()
	}
}

// setup prepares what the checked policy needs on the host: the limits'
// enforcement, LevelLandlock's private temporary directory, the
// environment, the Landlock ruleset, and for commands the pool.
func (sb *Sandbox) setup(commands bool) error {
	if err := sb.setupLimits(); err != nil {
		return err
	}
	if sb.level == LevelLandlock {
		if err := sb.makeLandlockTmp(); err != nil {
			return err
		}
		sb.initSetpcap = initHoldsSetpcap()
	}
	sb.setupEnv()
	if err := sb.setupLandlock(); err != nil {
		return err
	}
	if sb.policy.Prewarm > 0 && commands {
		sb.pool = newPool(sb, sb.policy.Prewarm)
	}
	sb.policy.logger().Debug("hutch: sandbox ready", "workspace", sb.policy.Workspace, "level", sb.level,
		"cgroups", sb.cgroups != nil, "landlock", sb.landlock != nil, "network", sb.policy.Network)
	return nil
}

// Policy returns the validated policy, with paths as resolved.
func (sb *Sandbox) Policy() Policy { return sb.inEffect().policy.clone() }

// WorkDir resolves dir as a command's Cmd.Dir: "" is the workspace, a
// relative path is taken against it, symlinks are followed, and the
// result must lie in the workspace or a writable tree, else a
// *PolicyError names Cmd.Dir. For a runner that checks a working
// directory before it starts anything, as Start does.
func (sb *Sandbox) WorkDir(dir string) (string, error) {
	cur := sb.inEffect()
	return workDir(dir, cur.spec.Workspace, cur.spec.Writable)
}

// probeUserNS checks from the host's sysctls, without starting a process,
// that user namespaces can be created.
func probeUserNS(uid int) error {
	if gap := hostprobe.UserNS(uid); gap != nil {
		return &LayerError{Layer: LayerUserNS, Reason: gap.Reason, Remedy: gap.Remedy}
	}
	return nil
}

// namespaces the init is cloned into, in the order they are reported,
// each with the clone(2) flag that makes it: the one list both the
// clone and the Result's layers come from.
var namespaces = []struct {
	layer Layer
	flag  uintptr
}{
	{LayerUserNS, unix.CLONE_NEWUSER},
	{LayerMountNS, unix.CLONE_NEWNS},
	{LayerPidNS, unix.CLONE_NEWPID},
	{LayerNetNS, unix.CLONE_NEWNET},
	{LayerIPCNS, unix.CLONE_NEWIPC},
	{LayerUTSNS, unix.CLONE_NEWUTS},
	{LayerCgroupNS, unix.CLONE_NEWCGROUP},
}

// namespaceLayers are the namespaces a Sandbox's commands get: all of
// them, all but the network's with NetworkHost, none at LevelLandlock.
func (sb *Sandbox) namespaceLayers() []Layer {
	if sb.level == LevelLandlock {
		return nil
	}
	var out []Layer
	for _, ns := range namespaces {
		if ns.layer != LayerNetNS || sb.policy.Network != NetworkHost {
			out = append(out, ns.layer)
		}
	}
	return out
}

// cloneflags are the CLONE_NEW* flags of namespaceLayers.
func (sb *Sandbox) cloneflags() uintptr {
	var flags uintptr
	for _, ns := range namespaces {
		if slices.Contains(sb.namespaceLayers(), ns.layer) {
			flags |= ns.flag
		}
	}
	return flags
}

// config is an init's sandbox configuration.
func (sb *Sandbox) config(f fresh) nsinit.Config {
	if sb.level == LevelLandlock {
		// The host's namespaces: no mounts, no hostname, no loopback,
		// and the host's credentials, with which the init may hold no
		// capability at all.
		return nsinit.Config{
			Unprivileged: !sb.initSetpcap,
			Mounts:       mounts.Plan{},
			Degradable:   sb.policy.AllowDegraded,
			Seccomp:      sb.filter,
			ModeWall:     sb.modeWall,
			Skip:         sb.policy.SkipLayers,
			Rlimits:      sb.rlimits,
			Landlock:     sb.landlock,
			HostRuleset:  true,
		}
	}
	var egress *nsinit.Egress
	if sb.policy.Network == NetworkAllow {
		egress = &nsinit.Egress{Port: egressPort}
	}
	var wall *nsinit.UnixWall
	// Sent even when the policy skips the layer (no filter then): the
	// init reports the skip like any other.
	if sb.unixWall != nil || slices.Contains(sb.policy.SkipLayers, LayerUnixSockets) {
		wall = &nsinit.UnixWall{
			Filter:  sb.unixWall,
			Allowed: append(sb.spec.WritableView(), "/tmp", "/dev/shm"),
		}
	}
	return nsinit.Config{
		Mounts:     sb.plan(f),
		Hostname:   sandboxHostname,
		Namespaces: sb.namespaceLayers(),
		Egress:     egress,
		Ingress:    len(sb.policy.Publish) > 0,
		Reach:      sb.reachPorts(),
		Degradable: sb.policy.AllowDegraded,
		Seccomp:    sb.filter,
		ModeWall:   sb.modeWall,
		Skip:       sb.policy.SkipLayers,
		Rlimits:    sb.rlimits,
		Landlock:   sb.landlock,
		UnixWall:   wall,
		Denials:    sb.notify.config(),
		UserCounts: sb.userCounts(),
		// The rules on the host's own files (the carve-out's hundreds)
		// from files kept open between spawns, not opened by each init.
		HostRuleset: true,
	}
}

// userCountShare is the share of its host user's per-user kernel counts
// one sandbox may take: the kernel charges what a sandbox uses to its
// host user too, so a command holding every inotify instance it can get
// would leave the host user's editors, file watchers and the agent itself
// without one.
const userCountShare = 4

// sharedCounts are the /proc/sys/user counts a sandbox's user namespace
// caps to a share of its host user's.
var sharedCounts = []string{"max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks"}

// nestedCounts are the namespace counts a sandbox's user namespace caps
// too when its commands may make namespaces (Policy.AllowNested): each
// one the command makes is charged to the host user as well, who could
// otherwise be left without any (hutch itself included).
var nestedCounts = []string{"max_user_namespaces", "max_pid_namespaces", "max_net_namespaces", "max_mnt_namespaces",
	"max_ipc_namespaces", "max_uts_namespaces", "max_cgroup_namespaces"}

// userCounts are the limits each of sb's inits writes in its user
// namespace.
func (sb *Sandbox) userCounts() map[string]uint64 {
	if !sb.policy.AllowNested {
		return sharedCountLimits()
	}
	out := maps.Clone(sharedCountLimits())
	maps.Copy(out, nestedCountLimits())
	return out
}

// sharedCountLimits and nestedCountLimits are a userCountShare-th of this
// process's own counts, read once.
var (
	sharedCountLimits = sync.OnceValue(func() map[string]uint64 { return countShares(sharedCounts) })
	nestedCountLimits = sync.OnceValue(func() map[string]uint64 { return countShares(nestedCounts) })
)

// countShares maps each of the /proc/sys/user counts names to a
// userCountShare-th of this process's own (a count this kernel lacks is
// left out).
func countShares(names []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range names {
		b, err := os.ReadFile("/proc/sys/user/" + n)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			continue
		}
		out[n] = max(1, min(v, 1<<31-1)/userCountShare)
	}
	return out
}

// initHoldsSetpcap reports whether an init in the host's user namespace
// (LevelLandlock) holds CAP_SETPCAP, which emptying its bounding set and
// locking its securebits need. The init is a child of the zygote, this
// binary started again: as root it holds the bounding set, otherwise only
// what this process passes on as ambient capabilities.
func initHoldsSetpcap() bool {
	if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SETPCAP, 0, 0, 0); err != nil || in != 1 {
		return false
	}
	if os.Geteuid() == 0 {
		return true
	}
	amb, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, unix.CAP_SETPCAP, 0, 0)
	return err == nil && amb == 1
}
