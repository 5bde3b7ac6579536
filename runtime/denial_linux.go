//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/seccomp"
)

// notifyFilters are a Sandbox's filter in its notifying forms
// (seccomp.Notifying), which hand the host exactly the calls the filter
// refuses, and the programs the host runs to learn what the filter would
// have answered: the errno the command gets, and which rule it was.
type notifyFilters struct {
	nsinit.Denials
	// programs are made at the first call notified, not with the
	// filters: most commands make none, and a hutch run would pay
	// about 0.1 ms and 16 page faults for them each time.
	programs func() (*notifyPrograms, error)
}

// notifyPrograms are the host's programs for a notifyFilters' filter.
type notifyPrograms struct {
	profile *seccomp.Program
	wall    *seccomp.Program // nil without the wall's filter
	trace   *seccomp.Program
}

// notifyCache holds the notifying forms made so far, by program: every
// Sandbox of the default policy (each hutch run makes one) has the same,
// whose making would cost it about 0.1 ms. A notifyFilters is never
// changed once made, and a Program is safe for concurrent use.
var notifyCache struct {
	sync.Mutex
	m map[string]*notifyFilters
}

// maxNotifyCache bounds notifyCache: a process making Sandboxes of many
// custom profiles makes the rest each time.
const maxNotifyCache = 16

func newNotifyFilters(profile, wall []byte) (*notifyFilters, error) {
	// The profile's length first: no two pairs make one key.
	key := strconv.Itoa(len(profile)) + ":" + string(profile) + string(wall)
	notifyCache.Lock()
	n, ok := notifyCache.m[key]
	notifyCache.Unlock()
	if ok {
		return n, nil
	}
	n, err := makeNotifyFilters(profile, wall)
	if err != nil {
		return nil, err
	}
	notifyCache.Lock()
	defer notifyCache.Unlock()
	if notifyCache.m == nil {
		notifyCache.m = map[string]*notifyFilters{}
	}
	if len(notifyCache.m) < maxNotifyCache {
		notifyCache.m[key] = n
	}
	return n, nil
}

func makeNotifyFilters(profile, wall []byte) (*notifyFilters, error) {
	trace, err := traceAttachFilter()
	if err != nil {
		return nil, err
	}
	n := &notifyFilters{}
	if n.Filter, err = seccomp.Notifying(profile, trace); err != nil {
		return nil, err
	}
	if wall != nil {
		if n.WithWall, err = seccomp.Notifying(profile, wall, trace); err != nil {
			return nil, err
		}
	}
	n.programs = sync.OnceValues(func() (*notifyPrograms, error) {
		var p notifyPrograms
		var err error
		if p.profile, err = seccomp.NewProgram(profile); err != nil {
			return nil, err
		}
		if p.trace, err = seccomp.NewProgram(trace); err != nil {
			return nil, err
		}
		if wall != nil {
			if p.wall, err = seccomp.NewProgram(wall); err != nil {
				return nil, err
			}
		}
		return &p, nil
	})
	return n, nil
}

// traceAttachFilter is seccomp.TraceAttach's program: precompiled, or
// else compiled once per process.
var traceAttachFilter = sync.OnceValues(func() ([]byte, error) {
	if prog, ok := seccomp.BuiltinTraceAttach.Precompiled(); ok {
		return prog, nil
	}
	return seccomp.BuiltinTraceAttach.Compile()
})

// config is the init's part of n, or nil.
func (n *notifyFilters) config() *nsinit.Denials {
	if n == nil {
		return nil
	}
	return &n.Denials
}

