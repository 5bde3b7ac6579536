// Package spawn owns hutch's process model: sandboxes are cloned from a
// small, long-lived spawn server, never from the host agent's own process.
//
// Go cannot use vfork when it creates a user namespace, so a clone copies
// the parent's page tables: from a host holding a 1 GiB heap a spawn costs
// tens of milliseconds instead of a few. The spawn server is the host binary
// re-exec'd once with a tiny heap; the host sends it one request per init
// over a SOCK_SEQPACKET socket, carrying the init's end of a control socket
// and of a status pipe as SCM_RIGHTS, and it clones the sandbox init.
// Configuration, the command and its stdio, and status flow straight
// between the host and the init through those;
// the server only clones, signals and reaps.
//
// The server is started lazily, restarted when it dies, and dies with the
// host: it exits on EOF of its socket, and the kernel sends it SIGKILL
// (PR_SET_PDEATHSIG) if the host goes first. Each init gets the same from
// the server, and an init's death empties its pid namespace.
package spawn

// ServerArg0 is the argv[0] that selects the spawn server role.
const ServerArg0 = "hutch-spawn"

// serverFd is the server's end of the socket, inherited as fd 3.
const serverFd = 3

// Request kinds.
const (
	reqSpawn = "spawn"
	reqKill  = "kill"
)

// request is one message from the host. A spawn request carries five fds:
// stdin, stdout, stderr, the init's end of the control socket and the status pipe's
// write end.
type request struct {
	Kind string `json:"kind"`
	ID   uint64 `json:"id"`

	// Spawn.
	Cloneflags uintptr `json:"cloneflags,omitempty"`
	// UID and GID are mapped to themselves inside the user namespace.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// IntoCgroup: a sixth fd, a cgroup v2 directory, follows the five;
	// the init is cloned straight into it (CLONE_INTO_CGROUP).
	IntoCgroup bool `json:"into_cgroup,omitempty"`

	// Kill.
	Signal int `json:"signal,omitempty"`
}

// Reply kinds.
const (
	replyStarted = "started"
	replyExited  = "exited"
	replyFailed  = "failed"
)

// reply is one message from the server.
type reply struct {
	Kind  string `json:"kind"`
	ID    uint64 `json:"id"`
	Pid   int    `json:"pid,omitempty"`
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
	// WaitStatus of the init (exited).
	WaitStatus uint32 `json:"wait_status,omitempty"`
}

// numFds is the number of fds a spawn request carries, plus one for a
// cgroup (request.IntoCgroup).
const numFds = 5

// maxMsg bounds one message; requests carry no config, so they are small.
const maxMsg = 64 << 10
