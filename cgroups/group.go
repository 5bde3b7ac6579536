//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Group is one command's cgroup: one directory on v2, one per hierarchy on
// v1. Its methods are safe for concurrent use.
type Group struct {
	m    *Manager
	name string
	// dirs are the group's directories, in the Manager's order.
	dirs []string
	// ctl[c] is the directory holding controller c's files, "" if none.
	ctl [numCtl]string
	// unenforced lists limits that were asked for but could not be set.
	unenforced []string

	mu        sync.Mutex
	dir       *os.File       // v2: the directory, for CLONE_INTO_CGROUP; nil otherwise
	held      map[string]int // HoldUsage's files
	removed   []bool
	destroyed bool
}

// destroyTimeout bounds how long Destroy waits for a killed group to
// empty: processes stuck in uninterruptible sleep (a hung NFS read) cannot
// die before it ends.
const destroyTimeout = 5 * time.Second

// group describes the group name below the Manager's parents; nothing is
// created. With l, a v1 group leaves out the hierarchies only a limit l
// does not set would need (cpu without a CPU limit, blkio without an io
// weight: CPU time comes from cpuacct), and in a pid namespace also the
// freezer (see CreateInPidNS): each hierarchy costs a mkdir and an rmdir
// of some 30-70 us, and a cgroup.procs write in Add. Without l (a group
// found by Sweep) it has every hierarchy.
func (m *Manager) group(name string, l *Limits, inPidNS bool) *Group {
	g := &Group{m: m, name: name}
	need := [numCtl]bool{true, true, true, true, true, true}
	if l != nil && !m.v2 {
		need[ctlCPU], need[ctlIO] = l.CPUs > 0, l.IOWeight > 0
		need[ctlFreezer] = !inPidNS
	}
	for _, p := range m.dirs {
		used := false
		for c, q := range m.parents {
			used = used || (q == p && need[c])
		}
		if used {
			g.dirs = append(g.dirs, p+"/"+name)
		}
	}
	g.removed = make([]bool, len(g.dirs))
	for c, p := range m.parents {
		if p != "" && need[c] {
			g.ctl[c] = p + "/" + name
		}
	}
	return g
}

// Create makes a fresh group with l applied: the limits are in place
// before anything can run in it. On v2 put the command in it at clone
// time (FD); on v1 and hybrid, Add its first process before that process
// runs anything of the command.
//
// A limit the host cannot enforce at all (no memory controller for a
// memory limit, ...) fails with an error matching ErrUnavailable; swap and
// io weight are best effort (see Unenforced).
func (m *Manager) Create(l Limits) (*Group, error) { return m.create(l, false) }

// CreateInPidNS is Create for processes in a pid namespace of their own,
// all of which the end of its init kills at once, with nothing able to
// fork past it: the freezer's atomic kill adds nothing there. On v1 the
// group then has no freezer hierarchy (a mkdir, an rmdir and a join less
// for each group), and Kill, Destroy's last resort for a group that will
// not empty, signals what the group lists until nothing is left, without
// freezing it first. On v2 it is Create.
func (m *Manager) CreateInPidNS(l Limits) (*Group, error) { return m.create(l, true) }

func (m *Manager) create(l Limits, inPidNS bool) (*Group, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := m.check(l); err != nil {
		return nil, err
	}
	g := m.group(m.prefix+strconv.FormatUint(seq.Add(1), 10), &l, inPidNS)
	for i, d := range g.dirs {
		if err := m.h.mkdir(d); err != nil {
			for j := range i {
				_ = m.h.rmdir(g.dirs[j])
			}
			return nil, fmt.Errorf("cgroups: create group: %w", err)
		}
	}
	var err error
	if m.v2 {
		err = g.applyV2(l)
	} else {
		err = g.applyV1(l)
	}
	if err == nil && m.v2 {
		// Opened now, not in FD: the caller wants it on the spawn path,
		// and an open failing there would leave the command unplaced.
		// An *os.File, never a bare int wrapped later: two owners of one
		// descriptor number close it twice, and the second close hits
		// whatever another goroutine opened under that number meanwhile.
		g.dir, err = os.OpenFile(g.dirs[0], os.O_RDONLY|unix.O_DIRECTORY, 0)
	}
	if err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	return g, nil
}

