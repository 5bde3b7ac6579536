package mounts

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Error is a failed mount step. Path is the path the step was working on.
type Error struct {
	Step Mount
	Op   string
	Path string
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("mounts: %s %s: %s %s: %v", e.Step.Kind, e.Step.Target, e.Op, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// scratch is where the init mounts its scratch tmpfs before the first
// pivot_root. Its host contents are not hidden for long: after the pivot the
// host tree (including the real /tmp) is reachable under /.oldroot.
const scratch = "/tmp"

// resolveFlags keeps every lookup inside its root and refuses symlinks on
// the way: a component that is (or became) a symlink makes the step fail
// instead of redirecting a mount (CVE-2021-30465 class).
const resolveFlags = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// applier carries the state of one Apply.
type applier struct {
	host     int // O_PATH fd of the host tree (the old root)
	root     int // O_PATH fd of the new root being built
	maskFile int // O_PATH fd of the empty mode-0000 file used by Mask
	maskDir  int // O_PATH fd of the empty mode-0000 directory used by Mask
	own      []string
	seal     []int // mount fds made read-only once everything is in place
}

// Apply builds plan's view and makes it the calling process's root. It must
// run in a fresh mount namespace (and owns it from then on); on error the
// namespace is in an undefined state and the caller must not exec anything.
func Apply(plan Plan) error {
	if err := plan.Validate(); err != nil {
		return err
	}
	a := &applier{host: -1, root: -1, maskFile: -1, maskDir: -1}
	defer a.close()
	if err := a.prepare(); err != nil {
		return err
	}
	for _, t := range plan.Mounts {
		switch t.Kind {
		case Tmpfs, EmptyRO, Dev, Proc:
			a.own = append(a.own, t.Target)
		}
	}
	for _, m := range plan.Mounts {
		if err := a.step(m); err != nil {
			return err
		}
	}
	for _, fd := range a.seal {
		done, err := setattr(fd, unix.MOUNT_ATTR_RDONLY, false)
		if err == nil && !done {
			err = remountAttached(fd, unix.MOUNT_ATTR_RDONLY, false)
		}
		if err != nil {
			return &Error{Step: Mount{Kind: EmptyRO}, Op: "seal read-only", Err: err}
		}
	}
	return a.enter()
}

func (a *applier) close() {
	for _, fd := range append([]int{a.host, a.root, a.maskFile, a.maskDir}, a.seal...) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// prepare makes the namespace private, mounts a scratch tmpfs and pivots
// into it, so that the host tree sits at /.oldroot and the new root is built
// at /newroot from fds, never from paths an attacker could swap.
func (a *applier) prepare() error {
	fail := func(op, p string, err error) error {
		return &Error{Step: Mount{Kind: HostRoot, Target: "/"}, Op: op, Path: p, Err: err}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make private", "/", err)
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fail("mount scratch tmpfs", scratch, err)
	}
	if err := unix.Chdir(scratch); err != nil {
		return fail("chdir", scratch, err)
	}
	for _, d := range []string{".oldroot", "newroot", "mask-dir"} {
		if err := unix.Mkdir(d, 0o700); err != nil {
			return fail("mkdir", d, err)
		}
	}
	fd, err := unix.Open("mask-file", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("create", "mask-file", err)
	}
	unix.Close(fd)
	for _, m := range []string{"mask-file", "mask-dir"} {
		if err := unix.Chmod(m, 0); err != nil {
			return fail("chmod", m, err)
		}
	}
	if err := unix.PivotRoot(".", ".oldroot"); err != nil {
		return fail("pivot_root", scratch, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir", "/", err)
	}
	var errs []error
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		errs = append(errs, err)
		return fd
	}
	a.host, a.maskFile, a.maskDir = open("/.oldroot"), open("/mask-file"), open("/mask-dir")
	if err := errors.Join(errs...); err != nil {
		return fail("open", "scratch", err)
	}
	return nil
}

// enter makes /newroot the root and drops the scratch tree and the host
// tree with it.
func (a *applier) enter() error {
	fail := func(op string, err error) error {
		return &Error{Step: Mount{Kind: HostRoot, Target: "/"}, Op: op, Path: "/", Err: err}
	}
	old, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open old root", err)
	}
	defer unix.Close(old)
	if err := unix.Fchdir(a.root); err != nil {
		return fail("fchdir new root", err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching it leaves only the new root, with no path back to the host.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fail("pivot_root", err)
	}
	if err := unix.Fchdir(old); err != nil {
		return fail("fchdir old root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fail("detach old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("chdir", err)
	}
	return nil
}

// openIn resolves p beneath dirfd without following any symlink.
func openIn(dirfd int, p string) (int, error) {
	rel := strings.TrimPrefix(p, "/")
	if rel == "" {
		rel = "."
	}
	// No O_NOFOLLOW: with O_PATH it would return the trailing symlink
	// itself instead of failing; RESOLVE_NO_SYMLINKS then fails it (ELOOP).
	return unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: resolveFlags,
	})
}

// bind clones the mount tree at src (recursively, so that a read-only
// bind cannot reveal what host submounts cover) and attaches it at tgt with
// attrs added.
func bind(src, tgt int, attrs uint64) error {
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	done := true
	if attrs != 0 {
		var err error
		if done, err = setattr(tree, attrs, true); err != nil {
			return err
		}
	}
	if err := unix.MoveMount(tree, "", tgt, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	if !done {
		// Before 5.12: the tree is attached (and so has a path) before it
		// gets its attributes; nothing runs in the namespace yet.
		return remountAttached(tree, attrs, true)
	}
	return nil
}

// newFS creates a detached filesystem of type fstype with options and
// attaches it at tgt. It returns the mount's fd (the caller closes it).
func newFS(fstype string, options map[string]string, attrs int, tgt int) (int, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fsfd)
	for k, v := range options {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return -1, fmt.Errorf("fsconfig %s=%s: %w", k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("fsconfig create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount: %w", err)
	}
	if err := unix.MoveMount(mfd, "", tgt, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		unix.Close(mfd)
		return -1, fmt.Errorf("move_mount: %w", err)
	}
	return mfd, nil
}

func (a *applier) step(m Mount) (err error) {
	cur := m.Target
	defer func() {
		if err != nil {
			var me *Error
			if !errors.As(err, &me) {
				err = &Error{Step: m, Op: "apply", Path: cur, Err: err}
			}
		}
	}()
	if m.Kind == HostRoot {
		nr, err := unix.Open("/newroot", unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(nr)
		if err := bind(a.host, nr, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return err
		}
		a.root, err = unix.Open("/newroot", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		return err
	}
	if a.root < 0 {
		return errors.New("no root yet")
	}

	if m.Kind == Dir {
		return a.mkdirAll(m.Target, m.Mode)
	}

	var src = -1
	if m.Source != "" && (m.Kind == BindRO || m.Kind == BindRW) {
		cur = m.Source
		src, err = openIn(a.host, m.Source)
		if err != nil {
			if errors.Is(err, unix.ENOENT) && m.Optional {
				return nil
			}
			return &Error{Step: m, Op: "open source", Path: m.Source, Err: err}
		}
		defer unix.Close(src)
		cur = m.Target
	}
	tgt, err := a.target(m, src)
	if err != nil {
		// An optional target the init cannot reach is one the command,
		// with the same uid and no capabilities, cannot reach either.
		if (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES)) && m.Optional {
			return nil
		}
		return &Error{Step: m, Op: "open target", Path: m.Target, Err: err}
	}
	defer unix.Close(tgt)

	switch m.Kind {
	case BindRW:
		return bind(src, tgt, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	case BindRO:
		return bind(src, tgt, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	case ReadOnly:
		return bind(tgt, tgt, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	case Pin:
		return bind(tgt, tgt, 0)
	case Mask:
		var st unix.Stat_t
		if err := unix.Fstat(tgt, &st); err != nil {
			return err
		}
		with := a.maskFile
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			with = a.maskDir
		}
		return bind(with, tgt, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	case Tmpfs:
		opts := map[string]string{"mode": fmt.Sprintf("%o", m.Mode)}
		if m.SizeBytes > 0 {
			opts["size"] = fmt.Sprint(m.SizeBytes)
		}
		fd, err := newFS("tmpfs", opts, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, tgt)
		if err == nil {
			unix.Close(fd)
		}
		return err
	case EmptyRO:
		fd, err := newFS("tmpfs", map[string]string{"mode": "755", "size": "1m"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, tgt)
		if err == nil {
			a.seal = append(a.seal, fd)
		}
		return err
	case Dev:
		return a.dev(m, tgt)
	case Proc:
		return a.proc(m, tgt)
	}
	return fmt.Errorf("unknown kind %q", m.Kind)
}

// target opens m's target in the new root. A missing target below one of
// the plan's own tmpfs mounts is created (as a directory, or an empty file
// when the source is not a directory); in the read-only host tree it is not.
func (a *applier) target(m Mount, src int) (int, error) {
	fd, err := openIn(a.root, m.Target)
	if err == nil || !errors.Is(err, unix.ENOENT) || !a.inOwn(m.Target) {
		return fd, err
	}
	isDir := true
	if src >= 0 {
		var st unix.Stat_t
		if err := unix.Fstat(src, &st); err != nil {
			return -1, err
		}
		isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	if isDir {
		if err := a.mkdirAll(m.Target, 0o755); err != nil {
			return -1, err
		}
	} else {
		if err := a.mkdirAll(path.Dir(m.Target), 0o755); err != nil {
			return -1, err
		}
		parent, err := openIn(a.root, path.Dir(m.Target))
		if err != nil {
			return -1, err
		}
		defer unix.Close(parent)
		// O_PATH fds cannot create; reopen the parent for it.
		dir, err := unix.Openat(parent, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(dir)
		f, err := unix.Openat(dir, path.Base(m.Target), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		if err == nil {
			unix.Close(f)
		}
	}
	return openIn(a.root, m.Target)
}

func (a *applier) inOwn(p string) bool {
	for _, o := range a.own {
		if p != o && Within(p, o) {
			return true
		}
	}
	return false
}

// mkdirAll creates p and its missing parents inside the new root, never
// following a symlink.
func (a *applier) mkdirAll(p string, mode uint32) error {
	if fd, err := openIn(a.root, p); err == nil {
		unix.Close(fd)
		return nil
	}
	if p == "/" {
		return nil
	}
	if err := a.mkdirAll(path.Dir(p), 0o755); err != nil {
		return err
	}
	parent, err := openIn(a.root, path.Dir(p))
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, path.Base(p), 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	// Mkdirat is subject to the umask; set the mode exactly.
	fd, err := unix.Openat2(a.root, strings.TrimPrefix(p, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: resolveFlags,
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, mode)
}

// devNodes are bound from the host's /dev; a sandbox needs no other device.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

func (a *applier) dev(m Mount, tgt int) error {
	mfd, err := newFS("tmpfs", map[string]string{"mode": "755", "size": "64k"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, tgt)
	if err != nil {
		return err
	}
	a.seal = append(a.seal, mfd)
	dir, err := unix.Openat(mfd, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	for _, n := range devNodes {
		f, err := unix.Openat(dir, n, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return fmt.Errorf("create /dev/%s: %w", n, err)
		}
		unix.Close(f)
		src, err := openIn(a.host, "/dev/"+n)
		if err != nil {
			return fmt.Errorf("open host /dev/%s: %w", n, err)
		}
		node, err := openIn(dir, n)
		if err == nil {
			err = bind(src, node, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
			unix.Close(node)
		}
		unix.Close(src)
		if err != nil {
			return fmt.Errorf("/dev/%s: %w", n, err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := unix.Mkdirat(dir, d, 0o755); err != nil {
			return fmt.Errorf("mkdir /dev/%s: %w", d, err)
		}
	}
	pts, err := openIn(dir, "pts")
	if err != nil {
		return err
	}
	defer unix.Close(pts)
	fd, err := newFS("devpts", map[string]string{"newinstance": "", "ptmxmode": "0666", "mode": "0620"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, pts)
	if err != nil {
		// Older kernels reject the valueless flag through fsconfig's string form.
		fd, err = newFS("devpts", map[string]string{"ptmxmode": "0666", "mode": "0620"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, pts)
	}
	if err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	unix.Close(fd)
	shm, err := openIn(dir, "shm")
	if err != nil {
		return err
	}
	defer unix.Close(shm)
	if fd, err = newFS("tmpfs", map[string]string{"mode": "1777"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, shm); err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	unix.Close(fd)
	links := [][2]string{{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, l := range links {
		if err := unix.Symlinkat(l[0], dir, l[1]); err != nil {
			return fmt.Errorf("symlink /dev/%s: %w", l[1], err)
		}
	}
	return nil
}

// procReadOnly and procMasked are the kernel interfaces under /proc that a
// command may not change or read. A command as uid 0 of a host-root run
// owns /proc/sys entries; read-only is what stops it from rewriting
// kernel.core_pattern, not the missing capabilities.
var (
	procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMasked   = []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "kallsyms", "config.gz"}
)

func (a *applier) proc(m Mount, tgt int) error {
	mfd, err := newFS("proc", nil, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, tgt)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	for _, p := range procReadOnly {
		fd, err := openIn(mfd, p)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("/proc/%s: %w", p, err)
		}
		err = bind(fd, fd, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("/proc/%s read-only: %w", p, err)
		}
	}
	for _, p := range procMasked {
		fd, err := openIn(mfd, p)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("/proc/%s: %w", p, err)
		}
		var st unix.Stat_t
		with := a.maskFile
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			with = a.maskDir
		}
		err = bind(with, fd, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("mask /proc/%s: %w", p, err)
		}
	}
	return nil
}
