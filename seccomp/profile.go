// Package seccomp owns hutch's system-call filter: profiles as data in the
// OCI LinuxSeccomp format (what Docker and Podman users already have), the
// default agent profile, compiling a profile once into the BPF program the
// sandbox init loads (hutch's own filters ahead of time, by go generate:
// see Builtin), and loading it.
//
// The default profile is an allow-list. System calls it does not know
// (newer than the profile) fail with ENOSYS, so C libraries fall back as
// they would on an older kernel; the kernel interfaces a command has no
// business reaching (mounts, modules, bpf, io_uring, keyrings, namespaces,
// TIOCSTI, ...) fail with EPERM. Debuggers and tracers work (Tracing):
// what they can reach is bounded by the kernel's own ptrace rules, not by
// this filter.
package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Profile is a seccomp profile in the OCI runtime-spec format.
type Profile = specs.LinuxSeccomp

// DefaultName names the built-in profile in results.
const DefaultName = "hutch-default"

const (
	errnoEPERM  = 1
	errnoENOSYS = 38
)

func errno(n uint) *uint { return &n }

// allowed are the system calls ordinary developer tooling needs: shells,
// coreutils, git, compilers, interpreters, package managers, make -j.
// Calls with arguments worth checking (clone, unshare, ioctl, socket,
// personality) are added separately with their conditions.
var allowed = []string{
	// files and directories
	// open, openat, creat, chmod, fchmod, fchmodat, mknod and mknodat are
	// checked by mode (modeRules); openat2 fails with ENOSYS.
	"read", "write", "close", "close_range",
	"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"lseek", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2",
	"access", "faccessat", "faccessat2", "truncate", "ftruncate", "fallocate",
	"fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "fadvise64", "readahead",
	"getdents", "getdents64", "getcwd", "chdir", "fchdir",
	"rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
	"unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat",
	"chown", "fchown", "lchown", "fchownat", "umask",
	"utime", "utimes", "utimensat", "futimesat",
	// security.capability is refused by the kernel: see modeRules.
	"setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
	"flock", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2",
	"sendfile", "splice", "tee", "vmsplice", "copy_file_range",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	"fanotify_init", "fanotify_mark", "memfd_create",
	// memory
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore",
	"mlock", "mlock2", "munlock", "mlockall", "munlockall", "remap_file_pages",
	"mbind", "set_mempolicy", "get_mempolicy", "membarrier",
	"pkey_mprotect", "pkey_alloc", "pkey_free",
	// processes, threads, signals
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
	"rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"rt_sigsuspend", "sigaltstack", "pause", "signalfd", "signalfd4",
	"pidfd_open", "pidfd_send_signal",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capget", "capset",
	"prctl", "arch_prctl", "set_tid_address", "set_robust_list", "get_robust_list",
	"rseq", "futex", "sched_yield", "sched_getaffinity", "sched_setaffinity",
	"sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
	"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
	"sched_getattr", "sched_setattr", "getpriority", "setpriority",
	"ioprio_get", "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage",
	"times", "uname", "sysinfo", "getcpu", "getrandom",
	"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	// debuggers and tracers: see Tracing
	"ptrace", "process_vm_readv", "process_vm_writev",
	// time
	"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
	"alarm", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
	"timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	// polling and events
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
	// sockets (socket itself is checked by family)
	"connect", "accept", "accept4", "bind", "listen", "getsockname", "getpeername",
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
	"setsockopt", "getsockopt", "socketpair",
	// System V and POSIX IPC (private to the sandbox's ipc namespace)
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	// asynchronous I/O (not io_uring)
	"io_setup", "io_destroy", "io_getevents", "io_pgetevents", "io_submit", "io_cancel",
	"restart_syscall",
}

