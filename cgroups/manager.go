//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	containerd "github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// ErrUnavailable is matched (errors.Is) by every error saying that cgroups
// cannot be used here: nothing writable, or a controller a limit needs is
// missing. The error's text says why.
var ErrUnavailable = errors.New("cgroups unavailable")

// UnavailableError says why cgroups cannot be used. errors.Is(err,
// ErrUnavailable) holds for it.
type UnavailableError struct {
	Layout Layout
	Reason string
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return "cgroups unavailable (" + e.Layout.String() + " layout): " + e.Reason
}

// Is makes an UnavailableError match ErrUnavailable (errors.Is).
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ctl indexes the controllers hutch uses.
type ctl int

const (
	ctlMemory ctl = iota
	ctlPids
	ctlCPU
	ctlCPUAcct
	ctlFreezer
	ctlIO
	numCtl
)

// v1Names are the v1 hierarchy names of the controllers.
var v1Names = [numCtl]string{"memory", "pids", "cpu", "cpuacct", "freezer", "blkio"}

// v2Names are the v2 controller names; cpuacct and the freezer have none,
// because v2 has CPU time (cpu.stat), freezing (cgroup.freeze) and killing
// (cgroup.kill) in every group without enabling anything.
var v2Names = [numCtl]string{"memory", "pids", "cpu", "", "", "io"}

// parentName is the directory, in each hierarchy, holding hutch's groups.
const parentName = "hutch"

// hostLeaf is where NewManager moves the processes of its own delegated v2
// cgroup when the kernel requires that cgroup to hold no processes
// before controllers can be enabled below it. Its name does not parse as a
// group name, so Sweep never touches it.
const hostLeaf = "hutch-host"

// host is what a Manager learns about the machine and this process, and
// the two directory operations it performs; tests substitute a fake tree.
type host struct {
	mounts mountTable
	// own maps each v1 controller (or "name=X") to this process's cgroup
	// in that hierarchy, and "" to its cgroup2 path.
	own   map[string]string
	euid  int
	pid   int
	start uint64 // this process's start time, clock ticks after boot
	pidns uint64 // inode of this process's pid namespace
	proc  string // procfs, for owner liveness
	mkdir func(path string) error
	rmdir func(path string) error
	// write writes a value to an existing cgroup file (writeFile).
	write func(path, val string) error
	// access says whether this process may write path (writable).
	access func(path string) error
}

