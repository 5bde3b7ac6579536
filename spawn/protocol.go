//go:build linux

// Package spawn owns hutch's process model on the host's side: sandboxes
// for commands are cloned from a small, long-lived zygote, never from the
// host agent's own process.
//
// Go cannot use vfork when it creates a user namespace, so a clone from
// the host copies its page tables: from a host holding a 1 GiB heap a
// spawn would cost tens of milliseconds instead of a few. The zygote is the
// host binary re-exec'd once, taken over before the Go runtime starts by
// the C stage of package nsinit (see nsinit/zygote.c): a single-threaded
// process of a few hundred KiB that runs none of the host's Go code. The
// host sends it one request per init over a SOCK_SEQPACKET socket,
// carrying the init's stdio, its end of a control socket and of a status
// pipe (and, on cgroup v2, the cgroup to clone it into) as SCM_RIGHTS.
// Configuration, the command and its stdio, and status flow straight
// between the host and the init through those; the zygote only clones,
// signals and reaps. Its clone child runs the sandbox init (C too, see
// nsinit/init.c) without an exec. The zygote also keeps one init cloned
// ahead, of the kind Prepare names, so that a Spawn of that kind costs a
// message instead of a clone (see Client.Prepare).
//
// The zygote is started lazily, restarted when it dies, and dies with the
// host: it exits on EOF of its socket, and the kernel sends it SIGKILL
// (PR_SET_PDEATHSIG) if the host goes first. Each init gets the same from
// the zygote, and an init's death empties its pid namespace.
//
// An init can also start without the zygote (Direct): the host runs its
// binary again itself, in the init's new namespaces, with argv[0]
// InitArg0 and the five fds in place, and the same C stage makes that
// process the init before the Go runtime starts. That costs the host a
// clone of its own page tables and an exec, but no server and no spare: it
// is for a host that needs few inits, such as a CLI that reads one file
// through the file door (see runtime.NewFiles).
package spawn

import "github.com/hutchbox/hutch/nsinit"

// ServerArg0 is the argv[0] of the zygote process.
const ServerArg0 = nsinit.ZygoteArg0

// InitArg0 is the argv[0] of an init Direct started.
const InitArg0 = nsinit.InitArg0
