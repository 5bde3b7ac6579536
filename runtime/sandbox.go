//go:build linux

package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/seccomp"
)

// Sandbox is a validated Policy plus what was learned about the host, ready
// to run commands. It is safe for concurrent use by many goroutines.
type Sandbox struct {
	policy Policy
	spec   mounts.Spec // the view, minus what is re-read per command
	// names are the deny names in effect; deep are the paths matching
	// them found below the top level of the writable trees when the
	// Sandbox was made (the top levels are re-read for every command).
	names []string
	deep  named
	// deepRepos are the git repositories below the top level of the
	// writable trees when the Sandbox was made (the top levels are
	// re-read for every command).
	deepRepos []gitRepo
	env       []string // the base environment of every command
	uid, gid  int
	// filter is the compiled system-call filter, loaded by every init;
	// filterName says which profile it is, for results.
	filter     []byte
	filterName string
	// modeWall is seccomp.ModeWall compiled, for a profile of the caller's
	// own or the default with SeccompAllow.
	modeWall []byte
	// pool holds prewarmed inits when Policy.Prewarm > 0.
	pool *pool

	// limits go into a cgroup per command when cgroups is set; rlimits
	// are set in every init (the fallback for limits without cgroups,
	// and the per-process limits cgroups do not have).
	limits     cgroups.Limits
	cgroups    *cgroups.Manager
	cgroupSkip string // why limits are not in a cgroup, when they are not
	rlimits    []cgroups.Rlimit

	// landlock is the ruleset every init restricts its forking thread to;
	// landlockSkip says why there is none, when there is none.
	landlock     *landlock.Ruleset
	landlockSkip string

	// netRules is the parsed allow-list of Network "allow".
	netRules *netns.Rules

	// unixWall is seccomp.UnixWall compiled, for inits whose Landlock
	// cannot guard unix sockets; nil when the layer is skipped or there
	// are no namespaces (LevelLandlock refuses socket(2) altogether).
	unixWall []byte

	levelState
}

var (
	managerOnce sync.Once
	manager     *cgroups.Manager
	managerErr  error
)

// cgroupManager is the process's cgroup manager, made on first use.
func cgroupManager() (*cgroups.Manager, error) {
	managerOnce.Do(func() { manager, managerErr = cgroups.NewManager() })
	return manager, managerErr
}

// setupLimits decides, once per Sandbox, how the policy's limits are
// enforced: a cgroup per command, or (if the policy allows degrading)
// rlimits. It also sweeps groups a crashed host left behind. The limits
// are the caller's validated values, so a group that cannot be made is
// the host's failure: only that may degrade.
func (sb *Sandbox) setupLimits() error {
	p := &sb.policy
	sb.limits = cgroups.Limits{MemoryBytes: p.Memory, Pids: p.Pids, CPUs: p.CPUs, FileSizeBytes: p.FileSize}
	// checkLimits vetted the values already; should the two ever disagree,
	// the caller's value is still refused, never degraded to rlimits.
	if err := sb.limits.Validate(); err != nil {
		return &PolicyError{Field: "Memory, Pids, CPUs or FileSize", Reason: err.Error()}
	}
	// Core dumps and file-size and fd caps are per process in any case.
	base := cgroups.Rlimits(cgroups.Limits{FileSizeBytes: p.FileSize})
	if p.Memory == 0 && p.Pids == 0 && p.CPUs == 0 {
		sb.rlimits = base
		return nil
	}
	m, err := cgroupManager()
	if err == nil {
		if _, err = m.Sweep(); err != nil {
			slog.Debug("hutch: cgroup sweep", "err", err)
		}
		// One throwaway group proves the limits can be applied here.
		var g *cgroups.Group
		if g, err = m.Create(sb.limits); err == nil {
			_ = g.Destroy()
			sb.cgroups, sb.rlimits = m, base
			return nil
		}
	}
	if !slices.Contains(p.AllowDegraded, LayerCgroup) {
		return &LayerError{Layer: LayerCgroup, Reason: err.Error(), Remedy: "run as root, delegate a cgroup v2 subtree (systemd Delegate=yes), or allow degrading to rlimits"}
	}
	sb.cgroupSkip = "cgroups unavailable, limits are per-process rlimits: " + err.Error()
	sb.rlimits = cgroups.Rlimits(sb.limits)
	return nil
}

