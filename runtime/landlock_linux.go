//go:build linux

package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

// minLandlockABI is the oldest Landlock ABI hutch enforces inside the
// namespaces: ABI 1 has no REFER right, so every rename or link across
// directories would fail (EXDEV) whatever the rules.
const minLandlockABI = landlock.ReferABI

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
	// For an app the workspace is its data directory (the view shows
	// nothing else of the workspace writable): the two layers agree.
	writable := sb.spec.WritableView()
	devices := []string{"/dev"}
	if sb.policy.AllowNested {
		// A nested sandbox writes the id maps of the user namespace it
		// makes (/proc/PID/uid_map, gid_map, setgroups). The view's
		// /proc is the sandbox's own: its system-wide files that a
		// root-owned command could write (sys, sysrq-trigger, irq, bus,
		// fs) are mounted read-only, so what this opens is the
		// per-process files, under the kernel's own ptrace and owner
		// checks. (At level landlock /proc is the host's: never.)
		devices = append(devices, "/proc")
	}
	// The root's entries are granted from its listing where a denied
	// path is carved out of it (see Deny below): a read-only bind whose
	// path the host's root does not have (a listed view's /data) needs a
	// rule of its own, as a writable one has.
	readOnly := []string{"/"}
	for _, b := range sb.spec.Binds {
		if !b.Writable {
			readOnly = append(readOnly, b.Target)
		}
	}
	// So is what the view shows of a root of the caller's.
	readOnly = append(readOnly, sb.spec.FromRoot()...)
	rs, err := landlock.Build(landlock.Spec{
		ReadOnly: readOnly,
		Writable: append(writable, "/tmp", "/dev/shm"),
		Devices:  devices,
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
//
// In a listed view only the listed trees are the host's: a denied path
// anywhere else is not there at all.
func (sb *Sandbox) carvable(deny []string) []string {
	own := append(append([]string{sb.spec.Workspace, "/tmp", "/dev", "/proc"}, sb.spec.Writable...), sb.spec.HideDirs...)
	in := func(d string, trees []string) bool {
		return slices.ContainsFunc(trees, func(o string) bool { return mounts.Within(d, o) })
	}
	var out []string
	for _, d := range deny {
		if !in(d, own) && !slices.Contains(out, d) && (sb.spec.Listed == nil || in(d, sb.spec.Listed.Trees)) {
			out = append(out, d)
		}
	}
	return out
}

// readable are the trees Landlock lets commands read at level landlock,
// where the host's tree is the view: the whole of it, or for a listed
// view the listed trees and the host's /proc (the command's own processes
// are there; the host's others are beyond ptrace's and the pid checks).
func (sb *Sandbox) readable() []string {
	if sb.spec.Listed == nil {
		return []string{"/"}
	}
	return append(slices.Clone(sb.spec.Listed.Trees), "/proc")
}

// setupLandlockOnly builds the ruleset of LevelLandlock, where Landlock is
// the filesystem boundary itself: it can be neither skipped nor degraded
// (validate refuses a policy skipping it). The private temporary
// directory, sb.tmpDir, is made already.
func (sb *Sandbox) setupLandlockOnly(abi int) error {
	// The repositories stay writable at this level: nothing to make in
	// them.
	f, err := sb.scanFresh()
	if err != nil {
		return err
	}
	deny := append(slices.Clone(sb.spec.Deny), f.named.paths...)
	rs, err := landlock.Build(landlock.Spec{
		ReadOnly:    sb.readable(),
		Writable:    append(sb.spec.WritableTrees(), sb.tmpDir),
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

// makeLandlockTmp makes the private temporary directory of a LevelLandlock
// Sandbox (the host's /tmp is not private there): HOME and TMPDIR point
// into it, and it is one of the trees Landlock lets commands write. New
// removes it when a later step fails; otherwise it goes once the Sandbox
// is closed and no init that may run a command in it is left (holdTmp).
func (sb *Sandbox) makeLandlockTmp() error {
	tmp, err := os.MkdirTemp("", "hutch-tmp-")
	if err == nil {
		sb.tmpDir = tmp
		err = os.Mkdir(filepath.Join(tmp, "home"), 0o700)
	}
	if err != nil {
		return &SetupError{Layer: LayerLandlock, Op: "make a private temporary directory", Err: err}
	}
	return nil
}

// tmpHolds counts the inits of a Sandbox, which hold what their commands
// need until they end: LevelLandlock's private temporary directory, and
// the watch on the writable trees (a command's Result lists the
// repositories it made). Close leaves commands still running as they
// were: both go at Close when no init is left, otherwise with the last.
type tmpHolds struct {
	mu     sync.Mutex
	n      int
	closed bool
}

// holdTmp counts a new init in. The function it returns counts it out
// once the init is released, and lets go of what was held if it was the
// last one of a closed Sandbox.
func (sb *Sandbox) holdTmp() func() {
	t := &sb.tmpHolds
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.n--
		last := t.closed && t.n == 0
		t.mu.Unlock()
		if last {
			if err := sb.letGo(); err != nil {
				sb.policy.logger().Warn("hutch: remove the private temporary directory", "dir", sb.tmpDir, "err", err)
			}
		}
	}
}

// closeTmp lets go of what the inits held at Close, if none is left;
// otherwise the last one's release does.
func (sb *Sandbox) closeTmp() error {
	t := &sb.tmpHolds
	t.mu.Lock()
	t.closed = true
	held := t.n > 0
	t.mu.Unlock()
	if held {
		return nil
	}
	return sb.letGo()
}

// letGo stops watching the writable trees and removes the private
// temporary directory, if there is one.
func (sb *Sandbox) letGo() error {
	sb.closeTrees()
	if sb.tmpDir == "" {
		return nil
	}
	return os.RemoveAll(sb.tmpDir)
}