func sysMkdir(p string) error {
	if err := unix.Mkdir(p, 0o755); err != nil {
		return &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return nil
}

func sysRmdir(p string) error {
	if err := unix.Rmdir(p); err != nil {
		return &fs.PathError{Op: "rmdir", Path: p, Err: err}
	}
	return nil
}

// currentHost reads this process's view: mountinfo, /proc/self/cgroup,
// credentials and identity.
func currentHost() (*host, error) {
	mt, err := readMounts()
	if err != nil {
		return nil, err
	}
	v1, unified, err := containerd.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	own := map[string]string{}
	for k, v := range v1 {
		own[k] = v
	}
	if unified != "" {
		own[""] = unified
	}
	h := &host{
		mounts: mt, own: own, euid: unix.Geteuid(), pid: os.Getpid(), proc: "/proc",
		mkdir: sysMkdir, rmdir: sysRmdir, write: writeFile, access: writable,
	}
	if h.start, err = procStart(h.proc, h.pid); err != nil {
		return nil, fmt.Errorf("cgroups: own start time: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return nil, fmt.Errorf("cgroups: own pid namespace: %w", err)
	}
	h.pidns = st.Ino
	return h, nil
}

// procStart returns the start time of pid (field 22 of /proc/<pid>/stat,
// in clock ticks after boot): with the pid it identifies a process, since
// a pid is only reused by a process started later.
func procStart(proc string, pid int) (uint64, error) {
	b, err := readFile(proc + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: count fields from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed %s/%d/stat", proc, pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed %s/%d/stat", proc, pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Manager makes hutch's cgroups on this host. Make one per host process
// (NewManager) and share it; it is safe for concurrent use.
type Manager struct {
	h      *host
	layout Layout
	v2     bool
	// parents[c] is the directory holding the groups' directories for
	// controller c, "" when c is not available. On v1 co-mounted
	// controllers share one; on v2 every entry is the same directory.
	parents [numCtl]string
	// dirs are the distinct entries of parents, in controller order
	// (memory and pids first, so Add puts a process under its limits
	// before anything else).
	dirs []string
	// prefix starts the name of every group this Manager makes:
	// "hutch-<pid>-<start>-<pidns>-"; Sweep parses it back.
	prefix string
	// noSwap is set once a swap limit file turned out to be missing (no
	// swap accounting), so later groups do not try again.
	noSwap atomic.Bool
	// ioFile caches which io weight file works: 0 not yet known, i+1 for
	// applyIO's i-th candidate file, -1 none.
	ioFile atomic.Int32
}

// seq numbers the groups of this process (all its Managers share it, so
// two Managers never pick the same name).
var seq atomic.Uint64

// NewManager detects the layout and picks, for each hierarchy, a parent
// directory it can create groups in:
//
//   - v1 and hybrid: "hutch" at the top of each v1 hierarchy hutch uses
//     (memory, pids, cpu, cpuacct, freezer, blkio). The cgroup2 mount of a
//     hybrid host has no controllers, so it is not used. v1 has no safe
//     delegation, so this needs root (or a hierarchy an administrator made
//     writable).
//   - v2 as root: "hutch" below the v2 mount, with memory, pids, cpu and io
//     enabled in cgroup.subtree_control on the way (those of them the
//     kernel offers).
//   - v2 otherwise, or when the mount's top is not writable: "hutch" below
//     this process's own cgroup (/proc/self/cgroup) when that is writable,
//     i.e. delegated (systemd: a unit or scope with Delegate=yes, e.g.
//     systemd-run --user --scope -p Delegate=yes). The kernel lets a
//     cgroup enable controllers for its children only while it holds no
//     processes itself, so the processes of that cgroup (this one, and
//     whatever else runs there) are moved into its "hutch-host" child
//     first: systemd's documented rule for delegated subtrees. Make the
//     Manager before starting helper processes.
//
// The groups are not nested in this process's own cgroup on a root host:
// without delegation that cgroup is systemd's (or the container runtime's)
// to manage. The flip side is that a command's memory is not charged to the
// host process's own cgroup.
//
// When nothing is writable the error matches ErrUnavailable and says why.
func NewManager() (*Manager, error) {
	h, err := currentHost()
	if err != nil {
		return nil, err
	}
	return newManager(h)
}

func newManager(h *host) (*Manager, error) {
	m := &Manager{h: h, layout: h.mounts.layout()}
	m.prefix = "hutch-" + strconv.Itoa(h.pid) + "-" + strconv.FormatUint(h.start, 10) + "-" +
		strconv.FormatUint(h.pidns, 10) + "-"
	var err error
	switch m.layout {
	case None:
		return nil, &UnavailableError{Layout: None, Reason: "no cgroup filesystem is mounted"}
	case V2:
		m.v2 = true
		err = m.setupV2()
	default:
		err = m.setupV1()
	}
	if err != nil {
		return nil, err
	}
	for _, p := range m.parents {
		if p != "" && !slices.Contains(m.dirs, p) {
			m.dirs = append(m.dirs, p)
		}
	}
	return m, nil
}

// writable reports whether this process may write path (a directory: create
// entries in it), by its effective ids as the kernel checks.
func writable(path string) error {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS)
}

func (m *Manager) setupV1() error {
	h := m.h
	for c := range numCtl {
		if mp, ok := h.mounts.v1[v1Names[c]]; ok {
			m.parents[c] = mp.Path + "/" + parentName
		}
	}
	if m.parents[ctlMemory] == "" && m.parents[ctlPids] == "" {
		return &UnavailableError{Layout: m.layout, Reason: "neither a memory nor a pids v1 hierarchy is mounted"}
	}
	made := map[string]bool{}
	for c, p := range m.parents {
		if p == "" || made[p] {
			continue
		}
		made[p] = true
		err := h.mkdir(p)
		if err == nil || errors.Is(err, unix.EEXIST) {
			// mkdir reports EEXIST before checking permission: check.
			err = h.access(p)
		}
		if err != nil {
			reason := fmt.Sprintf("cannot create groups in the %s hierarchy (%v)", v1Names[c], err)
			if h.euid != 0 {
				reason += fmt.Sprintf("; uid %d: cgroup v1 hierarchies are writable only by root (v1 has no safe delegation)", h.euid)
				if m.layout == Hybrid {
					reason += ", and the cgroup2 mount of this hybrid host has no controllers to delegate"
				}
			}
			return &UnavailableError{Layout: m.layout, Reason: reason}
		}
	}
	return nil
}

// cgroupDir is the directory of cgroup path p (as /proc/self/cgroup shows
// it) under mount mp, or "" when p is not visible there (mounted from a
// subtree that does not contain it, or outside this cgroup namespace).
func cgroupDir(mp mountPoint, p string) string {
	if p == "" || strings.Contains(p, "/..") {
		return ""
	}
	rel := p
	if mp.Root != "/" {
		r, ok := strings.CutPrefix(p, mp.Root)
		if !ok || (r != "" && r[0] != '/') {
			return ""
		}
		rel = r
	}
	if rel == "/" || rel == "" {
		return mp.Path
	}
	return mp.Path + rel
}

func (m *Manager) setupV2() error {
	h := m.h
	mp := *h.mounts.v2
	own := cgroupDir(mp, h.own[""])
	type candidate struct {
		dir  string
		ours bool // this process lives in dir
	}
	var cands []candidate
	if h.euid == 0 {
		cands = append(cands, candidate{dir: mp.Path, ours: own == mp.Path})
	}
	if own != "" && (h.euid != 0 || own != mp.Path) {
		cands = append(cands, candidate{dir: own, ours: true})
	}
	if len(cands) == 0 {
		return &UnavailableError{Layout: V2, Reason: fmt.Sprintf("uid %d is not root and its cgroup (%q) is not under the cgroup2 mount %s", h.euid, h.own[""], mp.Path)}
	}
	var reasons []string
	for _, c := range cands {
		err := m.prepareV2(c.dir, c.ours)
		if err == nil {
			return nil
		}
		reasons = append(reasons, err.Error())
	}
	return &UnavailableError{Layout: V2, Reason: strings.Join(reasons, "; ")}
}

// prepareV2 makes base/hutch a parent for groups: base must be writable
// (the mount's top as root, or a delegated cgroup), the controllers hutch
// uses are enabled in base's and hutch's cgroup.subtree_control.
func (m *Manager) prepareV2(base string, ours bool) error {
	h := m.h
	if err := h.access(base + "/cgroup.subtree_control"); err != nil {
		if h.euid != 0 {
			return fmt.Errorf("%s is not delegated to uid %d (%v); run under a unit with Delegate=yes, e.g. systemd-run --user --scope -p Delegate=yes", base, h.euid, err)
		}
		return fmt.Errorf("%s is not writable (%v)", base, err)
	}
	b, err := readFile(base + "/cgroup.controllers")
	if err != nil {
		return fmt.Errorf("read controllers of %s: %v", base, err)
	}
	avail := strings.Fields(string(b))
	var enabled [numCtl]bool
	var enable []string
	for c, n := range v2Names {
		if n != "" && slices.Contains(avail, n) {
			enabled[c] = true
			enable = append(enable, "+"+n)
		}
	}
	if !enabled[ctlMemory] && !enabled[ctlPids] {
		return fmt.Errorf("neither memory nor pids is available in %s/cgroup.controllers (%q)", base, strings.TrimSpace(string(b)))
	}
	want := strings.Join(enable, " ")
	err = h.write(base+"/cgroup.subtree_control", want)
	if errors.Is(err, unix.EBUSY) && ours {
		// The no-internal-processes rule: a cgroup other than the root
		// cannot give controllers to its children while it holds
		// processes. Move them to a leaf, as systemd asks of delegated
		// subtrees, and try again.
		if err := m.evacuate(base); err != nil {
			return err
		}
		err = h.write(base+"/cgroup.subtree_control", want)
	}
	if err != nil {
		return fmt.Errorf("enable %s in %s: %v", want, base, err)
	}
	parent := base + "/" + parentName
	if err := h.mkdir(parent); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %v", parent, err)
	}
	if err := h.write(parent+"/cgroup.subtree_control", want); err != nil {
		return fmt.Errorf("enable %s in %s: %v", want, parent, err)
	}
	for c := range numCtl {
		// cpuacct and freezer stand for the core files of every v2 group.
		if enabled[c] || v2Names[c] == "" {
			m.parents[c] = parent
		}
	}
	return nil
}

// evacuate moves every process of base into base/hutch-host.
func (m *Manager) evacuate(base string) error {
	leaf := base + "/" + hostLeaf
	if err := m.h.mkdir(leaf); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %v", leaf, err)
	}
	b, err := readFile(base + "/cgroup.procs")
	if err != nil {
		return err
	}
	for _, pid := range parsePids(b) {
		if err := m.h.write(leaf+"/cgroup.procs", strconv.Itoa(pid)); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("move pid %d of %s to %s: %v", pid, base, leaf, err)
		}
	}
	return nil
}