// minLandlockABI is the oldest Landlock ABI hutch enforces inside the
// namespaces: ABI 1 has no REFER right, so every rename or link across
// directories would fail (EXDEV) whatever the rules.
const minLandlockABI = 2

// setupLandlock builds, once per Sandbox, the Landlock ruleset of the view
// the mounts make: the new root readable except the deny-list outside the
// writable trees, the writable trees and the private /tmp and /dev/shm
// writable, /dev usable, abstract sockets and signals scoped. Carving the
// deny-list out of the root means a rule per entry of every directory above
// a denied path (/etc above all), paid per spawn (BenchmarkLandlockCost):
// it is what keeps a denied path denied when the host replaces it during a
// run.
func (sb *Sandbox) setupLandlock() error {
	if sb.level == LevelLandlock {
		return sb.setupLandlockOnly(landlock.ABI())
	}
	if slices.Contains(sb.policy.SkipLayers, LayerLandlock) {
		sb.landlockSkip = "skipped by policy"
		return nil
	}
	abi := landlock.ABI()
	if abi < minLandlockABI {
		reason := fmt.Sprintf("the kernel's Landlock ABI is %d, hutch needs %d (Linux 5.19+ with landlock in the lsm= list)", abi, minLandlockABI)
		if !slices.Contains(sb.policy.AllowDegraded, LayerLandlock) {
			return &LayerError{Layer: LayerLandlock, Reason: reason, Remedy: "boot a kernel with Landlock enabled (lsm=landlock,...), or allow degrading the landlock layer"}
		}
		sb.landlockSkip = reason
		return nil
	}
	writable := append([]string{sb.spec.Workspace}, sb.spec.Writable...)
	rs, err := landlock.Build(landlock.Spec{
		ReadOnly: []string{"/"},
		Writable: append(writable, "/tmp", "/dev/shm"),
		Devices:  []string{"/dev"},
		// A mask covers the inode that was there when the command
		// started; a denied path the host replaces by rename (an editor
		// saving ~/.netrc) or creates during the run (a first ~/.aws)
		// is not under it. Landlock carves the denied paths out of the
		// readable root by path: in each directory on the way every
		// other entry is granted on its own, so a name that appears
		// there later has no rule. Inside the writable trees masks and
		// pins keep the deny-list (carving there would leave new files
		// unreadable).
		Deny:  sb.carvable(sb.spec.Deny),
		Scope: true,
	}, abi)
	if err != nil {
		return &LayerError{Layer: LayerLandlock, Reason: err.Error()}
	}
	sb.landlock = &rs
	return nil
}