// refused fail with EPERM: kernel interfaces an agent's command has no
// business reaching, each a known escape or attack surface.
var refused = []string{
	// the mount API: the view is fixed once the command runs
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr",
	// other processes' file descriptors and memory beyond a debugger's needs
	"pidfd_getfd", "kcmp", "process_madvise",
	// the kernel itself
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "bpf", "perf_event_open", "userfaultfd",
	"iopl", "ioperm", "acct", "quotactl", "syslog", "lookup_dcookie", "vhangup",
	"name_to_handle_at", "open_by_handle_at", "uselib", "ustat", "sysfs", "_sysctl",
	"nfsservctl", "create_module", "get_kernel_syms", "query_module",
	// keyrings: the host's keys are not the command's
	"keyctl", "add_key", "request_key",
	// io_uring's operations bypass this filter
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// the clock is the host's
	"settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
	// namespaces (clone and unshare are checked by flag)
	"setns", "sethostname", "setdomainname",
	"set_mempolicy_home_node", "migrate_pages", "move_pages",
}

// Tracing are the system calls of debuggers and tracers (strace, gdb,
// ltrace, rr, py-spy), which the default profile allows. A tracer reaches
// only what the kernel's ptrace access check lets it: processes of the
// same credentials that are dumpable, in its pid namespace and, under
// Landlock, in its own domain or one nested in it. So a command traces
// its own processes and nothing else: not the sandbox's init (not
// dumpable, its memory owned outside the sandbox's user namespace), not
// the host's processes (in no pid namespace the command can name, and
// outside its Landlock domain). Since Linux 4.8 the kernel runs a traced
// process's filter again after its tracer changed a system call, so a
// tracer cannot carry a call past this filter; on an older kernel it
// could, and there these calls must be refused (Default does not know the
// kernel it will run on: the runtime refuses them there).
func Tracing() []string { return []string{"ptrace", "process_vm_readv", "process_vm_writev"} }

// Namespace flags of clone(2) and unshare(2).
const (
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	cloneNewTime   = 0x00000080 // unshare only: for clone it is part of the exit signal
)

var cloneNamespaceFlags = []uint64{cloneNewNS, cloneNewCgroup, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet}

const (
	tiocsti   = 0x5412
	tioclinux = 0x541C
)

// Socket families a command may open; AF_NETLINK only for NETLINK_ROUTE
// (interface and address queries, inside the sandbox's own namespace).
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
)

// personalities allowed: the default persona, the 32-bit persona (used by
// setarch and build tools), UNAME26 variants, and the query value.
var personalities = []uint32{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff}

// Default returns the default agent profile. Each call returns a fresh
// copy the caller may change.
func Default() *Profile {
	p := &Profile{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: errno(errnoENOSYS),
		Architectures:   nativeArchitectures(),
	}
	p.Syscalls = append(p.Syscalls,
		specs.LinuxSyscall{Names: slices.Clone(allowed), Action: specs.ActAllow},
		specs.LinuxSyscall{Names: slices.Clone(refused), Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM)},
		// clone3 passes its flags behind a pointer the filter cannot read:
		// ENOSYS makes the C library fall back to clone, which is checked.
		specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: errno(errnoENOSYS)},
		// openat2 passes its mode behind a pointer too (struct open_how),
		// and would create a setuid file (see modeRules): ENOSYS, as on
		// kernels before 5.6, makes its callers fall back to openat, which
		// is checked.
		specs.LinuxSyscall{Names: []string{"openat2"}, Action: specs.ActErrno, ErrnoRet: errno(errnoENOSYS)},
	)
	p.Syscalls = append(p.Syscalls, modeRules()...)
	p.Syscalls = append(p.Syscalls, namespaceRules("clone", cloneNamespaceFlags)...)
	p.Syscalls = append(p.Syscalls, namespaceRules("unshare", append(slices.Clone(cloneNamespaceFlags), cloneNewTime))...)
	p.Syscalls = append(p.Syscalls, allowExcept("ioctl", 1, []uint32{tiocsti, tioclinux})...)
	p.Syscalls = append(p.Syscalls, allowOnly("personality", 0, personalities)...)
	p.Syscalls = append(p.Syscalls, socketRules()...)
	return p
}

// Mode bits (issue #13, files planted for the host).
const (
	sISUID = 0o4000
	sISGID = 0o2000
	// oCreat and oTmpfile (__O_TMPFILE, which O_TMPFILE includes) are the
	// open flags with which the mode argument counts; the same values on
	// every architecture nativeArchitectures lists.
	oCreat   = 0o100
	oTmpfile = 0o20000000
)