// wallOptions are how the host serves the listener of an init whose
// command's refusals it records (denied) or not (nil).
func (sb *Sandbox) wallOptions(hostNet bool, denied *denials) netns.WallOptions {
	opts := netns.WallOptions{HostNet: hostNet}
	n := sb.notify
	if n == nil || denied == nil {
		return opts
	}
	opts.Judge = func(c netns.Call) (netns.Answer, bool) {
		// The programs in the order the filter chains them: the first
		// that does not allow the call is the one that notified it.
		d := seccomp.Data{Nr: c.Nr, Arch: c.Arch, InstructionPointer: c.InstructionPointer, Args: c.Args}
		progs, err := n.programs()
		if err != nil {
			// Programs Notifying took but the host cannot run: refused,
			// never let through.
			return netns.Answer{Errno: unix.EPERM}, true
		}
		ret := progs.profile.Decide(d)
		if errno, ok := seccomp.Refused(ret); ok {
			denied.add(seccompDenial(c, unix.Errno(errno), sb.filterName), 1)
			return netns.Answer{Errno: unix.Errno(errno)}, true
		}
		if progs.wall != nil && ret == seccomp.RetAllow {
			switch ret = progs.wall.Decide(d); {
			case ret == seccomp.RetUserNotif:
				return netns.Answer{}, false // the wall's connect
			case ret != seccomp.RetAllow:
				errno, ok := seccomp.Refused(ret)
				if !ok {
					errno = int(unix.EPERM)
				}
				denied.add(Denial{
					Source: DenialUnixWall, Op: seccomp.SyscallName(c.Nr, c.Arch), Object: "AF_UNIX, SOCK_DGRAM",
					Errno: unix.ErrnoName(unix.Errno(errno)), Rule: RuleUnixWall,
					Reason: "unix datagram sockets are refused: a datagram names its destination where no check can read it",
				}, 1)
				return netns.Answer{Errno: unix.Errno(errno)}, true
			}
		}
		if ret == seccomp.RetAllow && progs.trace.Decide(d) == seccomp.RetUserNotif {
			return traceAttach(c, denied), true
		}
		// Nothing else is notified: refused, never let through.
		return netns.Answer{Errno: unix.EPERM}, true
	}
	opts.Refused = func(address string, errno unix.Errno) {
		if errno == unix.ENETUNREACH {
			denied.add(sb.unreachable(address), 1)
			return
		}
		reason := fmt.Sprintf("unix socket %s is outside the writable trees: the unix wall lets a command reach only sockets in them", address)
		if len(address) > 0 && address[0] == '@' {
			reason = fmt.Sprintf("abstract unix socket %s is the host's: the sandbox shares the host's network", address)
		}
		denied.add(Denial{Source: DenialUnixWall, Op: "connect", Object: address, Errno: unix.ErrnoName(errno), Rule: RuleUnixWall, Reason: reason}, 1)
	}
	return opts
}

// Argument values the seccomp profile's refusals are told apart by.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// seccompDenial says in words why the profile refused call c.
func seccompDenial(c netns.Call, errno unix.Errno, profile string) Denial {
	name := seccomp.SyscallName(c.Nr, c.Arch)
	d := Denial{Source: DenialSeccomp, Op: name, Errno: unix.ErrnoName(errno), Rule: RuleSeccomp}
	switch {
	case !seccomp.Native(c.Arch):
		d.Reason = "the system calls of another architecture are refused"
	case profile != seccomp.DefaultName:
		d.Reason = fmt.Sprintf("%s is refused by the seccomp profile (%s)", name, profile)
	case slices.Contains([]string{"clone", "unshare", "setns"}, name):
		d.Reason = fmt.Sprintf("%s of a new namespace is refused: the command cannot build a sandbox of its own", name)
		d.Allow = &Remedy{Flag: "--allow-nested", Key: "allow_nested"}
	case name == "ioctl" && (c.Args[1] == ioctlTIOCSTI || c.Args[1] == ioctlTIOCLINUX):
		d.Object = "TIOCSTI"
		if c.Args[1] == ioctlTIOCLINUX {
			d.Object = "TIOCLINUX"
		}
		d.Reason = "pushing input into a terminal is refused: it would type commands into the caller's shell"
	case name == "socket":
		d.Object = socketFamily(c.Args[0])
		d.Reason = fmt.Sprintf("%s sockets are refused by the seccomp profile", d.Object)
	case slices.Contains([]string{"chmod", "fchmod", "fchmodat", "open", "openat", "creat", "mknod", "mknodat"}, name):
		d.Reason = fmt.Sprintf("%s with a setuid or setgid bit is refused: the host would run the file with it", name)
	case name == "personality":
		d.Reason = "this personality is refused by the seccomp profile"
	default:
		d.Reason = fmt.Sprintf("%s is refused by the seccomp profile: it reaches the kernel or the host beyond what a command needs", name)
		d.Allow = &Remedy{Key: "seccomp_allow = [\"" + name + "\"]"}
	}
	return d
}

// socketFamily names an address family the way socket(2) is given it.
func socketFamily(af uint64) string {
	switch af {
	case unix.AF_NETLINK:
		return "AF_NETLINK"
	case unix.AF_PACKET:
		return "AF_PACKET"
	case unix.AF_INET:
		return "AF_INET"
	case unix.AF_INET6:
		return "AF_INET6"
	case unix.AF_UNIX:
		return "AF_UNIX"
	}
	return fmt.Sprintf("address family %d", af)
}