// carvable are the denied paths Landlock keeps by path: not inside a
// writable tree (new files there must stay readable, so masks and pins keep
// those) nor under a mount of the view's own (/tmp, /dev, /proc, the hidden
// directories), where the host's directory is not what the command sees.
func (sb *Sandbox) carvable(deny []string) []string {
	own := append(append([]string{sb.spec.Workspace, "/tmp", "/dev", "/proc"}, sb.spec.Writable...), sb.spec.HideDirs...)
	var out []string
	for _, d := range deny {
		if !slices.ContainsFunc(own, func(o string) bool { return mounts.Within(d, o) }) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// setupLandlockOnly builds the ruleset of LevelLandlock, where Landlock is
// the filesystem boundary itself: it can be neither skipped nor degraded.
func (sb *Sandbox) setupLandlockOnly(abi int) error {
	if slices.Contains(sb.policy.SkipLayers, LayerLandlock) {
		return &PolicyError{Field: "SkipLayers", Value: string(LayerLandlock), Reason: "at level landlock, Landlock is the only filesystem boundary"}
	}
	tmp, err := sb.landlockTmp()
	if err != nil {
		return &SetupError{Layer: LayerLandlock, Op: "make a private temporary directory", Err: err}
	}
	f, err := sb.readFresh()
	if err != nil {
		return err
	}
	deny := append(slices.Clone(sb.spec.Deny), sb.deep.paths...)
	deny = append(deny, f.named.paths...)
	rs, err := landlock.Build(landlock.Spec{
		ReadOnly:    []string{"/"},
		Writable:    append(append([]string{sb.spec.Workspace}, sb.spec.Writable...), tmp),
		Devices:     []string{"/dev"},
		Deny:        deny,
		RestrictTCP: true,
		Scope:       true,
	}, abi)
	if err != nil {
		return &LayerError{Layer: LayerLandlock, Reason: err.Error()}
	}
	sb.landlock = &rs
	return nil
}

// hiddenDirs are replaced by an empty read-only directory in every view:
// they hold the host's unix sockets (systemd, dbus, docker, the user's
// session bus and agents), and a read-only bind does not stop connect().
var hiddenDirs = []string{"/run", "/var/run"}

// New validates p and probes the host once. Every later Command reuses
// the result.
func New(p Policy) (*Sandbox, error) {
	// The Sandbox owns its copy: a caller changing its slices afterwards
	// must not change what later commands get.
	sb := &Sandbox{policy: p.clone(), uid: os.Getuid(), gid: os.Getgid()}
	// Numbers before anything is probed: a layer that then fails to apply
	// a limit fails for the host's reasons, not the caller's value.
	if err := checkLimits(&sb.policy); err != nil {
		return nil, err
	}
	// The level first: the filesystem view, the filter and the Landlock
	// ruleset depend on it.
	if err := sb.chooseLevel(); err != nil {
		return nil, err
	}
	if err := sb.validate(); err != nil {
		return nil, err
	}
	if err := sb.setupNetwork(); err != nil {
		return nil, err
	}
	if err := sb.setupLimits(); err != nil {
		return nil, err
	}
	if err := sb.setupLandlock(); err != nil {
		return nil, err
	}
	if sb.policy.Prewarm > 0 {
		sb.pool = newPool(sb, sb.policy.Prewarm)
	}
	return sb, nil
}

// Policy returns the validated policy, with paths as resolved.
func (sb *Sandbox) Policy() Policy { return sb.policy.clone() }

func (sb *Sandbox) validate() error {
	p := &sb.policy
	if p.Workspace == "" {
		return &PolicyError{Field: "Workspace", Reason: "required"}
	}
	if err := checkPath("Workspace", p.Workspace); err != nil {
		return err
	}
	if !filepath.IsAbs(p.Workspace) {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "must be an absolute path"}
	}
	ws, err := filepath.EvalSymlinks(p.Workspace)
	if err != nil {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "does not exist"}
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "not a directory"}
	}
	if err := checkWritableTree("Workspace", p.Workspace, filepath.Clean(p.Workspace), ws); err != nil {
		return err
	}
	p.Workspace = ws

	home := hostHome()
	// A writable home is a writable ~/.bashrc, ~/.profile, ~/.ssh (if it
	// does not exist yet: a mask needs something to cover) and autostart
	// directories: code that runs on the host at the user's next login.
	if home != "" && mounts.Within(resolve(home, "/"), ws) {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "contains the home directory " + home + "; use a project directory"}
	}
	var deny []string
	if !p.NoDefaultDeny {
		for _, d := range DefaultDeny {
			if rest, ok := strings.CutPrefix(d, "~/"); ok {
				if home == "" {
					continue
				}
				d = filepath.Join(home, rest)
			}
			deny = append(deny, resolve(d, ws))
		}
	}
	for i, d := range p.Deny {
		field := fmt.Sprintf("Deny[%d]", i)
		if err := checkPath(field, d); err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(d, "~/"); ok && home != "" {
			d = filepath.Join(home, rest)
		}
		r := resolve(d, ws)
		if lex := lexical(d, ws); lex != r && mounts.Within(lex, ws) && !mounts.Within(r, ws) {
			return &PolicyError{Field: field, Value: d, Reason: "resolves through a symlink in the workspace to " + r}
		}
		if r == "/" || mounts.Within(ws, r) {
			return &PolicyError{Field: field, Value: d, Reason: "would mask the workspace itself"}
		}
		deny = append(deny, r)
		p.Deny[i] = r
	}
	for _, d := range deny {
		if mounts.Within(ws, d) {
			return &PolicyError{Field: "Workspace", Value: ws, Reason: "lies under the denied path " + d}
		}
	}

	var writable []string
	for i, w := range p.Writable {
		field := fmt.Sprintf("Writable[%d]", i)
		if err := checkPath(field, w); err != nil {
			return err
		}
		r := resolve(w, ws)
		// The workspace (and every writable tree) is the command's to
		// change: a symlink planted there must not turn a writable path
		// into one outside it.
		lex := lexical(w, ws)
		for _, root := range append([]string{ws}, writable...) {
			if mounts.Within(lex, root) && !mounts.Within(r, root) {
				return &PolicyError{Field: field, Value: w, Reason: "resolves through a symlink in writable " + root + " to " + r}
			}
		}
		if err := checkWritableTree(field, w, lex, r); err != nil {
			return err
		}
		if _, err := os.Stat(r); err != nil {
			return &PolicyError{Field: field, Value: w, Reason: "does not exist"}
		}
		if home != "" && mounts.Within(resolve(home, "/"), r) {
			return &PolicyError{Field: field, Value: w, Reason: "contains the home directory " + home}
		}
		for _, d := range deny {
			if mounts.Within(r, d) {
				return &PolicyError{Field: field, Value: w, Reason: "lies under the denied path " + d}
			}
		}
		writable = append(writable, r)
		p.Writable[i] = r
	}

	if err := checkEnv("Env", p.Env); err != nil {
		return err
	}
	if p.Tools != "" {
		if err := checkPath("Tools", p.Tools); err != nil {
			return err
		}
		if !filepath.IsAbs(p.Tools) {
			return &PolicyError{Field: "Tools", Value: p.Tools, Reason: "must be an absolute path"}
		}
		if fi, err := os.Stat(p.Tools); err != nil || !fi.IsDir() {
			return &PolicyError{Field: "Tools", Value: p.Tools, Reason: "not an existing directory"}
		}
	}
	for i, l := range p.SkipLayers {
		if !slices.Contains(skippable, l) {
			return &PolicyError{Field: fmt.Sprintf("SkipLayers[%d]", i), Value: string(l), Reason: "not a layer that can be skipped (one of " + fmt.Sprint(skippable) + ")"}
		}
	}
	for i, l := range p.AllowDegraded {
		if !slices.Contains(degradable, l) {
			return &PolicyError{Field: fmt.Sprintf("AllowDegraded[%d]", i), Value: string(l), Reason: "not a layer that can degrade (one of " + fmt.Sprint(degradable) + ")"}
		}
	}

	if err := checkDenyNames(p.DenyNames); err != nil {
		return err
	}
	sb.names = denyNames(p)

	sb.spec = mounts.Spec{
		Workspace:    ws,
		Writable:     writable,
		Deny:         deny,
		Home:         Home,
		TmpSizeBytes: p.TmpSize,
		HideDirs:     resolveAll(hiddenDirs),
		NoProc:       sb.level == LevelNamespacesNoProc,
	}
	if sb.level == LevelLandlock {
		tmp, err := sb.landlockTmp()
		if err != nil {
			return &SetupError{Layer: LayerLandlock, Op: "make a private temporary directory", Err: err}
		}
		sb.env = mergeEnv(baseEnvAt(p, filepath.Join(tmp, "home")), []string{"TMPDIR=" + tmp})
		sb.env = mergeEnv(sb.env, p.Env)
	} else {
		sb.env = baseEnv(p)
	}
	// The names below the top levels are looked for once; the whole
	// count, with the top levels as they are now, is bounded here too,
	// so that New refuses what every command would.
	sb.deep, sb.deepRepos = scanDeep(sb.roots(), sb.names)
	if _, err := sb.readFresh(); err != nil {
		return err
	}
	return sb.compileFilter()
}