// modeRules keep a command from leaving a setuid or setgid file in the
// workspace for the host to run later: the workspace is mounted nosuid in
// the sandbox, but on the host it is an ordinary directory, and when hutch
// runs as root the sandbox's uid 0 is the host's, so a setuid file the
// command owns is a setuid-root file on the host.
//
// The mechanism is this filter, not an id mapping in which the sandbox's
// root is some other host uid: the sandbox's root must stay the user who
// ran hutch (the files a command writes in the workspace are that user's,
// and with no capability the command could not write the user's files
// otherwise), and a setuid or setgid bit on a file of another uid is still
// a privilege route (to that uid, or to group 0, which the sandbox's gid 0
// maps to). The rule holds for every host user, root or not: it is the
// same profile, and a setuid file of an unprivileged user still runs as
// that user for whoever else executes it.
//
// Every call that sets a file's mode fails with EPERM when the mode
// carries S_ISUID or S_ISGID:
//   - chmod, fchmod, fchmodat: the mode argument (cp -p, cp -a, install -m,
//     tar -xp and rpm set modes through these: they copy the file and fail
//     only to keep its setuid bit);
//   - open, openat, creat: the creation mode, which the kernel keeps
//     setuid bits from, with O_CREAT or O_TMPFILE (without them the mode
//     argument means nothing, whatever a caller leaves in it);
//   - mknod, mknodat: S_IFREG|S_ISUID creates a setuid regular file.
//
// The comparisons look at the two bits only, under a mask: the kernel
// takes these arguments as umode_t or int, so the upper bits a caller
// leaves in the register must not change the verdict, and no other bit of
// the mode (the file type, the sticky bit, the permissions) matters.
//
// S_ISGID is refused on chmod too, directories included (the filter cannot
// tell a directory from a file by a mode): a setgid file of group 0 is a
// privilege route like a setuid one. Refusing it only with S_IXGRP would
// not hold: a POSIX ACL (setxattr system.posix_acl_access) can add group
// execute to a file and keeps its S_ISGID. The common setgid directory (group
// inheritance) is still made by the kernel under a setgid parent, which
// needs no call with the bit. What fails is setting it explicitly: chmod
// g+s, mkdir -m 2775, git's core.sharedRepository, and chmod of a numeric
// mode on a directory that already has the bit (GNU chmod keeps it). mkdir
// and mkdirat need no rule: the kernel drops S_ISUID and S_ISGID from their
// mode.
//
// Routes left to other layers:
//   - openat2 and clone3 fail with ENOSYS (their arguments are behind
//     pointers); fchmodat2 (6.6) and setxattrat (6.13) are not in the
//     profile and fail with ENOSYS too, so the C library falls back to the
//     checked calls;
//   - security.capability (file capabilities): the xattr name is behind a
//     pointer, and refusing the whole setxattr family would break user.*
//     xattrs and cp -a/rsync -X. The kernel refuses it instead: writing it
//     takes CAP_SETFCAP, and the command holds no capability and cannot
//     regain one (an empty bounding set, no_new_privs against file
//     capabilities and setuid, no new user namespace). Under AllowNested
//     it holds CAP_SETFCAP in a user namespace of its own, where the
//     kernel writes only a namespaced capability (v3, valid where the
//     namespace's root is the root), and that root is never the host's
//     (the runtime refuses AllowNested as root before Linux 5.12, which
//     let an unprivileged process map uid 0);
//   - chown, which could otherwise move a setuid bit to another owner,
//     clears S_ISUID (and an executable S_ISGID) on a regular file whoever
//     calls it, and no file with them can be made in the first place; link
//     and rename cannot bring one in from the read-only host tree (another
//     mount: EXDEV);
//   - io_uring, whose operations bypass this filter, is refused.
//
// A custom profile (--seccomp) or --allow-syscall of these names does not
// lift them: ModeWall holds them apart from any profile.
func modeRules() []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	refuse := func(name string, args ...specs.LinuxSeccompArg) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM), Args: args})
	}
	allow := func(name string, args ...specs.LinuxSeccompArg) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: args})
	}
	// The mode argument's index.
	for _, c := range []struct {
		name string
		mode uint
	}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2}} {
		allow(c.name, maskedEq(c.mode, sISUID|sISGID, 0))
		refuse(c.name, maskedEq(c.mode, sISUID, sISUID))
		refuse(c.name, maskedEq(c.mode, sISGID, sISGID))
	}
	// The flags' and the mode's indexes. The allow rules and the refuse
	// rules are disjoint and cover every value together.
	for _, c := range []struct {
		name        string
		flags, mode uint
	}{{"open", 1, 2}, {"openat", 2, 3}} {
		allow(c.name, maskedEq(c.flags, oCreat|oTmpfile, 0))
		allow(c.name, maskedEq(c.mode, sISUID|sISGID, 0))
		for _, f := range []uint64{oCreat, oTmpfile} {
			for _, m := range []uint64{sISUID, sISGID} {
				refuse(c.name, maskedEq(c.flags, f, f), maskedEq(c.mode, m, m))
			}
		}
	}
	return rules
}