// unreachable is the Denial of a connect to address (host:port) that the
// sandbox's network has no route to.
func (sb *Sandbox) unreachable(address string) Denial {
	d := Denial{Source: DenialNetwork, Op: "connect", Object: address, Errno: "ENETUNREACH", Rule: RuleNetwork}
	if sb.policy.Network == NetworkAllow {
		d.Reason = "the sandbox reaches the internet only through its proxy (HTTPS_PROXY), by name, to the allowed domains"
		d.Allow = &Remedy{Flag: "--allow-domain NAME", Key: "allow_domains"}
		return d
	}
	d.Reason = "the sandbox has no network: only its own loopback"
	d.Allow = &Remedy{Flag: "--net allow --allow-domain NAME", Key: "network = \"allow\""}
	return d
}

// proxyDenials counts the connections the egress proxy refused.
func (in *sandboxInit) proxyDenials(events []netns.Event) {
	for _, e := range events {
		if e.Allowed {
			continue
		}
		in.denied.add(Denial{
			Source: DenialNetwork, Op: e.Protocol, Object: net.JoinHostPort(e.Host, strconv.Itoa(e.Port)),
			Rule: RuleNetwork, Reason: "the network policy refuses it: " + e.Reason,
			Allow: &Remedy{Flag: "--allow-domain " + e.Host, Key: "allow_domains"},
		}, 1)
	}
}

// traceAttach answers a ptrace attach (seccomp.TraceAttach): a pid that
// is not in the caller's pid namespace (its /proc, which is the
// sandbox's) is a process the sandbox cannot see, as the kernel would say
// (ESRCH), and counted; anything else the kernel judges itself.
func traceAttach(c netns.Call, denied *denials) netns.Answer {
	pid := int32(c.Args[1])
	if pid <= 0 {
		return netns.Answer{Continue: true}
	}
	// Only a caller right in the sandbox's pid namespace, one below this
	// process's, is told by the sandbox's /proc: one in a namespace of its
	// own (a nested sandbox) numbers processes another way.
	if depth, ok := pidDepth(strconv.Itoa(int(c.Pid))); !ok || depth != selfPidDepth()+1 {
		return netns.Answer{Continue: true}
	}
	// The caller's /proc, resolved in its root (its own symlinks lead
	// within its view, never to the host's /proc: the report can reach
	// the command, which must not learn the host's pids through it).
	root, err := unix.Open("/proc/"+strconv.Itoa(int(c.Pid))+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return netns.Answer{Continue: true}
	}
	defer unix.Close(root)
	proc, err := unix.Openat2(root, "/proc", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return netns.Answer{Continue: true}
	}
	defer unix.Close(proc)
	var fs unix.Statfs_t
	if unix.Fstatfs(proc, &fs) != nil || fs.Type != unix.PROC_SUPER_MAGIC {
		return netns.Answer{Continue: true} // no /proc to tell by
	}
	fd, err := unix.Openat2(proc, strconv.Itoa(int(pid)), &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err == nil {
		unix.Close(fd)
	}
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return netns.Answer{Continue: true}
	}
	denied.add(Denial{
		Source: DenialPidNamespace, Op: "ptrace", Object: "pid " + strconv.Itoa(int(pid)), Errno: "ESRCH",
		Rule:   RuleOutsideSandbox,
		Reason: "no process " + strconv.Itoa(int(pid)) + " in the sandbox: the host's processes are outside its pid namespace",
	}, 1)
	return netns.Answer{Errno: unix.ESRCH}
}

// pidDepth is how many pid namespaces process pid (of this process's
// /proc) is in: the ids on its status's NSpid line.
func pidDepth(pid string) (int, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if ids, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(ids)), true
		}
	}
	return 0, false
}

var selfPidDepth = sync.OnceValue(func() int {
	d, _ := pidDepth("self")
	return d
})

// Denials returns the refusals recorded so far for a command that has
// started and may still run, from the sources that tell as they happen
// (seccomp, the unix wall, the network, the pid namespace): for a
// caller watching a long-running command (a durable process's
// supervisor). Result.Denials, once Wait has returned, holds these and
// the ones judged at the end (the command's own error messages, the
// proxy's refusals). None under Policy.Denials "off", or before Start.
func (c *Cmd) Denials() (denials []Denial, dropped int) {
	c.mu.Lock()
	in := c.in
	c.mu.Unlock()
	if in == nil {
		return nil, 0
	}
	return in.denied.result()
}