// compileFilter compiles the policy's seccomp profile once; every command
// only loads the result.
func (sb *Sandbox) compileFilter() error {
	p := &sb.policy
	prof, name := p.Seccomp, seccomp.DefaultName
	if prof == nil {
		prof = seccomp.Default()
	} else {
		js, err := seccomp.Marshal(prof)
		if err != nil {
			return &PolicyError{Field: "Seccomp", Reason: err.Error()}
		}
		sum := sha256.Sum256(js)
		name = "custom:" + hex.EncodeToString(sum[:6])
	}
	for i, n := range append(slices.Clone(p.SeccompAllow), p.SeccompDeny...) {
		field := "SeccompAllow"
		if i >= len(p.SeccompAllow) {
			field, i = "SeccompDeny", i-len(p.SeccompAllow)
		}
		if n == "" || strings.ContainsAny(n, " /\x00") {
			return &PolicyError{Field: fmt.Sprintf("%s[%d]", field, i), Value: n, Reason: "not a system call name"}
		}
	}
	if len(p.SeccompAllow)+len(p.SeccompDeny) > 0 {
		prof = seccomp.Adjust(prof, p.SeccompAllow, p.SeccompDeny)
		name += "+adjusted"
	}
	if sb.level == LevelLandlock && p.Network != NetworkHost {
		// No network namespace: the host's network, its loopback services
		// and its unix sockets are all a socket(2) away. socketpair(2)
		// stays: pipes between a program's own processes need no network.
		prof = seccomp.Adjust(prof, nil, []string{"socket"})
		name += "+no-socket"
	}
	if sb.level != LevelLandlock && !slices.Contains(p.SkipLayers, LayerUnixSockets) {
		wall, err := unixWallFilter()
		if err != nil {
			return &LayerError{Layer: LayerUnixSockets, Reason: err.Error()}
		}
		sb.unixWall = wall
	}
	if slices.Contains(p.SkipLayers, LayerSeccomp) {
		return nil
	}
	prog, err := seccomp.Compile(prof)
	if err != nil {
		return &PolicyError{Field: "Seccomp", Reason: err.Error()}
	}
	sb.filter, sb.filterName = prog, name
	if p.Seccomp != nil || len(p.SeccompAllow) > 0 {
		// The caller's profile, or the default with calls allowed, may
		// allow what would leave a setuid file for the host: the mode
		// rules hold apart from it. (Denying calls lifts none of them.)
		if sb.modeWall, err = seccomp.Compile(seccomp.ModeWall()); err != nil {
			return &LayerError{Layer: LayerSeccomp, Reason: "mode wall: " + err.Error()}
		}
	}
	return nil
}