// ModeWall is the filter that keeps modeRules whatever the profile: a
// sandbox whose profile is the caller's (or the default with calls
// allowed) loads it before the profile, and the stricter of two filters'
// verdicts wins. It
// refuses what modeRules refuse, and the calls that would go around them:
// openat2 (its mode is behind a pointer) and fchmodat2 (not among the
// checked calls): ENOSYS, so the C library falls back to openat and
// fchmodat; and io_uring (its operations bypass every filter).
// Everything else is allowed here; the profile decides it.
func ModeWall() *Profile {
	p := &Profile{
		DefaultAction: specs.ActAllow,
		Architectures: nativeArchitectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"openat2", "fchmodat2"}, Action: specs.ActErrno, ErrnoRet: errno(errnoENOSYS)},
			{Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM)},
		},
	}
	for _, r := range modeRules() {
		if r.Action != specs.ActAllow {
			p.Syscalls = append(p.Syscalls, r)
		}
	}
	return p
}

// socketRules allow AF_UNIX, AF_INET and AF_INET6 sockets, and AF_NETLINK
// only for NETLINK_ROUTE (interface and address queries, inside the
// sandbox's own network namespace); every other family (AF_PACKET,
// AF_VSOCK, AF_KEY, AF_ALG, ...) and netlink protocol fails with EPERM.
func socketRules() []specs.LinuxSyscall {
	families := []uint32{afUnix, afInet, afInet6}
	var rules []specs.LinuxSyscall
	for _, f := range families {
		rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{maskedEq(0, 0xffffffff, uint64(f))}})
	}
	for _, mv := range complementCover(append(families, afNetlink)) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM), Args: []specs.LinuxSeccompArg{maskedEq(0, mv[0], mv[1])}})
	}
	netlink := maskedEq(0, 0xffffffff, afNetlink)
	rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{netlink, maskedEq(2, 0xffffffff, 0)}})
	for _, mv := range complementCover([]uint32{0}) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM), Args: []specs.LinuxSeccompArg{netlink, maskedEq(2, mv[0], mv[1])}})
	}
	return rules
}

// namespaceRules allows name unless its flags argument carries one of
// flags, which fails with EPERM.
func namespaceRules(name string, flags []uint64) []specs.LinuxSyscall {
	var mask uint64
	for _, f := range flags {
		mask |= f
	}
	rules := []specs.LinuxSyscall{{Names: []string{name}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{maskedEq(0, mask, 0)}}}
	for _, f := range flags {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM),
			Args: []specs.LinuxSeccompArg{maskedEq(0, f, f)}})
	}
	return rules
}

func maskedEq(index uint, mask, value uint64) specs.LinuxSeccompArg {
	return specs.LinuxSeccompArg{Index: index, Value: mask, ValueTwo: value, Op: specs.OpMaskedEqual}
}

// allowExcept allows name unless the 32-bit argument index is one of
// excluded, which fails with EPERM. seccomp can only compare for equality
// under a mask, and an unconditional allow would shadow the exceptions, so
// the allowed values are spelled out as a set of masked comparisons that
// covers exactly everything but excluded. The comparisons look at the low 32
// bits only: the kernel truncates these arguments to int, so garbage in the
// upper half must not change the verdict.
func allowExcept(name string, index uint, excluded []uint32) []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, mv := range complementCover(excluded) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{maskedEq(index, mv[0], mv[1])}})
	}
	for _, v := range excluded {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM), Args: []specs.LinuxSeccompArg{maskedEq(index, 0xffffffff, uint64(v))}})
	}
	return rules
}