// Layout is the host's layout.
func (m *Manager) Layout() Layout { return m.layout }

// Controllers lists the controllers groups get: limits on "memory", "pids",
// "cpu", an io weight on "io" ("blkio" on v1), and on v1 "cpuacct" for CPU
// time and "freezer" for killing.
func (m *Manager) Controllers() []string {
	var out []string
	for c, p := range m.parents {
		if p == "" {
			continue
		}
		if m.v2 {
			if v2Names[c] != "" {
				out = append(out, v2Names[c])
			}
		} else {
			out = append(out, v1Names[c])
		}
	}
	return out
}

// check refuses limits this host's cgroups cannot enforce. The io weight
// is a soft share and swap depends on the kernel's swap accounting: those
// are reported by Group.Unenforced instead.
func (m *Manager) check(l Limits) error {
	need := func(c ctl, what string) error {
		if m.parents[c] != "" {
			return nil
		}
		return &UnavailableError{Layout: m.layout, Reason: fmt.Sprintf("%s needs the %s controller, which this host does not offer", what, v1Names[c])}
	}
	if l.MemoryBytes > 0 {
		if err := need(ctlMemory, "a memory limit"); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := need(ctlPids, "a pids limit"); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if err := need(ctlCPU, "a CPU limit"); err != nil {
			return err
		}
	}
	return nil
}