var (
	unixWallOnce sync.Once
	unixWallProg []byte
	unixWallErr  error
)

// unixWallFilter is seccomp.UnixWall compiled, once per process: it does
// not depend on the policy.
func unixWallFilter() ([]byte, error) {
	unixWallOnce.Do(func() { unixWallProg, unixWallErr = seccomp.CompileUnixWall() })
	return unixWallProg, unixWallErr
}

// resolveAll resolves symlinks in each of paths (/var/run is usually a
// link to /run) and drops duplicates.
func resolveAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		if r := resolve(p, "/"); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// kernelTrees are never writable: the sandbox gets its own /proc and /dev,
// and /sys is the host kernel's. Bound read-write over the sandbox's own,
// the host's would be what the command sees and, as root, changes.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// checkWritableTree is the one rule for what may be a writable tree (the
// workspace or a Writable path): given is the path as the caller wrote it
// (field names it), lex the same made absolute and clean, r with symlinks
// resolved. Refused are the whole host tree; the kernel trees and
// anything in them, by either path (/proc/self/cwd names a kernel tree
// even though it resolves elsewhere); the directories the view hides
// (hiddenDirs: the host's sockets, which the unix-sockets layer lets a
// command reach in a writable tree); and a tree holding the sandbox's
// HOME, which would make the private /tmp and HOME the host's, shared with
// the host and every other sandbox. A tree below the host's /tmp is
// fine: it is bound at its own path inside the private /tmp.
func checkWritableTree(field, given, lex, r string) error {
	refuse := func(reason string) error {
		return &PolicyError{Field: field, Value: given, Reason: reason}
	}
	if r == "/" {
		return refuse("the whole host tree cannot be writable")
	}
	for _, k := range kernelTrees {
		if mounts.Within(lex, k) || mounts.Within(r, k) {
			return refuse("lies in " + k + ": kernel interfaces cannot be writable")
		}
	}
	for _, h := range resolveAll(hiddenDirs) {
		if mounts.Within(lex, h) || mounts.Within(r, h) {
			return refuse("lies in " + h + ", which holds the host's sockets and is hidden from every sandbox")
		}
	}
	if mounts.Within(Home, lex) || mounts.Within(Home, r) || mounts.Within(resolve(Home, "/"), r) {
		return refuse("would be, or hold, the sandbox's private " + filepath.Dir(Home) + " and HOME " + Home + ", making them the host's and shared with every other sandbox; use a directory of its own")
	}
	return nil
}