// allowOnly allows name only for the listed values of its 32-bit argument
// index; every other value fails with EPERM.
func allowOnly(name string, index uint, values []uint32) []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, v := range values {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{maskedEq(index, 0xffffffff, uint64(v))}})
	}
	for _, mv := range complementCover(values) {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM), Args: []specs.LinuxSeccompArg{maskedEq(index, mv[0], mv[1])}})
	}
	return rules
}

// complementCover returns (mask, value) pairs whose matches, taken
// together, are exactly the 32-bit values not in set: walking the bits from
// the top, every branch that no member of set takes is emitted whole.
func complementCover(set []uint32) [][2]uint64 {
	var out [][2]uint64
	var walk func(bit int, prefix uint32, members []uint32)
	walk = func(bit int, prefix uint32, members []uint32) {
		if bit < 0 {
			return // prefix is a member itself
		}
		fixed := ^uint32(0) << uint(bit) // bits bit..31 are decided below
		for _, b := range []uint32{0, 1} {
			p := prefix | b<<uint(bit)
			var sub []uint32
			for _, m := range members {
				if m&fixed == p {
					sub = append(sub, m)
				}
			}
			if len(sub) == 0 {
				out = append(out, [2]uint64{uint64(fixed), uint64(p)})
			} else {
				walk(bit-1, p, sub)
			}
		}
	}
	walk(31, 0, slices.Compact(slices.Sorted(slices.Values(set))))
	return out
}

// archNames maps the OCI architecture names to libseccomp's.
var archNames = map[specs.Arch]string{
	specs.ArchX86: "x86", specs.ArchX86_64: "amd64", specs.ArchX32: "x32",
	specs.ArchARM: "arm", specs.ArchAARCH64: "arm64",
	specs.ArchMIPS: "mips", specs.ArchMIPS64: "mips64", specs.ArchMIPS64N32: "mips64n32",
	specs.ArchMIPSEL: "mipsel", specs.ArchMIPSEL64: "mipsel64", specs.ArchMIPSEL64N32: "mipsel64n32",
	specs.ArchPPC: "ppc", specs.ArchPPC64: "ppc64", specs.ArchPPC64LE: "ppc64le",
	specs.ArchS390: "s390", specs.ArchS390X: "s390x", specs.ArchRISCV64: "riscv64",
}

// nativeArchitectures is the build's own architecture only: a process
// switching to the i386 or x32 system call tables is refused by the
// filter's architecture check.
func nativeArchitectures() []specs.Arch {
	switch goruntime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64}
	case "riscv64":
		return []specs.Arch{specs.ArchRISCV64}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X}
	}
	return nil
}

