package seccomp

import specs "github.com/opencontainers/runtime-spec/specs-go"

const (
	errnoEACCES  = 13
	sockTypeMask = 0xf // SOCK_TYPE_MASK: the type without SOCK_NONBLOCK/SOCK_CLOEXEC
	sockDgram    = 2
)

// UnixWall is the second filter of a sandbox whose kernel cannot guard
// pathname unix sockets with Landlock (LANDLOCK_ACCESS_FS_RESOLVE_UNIX,
// ABI 9): it is loaded beside the profile, with a listener (the sandbox init's C step),
// and
//   - hands every connect(2) to the supervisor holding the listener, which
//     copies the address once, resolves it beneath the sandbox's writable
//     trees and connects the command's own socket itself (netns.UnixWall);
//   - refuses unix datagram sockets (socket and socketpair of AF_UNIX,
//     SOCK_DGRAM) with EACCES: a datagram names its destination in
//     sendto(2)/sendmsg(2) behind a pointer that no filter can read and no
//     supervisor can check without a race, and stream and seqpacket
//     sockets ignore such names.
//
// Everything else is allowed here; the profile decides it.
func UnixWall() *Profile {
	dgram := []specs.LinuxSeccompArg{maskedEq(0, 0xffffffff, afUnix), maskedEq(1, sockTypeMask, sockDgram)}
	return &Profile{
		DefaultAction: specs.ActAllow,
		Architectures: nativeArchitectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"connect"}, Action: specs.ActNotify},
			{Names: []string{"socket", "socketpair"}, Action: specs.ActErrno, ErrnoRet: errno(errnoEACCES), Args: dgram},
		},
	}
}

// ptrace requests that take hold of another process by pid.
const (
	ptraceAttach = 16
	ptraceSeize  = 0x4206
)

// TraceAttach is the filter that hands the host every ptrace(2) that
// would take hold of a process by pid (PTRACE_ATTACH, PTRACE_SEIZE): the
// host answers "no such process" where the pid is not in the sandbox's
// pid namespace (a host's process, which the sandbox cannot see), and
// otherwise lets the kernel judge the call as it is
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). It decides nothing the kernel does
// not: its only use is to report (Result.Denials), chained after the
// profile by Notifying.
func TraceAttach() *Profile {
	return &Profile{
		DefaultAction: specs.ActAllow,
		Architectures: nativeArchitectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"ptrace"}, Action: specs.ActNotify, Args: []specs.LinuxSeccompArg{maskedEq(0, 0xffffffff, ptraceAttach)}},
			{Names: []string{"ptrace"}, Action: specs.ActNotify, Args: []specs.LinuxSeccompArg{maskedEq(0, 0xffffffff, ptraceSeize)}},
		},
	}
}