// degradable are the layers a policy may allow to be skipped.
var degradable = []Layer{LayerLoopback, LayerKeyring, LayerCgroup, LayerLandlock, LayerUnixSockets}

// skippable are the layers a policy may leave out altogether.
var skippable = []Layer{LayerSeccomp, LayerLoopback, LayerKeyring, LayerLandlock, LayerUnixSockets}

// roots are the writable trees: the workspace and Writable.
func (sb *Sandbox) roots() []string {
	return append([]string{sb.spec.Workspace}, sb.spec.Writable...)
}

// nameMounts is the number of mounts masking paths and guarding repos
// takes: what mounts.Build plans for them (a mask or read-only bind each,
// a pin for each directory between a writable root and a path in it, and
// the pinned .git of repositories commands may commit to), counted from
// the plan itself
// so the bound follows the one rule that makes the mounts. roots[0] is the
// workspace.
func nameMounts(paths, roots []string, repos []gitRepo, allowGitWrite bool) int {
	spec := mounts.Spec{Workspace: roots[0], Writable: roots[1:], Deny: paths}
	spec.ReadOnly, spec.Pins = gitGuard(repos, allowGitWrite)
	plan := mounts.Build(spec)
	n := 0
	for _, m := range plan.Mounts {
		if m.Kind == mounts.Mask || m.Kind == mounts.Pin || m.Kind == mounts.ReadOnly {
			n++
		}
	}
	return n
}

// checkNamed refuses a set of matches that would take more than
// MaxNameMounts mounts to mask.
func (sb *Sandbox) checkNamed(all named, repos []gitRepo) error {
	count := all.total()
	mountsNeeded := 0
	if count <= MaxNameMounts {
		if mountsNeeded = nameMounts(all.paths, sb.roots(), repos, sb.policy.AllowGitWrite); mountsNeeded <= MaxNameMounts {
			return nil
		}
	}
	e := &MaskLimitError{Names: sb.names, Count: count, Mounts: mountsNeeded, Limit: MaxNameMounts}
	for i, root := range sb.roots() {
		if c := all.counts[i]; c > 0 {
			tree := "writable " + root
			if i == 0 {
				tree = "workspace " + root
			}
			e.Trees = append(e.Trees, TreeCount{Tree: tree, Count: c})
		}
	}
	return e
}

// fresh is what the view takes from the host at the moment an init is
// built rather than once per Sandbox: the entries at the top level of the
// writable trees that match deny names, and the repositories there. A
// pooled init built with other
// values than the current ones is stale. (The host's unix sockets are not
// among them: the unix-sockets layer decides at connect time, so no list
// of them is ever read.)
type fresh struct {
	named named
	repos []gitRepo
}

// readFresh reads the top levels, and refuses them if, with what New
// found below them, they are more than MaxNameMounts can mask.
func (sb *Sandbox) readFresh() (fresh, error) {
	top := topNamed(sb.roots(), sb.names)
	all := named{paths: append(slices.Clone(sb.deep.paths), top.paths...), counts: slices.Clone(top.counts)}
	for i, c := range sb.deep.counts {
		all.counts[i] += c
	}
	f := fresh{named: top, repos: topRepos(sb.roots())}
	if sb.policy.AllowGitWrite {
		makeGitCodeDirs(sb.repos(f))
	}
	if err := sb.checkNamed(all, sb.repos(f)); err != nil {
		return fresh{}, err
	}
	return f, nil
}

func (f fresh) equal(g fresh) bool {
	return slices.Equal(f.named.paths, g.named.paths) && sameRepos(f.repos, g.repos)
}

// repos are the repositories in the writable trees for an init built
// with f.
func (sb *Sandbox) repos(f fresh) []gitRepo {
	return append(slices.Clone(sb.deepRepos), f.repos...)
}