// Parse reads an OCI seccomp profile (JSON) and checks it; see Check.
func Parse(data []byte) (*Profile, error) {
	var p Profile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("seccomp: profile is not valid OCI seccomp JSON: %w", err)
	}
	if err := Check(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Marshal writes p as OCI seccomp JSON.
func Marshal(p *Profile) ([]byte, error) {
	return json.MarshalIndent(p, "", "  ")
}

var knownActions = []specs.LinuxSeccompAction{
	specs.ActKill, specs.ActKillProcess, specs.ActKillThread, specs.ActTrap,
	specs.ActErrno, specs.ActTrace, specs.ActAllow, specs.ActLog,
}

var knownOps = []specs.LinuxSeccompOperator{
	specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual, specs.OpEqualTo,
	specs.OpGreaterEqual, specs.OpGreaterThan, specs.OpMaskedEqual,
}

// Check validates p's structure: known actions, operators, argument
// indexes and architectures, and at least one rule. Whether each system
// call name exists is checked when the profile is compiled.
func Check(p *Profile) error {
	if p == nil {
		return errors.New("seccomp: no profile")
	}
	if !slices.Contains(knownActions, p.DefaultAction) {
		return fmt.Errorf("seccomp: defaultAction %q is not a known action", p.DefaultAction)
	}
	if p.ListenerPath != "" {
		return errors.New("seccomp: listenerPath: user-notify profiles are not supported (notify decisions on pointer arguments are racy)")
	}
	for _, a := range p.Architectures {
		if _, ok := archNames[a]; !ok {
			return fmt.Errorf("seccomp: architectures: unknown architecture %q", a)
		}
	}
	if len(p.Syscalls) == 0 {
		return errors.New("seccomp: syscalls: the profile has no rules")
	}
	for i, s := range p.Syscalls {
		if len(s.Names) == 0 {
			return fmt.Errorf("seccomp: syscalls[%d]: no names", i)
		}
		if !slices.Contains(knownActions, s.Action) {
			return fmt.Errorf("seccomp: syscalls[%d] (%s): action %q is not a known action", i, s.Names[0], s.Action)
		}
		for j, a := range s.Args {
			if a.Index > 5 {
				return fmt.Errorf("seccomp: syscalls[%d] (%s): args[%d]: index %d out of range 0-5", i, s.Names[0], j, a.Index)
			}
			if !slices.Contains(knownOps, a.Op) {
				return fmt.Errorf("seccomp: syscalls[%d] (%s): args[%d]: unknown operator %q", i, s.Names[0], j, a.Op)
			}
		}
		for _, n := range s.Names {
			if n == "" || strings.ContainsAny(n, " \t\n/") {
				return fmt.Errorf("seccomp: syscalls[%d]: %q is not a system call name", i, n)
			}
		}
	}
	return nil
}

// Adjust returns a copy of p with allow added as unconditional allow rules
// and deny as EPERM rules. A name in deny wins over every rule for it in p;
// a name in allow replaces p's rules for it.
func Adjust(p *Profile, allow, deny []string) *Profile {
	q := *p
	q.Syscalls = nil
	drop := append(slices.Clone(allow), deny...)
	for _, s := range p.Syscalls {
		names := slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return slices.Contains(drop, n) })
		if len(names) > 0 {
			s.Names = names
			q.Syscalls = append(q.Syscalls, s)
		}
	}
	if len(allow) > 0 {
		q.Syscalls = append(q.Syscalls, specs.LinuxSyscall{Names: slices.Clone(allow), Action: specs.ActAllow})
	}
	if len(deny) > 0 {
		q.Syscalls = append(q.Syscalls, specs.LinuxSyscall{Names: slices.Clone(deny), Action: specs.ActErrno, ErrnoRet: errno(errnoEPERM)})
	}
	return &q
}

// WithoutSocket returns a copy of p in which socket(2) fails with EPERM,
// for a sandbox that shares the host's network: its network, its loopback
// services and its unix sockets are all a socket(2) away. socketpair(2)
// stays: pipes between a program's own processes need no network.
func WithoutSocket(p *Profile) *Profile { return Adjust(p, nil, []string{"socket"}) }

// Nested are the system calls AllowNested opens: what a program needs to
// build a sandbox of its own in namespaces (Chromium's and Firefox's
// sandboxes, bubblewrap, unshare -Urn): clone and unshare with any
// namespace flag, setns, and chroot.
func Nested() []string { return []string{"clone", "unshare", "setns", "chroot"} }

// AllowNested returns a copy of p in which a command may create
// namespaces: clone with any flags, unshare with any but CLONE_NEWTIME
// (which no sandbox needs), setns and chroot; p's own rules for these
// calls are replaced. Everything else stays as p says: the mount API in
// particular (mount, umount2, pivot_root, open_tree, ...) is still
// refused, so a sandbox that must mount (bubblewrap) cannot be built;
// one that only needs namespaces and chroot (Chromium's) can.
//
// The cost is attack surface: in a user namespace of its own a command
// holds every capability there, which reaches kernel code an unprivileged
// process otherwise cannot (netfilter, the namespaced file systems'
// setup, many recent local privilege escalations went through an
// unprivileged user namespace). What it holds there is worth nothing
// outside: the kernel checks each capability against the namespace that
// owns the object.
func AllowNested(p *Profile) *Profile {
	q := Adjust(p, Nested(), nil)
	// Adjust's last rule allows Nested() outright; unshare's rules
	// replace it there, keeping CLONE_NEWTIME out.
	last := &q.Syscalls[len(q.Syscalls)-1]
	last.Names = slices.DeleteFunc(last.Names, func(n string) bool { return n == "unshare" })
	q.Syscalls = append(q.Syscalls, namespaceRules("unshare", []uint64{cloneNewTime})...)
	return q
}