// applyV1 writes l into a fresh v1 group. Only the values asked for are
// written: a fresh group is unlimited, and its CFS period is already the
// kernel's default of 100 ms, which the quota is computed for.
func (g *Group) applyV1(l Limits) error {
	m := g.m
	if l.MemoryBytes > 0 {
		d := g.ctl[ctlMemory]
		if err := g.m.h.write(d+"/memory.limit_in_bytes", itoa(l.MemoryBytes)); err != nil {
			return err
		}
		// memory.memsw.* bound memory plus swap; it must not be below
		// memory.limit_in_bytes, which is why it is written second. It is
		// absent when the kernel does not account swap (swapaccount=0).
		if !m.noSwap.Load() {
			err := g.m.h.write(d+"/memory.memsw.limit_in_bytes", itoa(l.MemoryBytes+l.SwapBytes))
			if isNotExist(err) {
				m.noSwap.Store(true)
			} else if err != nil {
				return err
			}
		}
		if m.noSwap.Load() {
			g.unenforced = append(g.unenforced, "swap: the kernel does not account swap (no memory.memsw.limit_in_bytes; boot with swapaccount=1)")
		}
	} else if l.SwapBytes > 0 {
		g.unenforced = append(g.unenforced, "swap: on cgroup v1 swap is bounded only together with a memory limit")
	}
	if l.Pids > 0 {
		if err := g.m.h.write(g.ctl[ctlPids]+"/pids.max", itoa(l.Pids)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if err := g.m.h.write(g.ctl[ctlCPU]+"/cpu.cfs_quota_us", itoa(l.cpuQuota())); err != nil {
			return err
		}
	}
	return g.applyIO(l, []ioWeightFile{
		// CFQ's blkio.weight went away with the legacy block layer (Linux
		// 5.0); BFQ's is what current kernels have.
		{"blkio.bfq.weight", l.bfqWeight()},
		{"blkio.weight", l.legacyBlkioWeight()},
	})
}

// applyV2 writes l into a fresh v2 group.
func (g *Group) applyV2(l Limits) error {
	m := g.m
	d := g.dirs[0]
	if l.MemoryBytes > 0 {
		if err := g.m.h.write(d+"/memory.max", itoa(l.MemoryBytes)); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 || l.SwapBytes > 0 {
		// v2 bounds swap on its own (memory.swap.max), not memory plus
		// swap: 0 means none. Absent without swap accounting.
		if g.ctl[ctlMemory] == "" {
			g.unenforced = append(g.unenforced, "swap: no memory controller")
		} else if !m.noSwap.Load() {
			err := g.m.h.write(d+"/memory.swap.max", itoa(l.SwapBytes))
			if isNotExist(err) {
				m.noSwap.Store(true)
			} else if err != nil {
				return err
			}
		}
		if m.noSwap.Load() {
			g.unenforced = append(g.unenforced, "swap: the kernel does not account swap (no memory.swap.max)")
		}
	}
	if l.Pids > 0 {
		if err := g.m.h.write(d+"/pids.max", itoa(l.Pids)); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		if err := g.m.h.write(d+"/cpu.max", l.cpuMax()); err != nil {
			return err
		}
	}
	return g.applyIO(l, []ioWeightFile{
		// io.weight is the io controller's (blk-iocost); with BFQ as the
		// device's scheduler it is io.bfq.weight instead.
		{"io.weight", max(l.IOWeight, 1)},
		{"io.bfq.weight", l.bfqWeight()},
	})
}

type ioWeightFile struct {
	name  string
	value uint16
}

// applyIO writes the io weight to the first of files that exists,
// remembering which one for later groups.
func (g *Group) applyIO(l Limits, files []ioWeightFile) error {
	if l.IOWeight == 0 {
		return nil
	}
	d := g.ctl[ctlIO]
	if d == "" {
		g.unenforced = append(g.unenforced, "io weight: no io controller")
		return nil
	}
	m := g.m
	for i, f := range files {
		known := m.ioFile.Load()
		if known < 0 {
			break
		}
		if known > 0 && int(known) != i+1 {
			continue
		}
		err := g.m.h.write(d+"/"+f.name, strconv.Itoa(int(f.value)))
		if err == nil {
			m.ioFile.Store(int32(i + 1))
			return nil
		}
		if !isNotExist(err) {
			return err
		}
	}
	m.ioFile.Store(-1)
	g.unenforced = append(g.unenforced, "io weight: no IO scheduler with weights on this host")
	return nil
}

// Name is the group's directory name, the same in every hierarchy.
func (g *Group) Name() string { return g.name }

// Path is the group's directory: on v2 the only one, on v1 and hybrid the
// one in the memory hierarchy (or the first hierarchy used). Dirs lists
// them all.
func (g *Group) Path() string {
	if d := g.ctl[ctlMemory]; d != "" {
		return d
	}
	return g.dirs[0]
}

// Dirs lists the group's directories, one per hierarchy.
func (g *Group) Dirs() []string { return append([]string(nil), g.dirs...) }

// Unenforced lists, one line each, the limits Create was asked for that
// this host does not enforce (swap without swap accounting, an io weight
// without a weighted IO scheduler).
func (g *Group) Unenforced() []string { return append([]string(nil), g.unenforced...) }

// File returns, on v2, the group's directory, open O_DIRECTORY|O_CLOEXEC,
// for CLONE_INTO_CGROUP (syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}):
// the child starts inside the group, under its limits from its first
// instruction. The Group owns it; it is closed by Destroy, so callers must
// neither close it nor keep it past Destroy. ok is false on v1 and hybrid,
// where clone cannot place a process in v1 hierarchies: use Add.
func (g *Group) File() (dir *os.File, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dir, g.dir != nil
}

// Add moves the process pid (all its threads) into the group, in every
// hierarchy. Its children are born in it. On v2 prefer FD; on v1, for a
// process that can move itself, a thread joining through its tasks files
// is an order of magnitude cheaper (see OpenTasks).
func (g *Group) Add(pid int) error {
	s := strconv.Itoa(pid)
	for _, d := range g.dirs {
		if err := g.m.h.write(d+"/cgroup.procs", s); err != nil {
			return fmt.Errorf("cgroups: add %d: %w", pid, err)
		}
	}
	return nil
}

// OpenTasks opens, on v1 and hybrid, the group's "tasks" file in each
// hierarchy for writing, for the process that will fork the command (the
// sandbox init, which writes "0" to each to move itself): pass the files
// along like its stdio and close them here once sent. They are O_CLOEXEC.
//
// Why: Add writes a pid to cgroup.procs, which moves a whole thread group
// and so takes the kernel's global cgroup_threadgroup_rwsem for writing;
// after an idle spell that waits for an RCU grace period, measured here at
// 5-12 ms per command (BenchmarkAddAfterIdle). A thread that moves itself
// (writing "0" to tasks) needs no such lock: 0.1-0.7 ms for the same
// hierarchies (TestLiveJoinThread logs it). The kernel checks the write against the credentials of
// whoever opened the file, so the init needs no rights of its own.
func (g *Group) OpenTasks() ([]*os.File, error) {
	if g.m.v2 {
		return nil, errors.New("cgroups: OpenTasks is for v1 hierarchies; on v2 clone into the group (FD)")
	}
	var files []*os.File
	for _, d := range g.dirs {
		f, err := os.OpenFile(d+"/tasks", os.O_WRONLY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// Pids lists the processes in the group now.
func (g *Group) Pids() ([]int, error) {
	b, err := readFile(g.dirs[0] + "/cgroup.procs")
	if err != nil {
		return nil, err
	}
	return parsePids(b), nil
}

// Kill sends SIGKILL to every process in the group and returns without
// waiting for them to die (Destroy waits).
//
// v2: cgroup.kill (Linux 5.14), which the kernel applies to the whole
// subtree atomically, forks in flight included. Without it, and on v1, the
// group is frozen first, so that what cgroup.procs lists is all there is
// (nothing forks while frozen) and no listed pid can exit and be reused by
// an unrelated process before its SIGKILL; then every listed process gets
// SIGKILL and the group is thawed, upon which they die. Without a freezer
// hierarchy (v1 hosts that do not mount one), the listing is killed
// repeatedly until it stays empty.
func (g *Group) Kill() error {
	if g.m.v2 {
		d := g.dirs[0]
		err := g.m.h.write(d+"/cgroup.kill", "1")
		if err == nil || !isNotExist(err) {
			return wrapKill(err)
		}
		if !exists(d) {
			return nil // destroyed
		}
		return wrapKill(freezeKill(g.m.h.write, d, d+"/cgroup.freeze", "1", "0", frozenV2))
	}
	if fz := g.ctl[ctlFreezer]; fz != "" {
		if !exists(fz) {
			return wrapKill(killLoop(g.dirs))
		}
		return wrapKill(freezeKill(g.m.h.write, fz, fz+"/freezer.state", "FROZEN", "THAWED", frozenV1))
	}
	return wrapKill(killLoop(g.dirs))
}

func wrapKill(err error) error {
	if err != nil {
		return fmt.Errorf("cgroups: kill: %w", err)
	}
	return nil
}

func exists(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil
}

// freezeTimeout bounds the wait for a group to freeze. A task that cannot
// be frozen (in an uninterruptible sleep) keeps a v1 group FREEZING; the
// kill goes ahead anyway, and Destroy tries again.
const freezeTimeout = time.Second

// frozenV1 reports whether a v1 freezer group is FROZEN.
func frozenV1(dir string) (bool, error) {
	b, err := readFile(dir + "/freezer.state")
	return strings.TrimSpace(string(b)) == "FROZEN", err
}

// frozenV2 reports whether a v2 group is frozen (cgroup.events "frozen 1").
func frozenV2(dir string) (bool, error) {
	b, err := readFile(dir + "/cgroup.events")
	v, _ := keyed(b, "frozen")
	return v == 1, err
}

// freezeKill freezes dir (writing freeze to file), kills what its
// cgroup.procs lists, and thaws it (writing thaw).
func freezeKill(write func(string, string) error, dir, file, freeze, thaw string, frozen func(string) (bool, error)) error {
	if err := write(file, freeze); err != nil {
		if isNotExist(err) && !exists(dir) {
			return nil
		}
		return err
	}
	delay := 20 * time.Microsecond
	deadline := time.Now().Add(freezeTimeout)
	for i := 1; ; i++ {
		ok, err := frozen(dir)
		if ok || err != nil || time.Now().After(deadline) {
			break
		}
		if i%16 == 0 {
			// A v1 freezer can stay FREEZING when tasks raced with it
			// (runc writes FROZEN again for the same reason).
			_ = write(file, freeze)
		}
		time.Sleep(delay)
		delay = min(2*delay, time.Millisecond)
	}
	_, kerr := killListed(dir)
	if err := write(file, thaw); err != nil && kerr == nil && !isNotExist(err) {
		return err
	}
	return kerr
}

// killListed sends SIGKILL to each process dir's cgroup.procs lists.
func killListed(dir string) (int, error) {
	b, err := readFile(dir + "/cgroup.procs")
	if err != nil {
		if isNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	pids := parsePids(b)
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
			return len(pids), fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return len(pids), nil
}

// killLoop kills what the first existing directory lists until it lists
// nothing (a bounded number of rounds: each round's victims cannot fork
// any more once SIGKILL is pending, so only children forked before it
// remain for the next).
func killLoop(dirs []string) error {
	for _, d := range dirs {
		if !exists(d) {
			continue
		}
		for range 100 {
			n, err := killListed(d)
			if err != nil || n == 0 {
				return err
			}
			time.Sleep(100 * time.Microsecond)
		}
		return nil
	}
	return nil
}

// Destroy kills everything in the group, waits (at most destroyTimeout)
// for it to be empty and removes the group from every hierarchy. Calling it
// again is a no-op once it has succeeded; after a failure it can be retried.
func (g *Group) Destroy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return nil
	}
	if g.dir != nil {
		g.dir.Close()
		g.dir = nil
	}
	g.releaseUsage()
	// Usually the command has ended and the group is empty: then this is
	// one rmdir per hierarchy, without freezing anything.
	err := g.rmdirs()
	if err == nil {
		g.destroyed = true
		return nil
	}
	deadline := time.Now().Add(destroyTimeout)
	delay := 50 * time.Microsecond
	var lastKill time.Time
	for {
		if !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.ENOTEMPTY) {
			return fmt.Errorf("cgroups: destroy %s: %w", g.name, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups: destroy %s: still not empty after %v: %w", g.name, destroyTimeout, err)
		}
		if time.Since(lastKill) > 50*time.Millisecond {
			// Killed processes take a moment to exit; kill again only
			// now and then, for anything that slipped through.
			_ = g.Kill()
			g.removeSubgroups()
			lastKill = time.Now()
		} else {
			time.Sleep(delay)
			delay = min(2*delay, 5*time.Millisecond)
		}
		if err = g.rmdirs(); err == nil {
			g.destroyed = true
			return nil
		}
	}
}

// rmdirs removes the group's directories that are still there.
func (g *Group) rmdirs() error {
	var first error
	for i, d := range g.dirs {
		if g.removed[i] {
			continue
		}
		err := g.m.h.rmdir(d)
		if err == nil || isNotExist(err) {
			g.removed[i] = true
			continue
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// removeSubgroups removes groups nested in the group's directories: hutch
// never makes any and commands cannot write the cgroup filesystem, but a
// leftover child would keep the group from being removed forever.
func (g *Group) removeSubgroups() {
	for i, d := range g.dirs {
		if !g.removed[i] {
			removeChildren(g.m.h.rmdir, d)
		}
	}
}

func removeChildren(rmdir func(string) error, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			sub := dir + "/" + e.Name()
			removeChildren(rmdir, sub)
			_ = rmdir(sub)
		}
	}
}