// plan is the mount plan for an init: the Sandbox's spec plus what is
// read fresh.
func (sb *Sandbox) plan(f fresh) mounts.Plan {
	spec := sb.spec
	spec.Deny = append(slices.Clone(spec.Deny), sb.deep.paths...)
	spec.Deny = append(spec.Deny, f.named.paths...)
	spec.ReadOnly, spec.Pins = gitGuard(sb.repos(f), sb.policy.AllowGitWrite)
	return mounts.Build(spec)
}

// baseEnv is the clean environment every command starts from: a few
// host variables that describe the terminal and locale, the sandbox's own
// HOME and caches, and the policy's additions.
func baseEnv(p *Policy) []string { return baseEnvAt(p, Home) }

// baseEnvAt is baseEnv with HOME at home.
func baseEnvAt(p *Policy, Home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if p.Tools != "" {
		path = p.Tools + ":" + path
	}
	env := []string{"PATH=" + path}
	for _, k := range []string{"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		"HOME="+Home,
		"TMPDIR=/tmp",
		"XDG_CONFIG_HOME="+Home+"/.config",
		"XDG_CACHE_HOME="+Home+"/.cache",
		"XDG_DATA_HOME="+Home+"/.local/share",
		"XDG_STATE_HOME="+Home+"/.local/state",
		"XDG_RUNTIME_DIR="+Home+"/.run",
		"GOCACHE="+Home+"/.cache/go-build",
		"GOPATH="+Home+"/go",
		"npm_config_cache="+Home+"/.npm",
		"PIP_CACHE_DIR="+Home+"/.cache/pip",
		"PYTHONUSERBASE="+Home+"/.local",
		"CARGO_HOME="+Home+"/.cargo",
		"HUTCH_SANDBOX=1",
	)
	return mergeEnv(env, p.Env)
}

// probeUserNS checks from the host's sysctls, without starting a process,
// that user namespaces can be created.
func probeUserNS(uid int) error {
	read := func(p string) (int, bool) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil
	}
	if n, ok := read("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		return &LayerError{Layer: LayerUserNS, Reason: "user.max_user_namespaces is 0", Remedy: "sysctl -w user.max_user_namespaces=15000"}
	}
	if uid != 0 {
		if n, ok := read("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
			return &LayerError{Layer: LayerUserNS, Reason: "kernel.unprivileged_userns_clone is 0", Remedy: "sysctl -w kernel.unprivileged_userns_clone=1"}
		}
		if n, ok := read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
			return &LayerError{Layer: LayerUserNS, Reason: "AppArmor restricts unprivileged user namespaces", Remedy: "add an AppArmor profile with 'userns,' for this binary, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"}
		}
	}
	return nil
}

// namespaces the init is cloned into, in the order they are reported.
var namespaces = []Layer{LayerUserNS, LayerMountNS, LayerPidNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerCgroupNS}

// config is an init's sandbox configuration.
func (sb *Sandbox) config(f fresh) nsinit.Config {
	if sb.level == LevelLandlock {
		// The host's namespaces: no mounts, no hostname, no loopback.
		return nsinit.Config{
			Mounts:     mounts.Plan{},
			Degradable: sb.policy.AllowDegraded,
			Seccomp:    sb.filter,
			ModeWall:   sb.modeWall,
			Skip:       sb.policy.SkipLayers,
			Rlimits:    sb.rlimits,
			Landlock:   sb.landlock,
		}
	}
	ns := namespaces
	if sb.policy.Network == NetworkHost {
		ns = slices.DeleteFunc(slices.Clone(ns), func(l Layer) bool { return l == LayerNetNS })
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
			Allowed: append(append([]string{sb.spec.Workspace}, sb.spec.Writable...), "/tmp", "/dev/shm"),
		}
	}
	return nsinit.Config{
		Mounts:     sb.plan(f),
		Hostname:   "hutch",
		Namespaces: ns,
		Egress:     egress,
		Degradable: sb.policy.AllowDegraded,
		Seccomp:    sb.filter,
		ModeWall:   sb.modeWall,
		Skip:       sb.policy.SkipLayers,
		Rlimits:    sb.rlimits,
		Landlock:   sb.landlock,
		UnixWall:   wall,
	}
}
