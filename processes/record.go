package processes

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/runtime"
)

// ErrNotFound is the error for an id with no record; it matches
// fs.ErrNotExist.
var ErrNotFound = fmt.Errorf("no such process: %w", fs.ErrNotExist)

// ErrActive is Remove's error for a process whose supervisor still runs.
var ErrActive = errors.New("processes: the process is not stopped")

// Status is where a durable process is in its life.
type Status string

const (
	// StatusStarting: its supervisor runs and is building its sandbox.
	StatusStarting Status = "starting"
	// StatusRunning: the command runs (Process.Pid).
	StatusRunning Status = "running"
	// StatusBackoff: it ended and waits to be restarted (Backoff.Next).
	StatusBackoff Status = "backoff"
	// StatusStopping: Stop was asked for and its supervisor is at it.
	StatusStopping Status = "stopping"
	// StatusStopped: Stop ended it; nothing of it remains.
	StatusStopped Status = "stopped"
	// StatusExited: it ended by itself and Restart said not to restart.
	StatusExited Status = "exited"
	// StatusFailed: its supervisor could not go on (Reason says why).
	StatusFailed Status = "failed"
	// StatusStale: the record said it ran, but its supervisor is gone:
	// another boot, or its pid now names another process, or it died
	// (Reason says which). Its pids are cleared and never signalled.
	StatusStale Status = "stale"
	// StatusUnreadable: the record cannot be read (Reason says why). It
	// is listed, never a reason to refuse the others; its supervisor,
	// if one still runs, is found by the lock it holds, and Stop stops
	// it.
	StatusUnreadable Status = "unreadable"
)

// Active says the record claims a live supervisor.
func (s Status) Active() bool {
	return s == StatusStarting || s == StatusRunning || s == StatusBackoff || s == StatusStopping
}

// Desired is the state its owner asked for, recorded before any act on
// it: a crash in the middle of a stop leaves desired stopped, and the
// next manager finishes the stop.
type Desired string

// The states an owner can ask for.
const (
	DesiredRunning Desired = "running"
	DesiredStopped Desired = "stopped"
)

// Process is a durable process's record (record.json), as its manager
// and its supervisor keep it.
type Process struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Args    []string  `json:"args"`
	Created time.Time `json:"created"`
	Desired Desired   `json:"desired"`
	Status  Status    `json:"status"`
	// Reason says why Status is failed or stale.
	Reason  string  `json:"reason,omitempty"`
	Restart Restart `json:"restart"`
	// Pid is the command's pid on the host while it runs, else 0.
	Pid int `json:"pid,omitempty"`
	// Supervisor is the process that keeps this one (see the package
	// documentation); nil once it is gone.
	Supervisor *Identity `json:"supervisor,omitempty"`
	// Restarts counts the runs after the first.
	Restarts int     `json:"restarts"`
	Backoff  Backoff `json:"backoff"`
	// Runs are the last runs, oldest first (at most maxRuns).
	Runs []Run `json:"runs,omitempty"`
	// Log is the path of process.log (process.log.1 beside it holds what
	// came before, once the log was rotated).
	Log string `json:"log"`
	// LogFull says the data directory was full when the log was last
	// written: the command runs on, its output is dropped (LogDropped
	// bytes so far) until there is room again, when a line in the log
	// says how much was lost.
	LogFull    bool  `json:"log_full,omitempty"`
	LogDropped int64 `json:"log_dropped,omitempty"`
	// Published are the ports its sandbox publishes on the host
	// (Policy.Publish), host ports chosen filled in: its supervisor holds
	// them open across restarts, until the process stops.
	Published []runtime.Publish `json:"published,omitempty"`
}

// Backoff is the restart delay's state.
type Backoff struct {
	// Failures counts the short runs in a row (see Spec.RestartDelay).
	Failures int `json:"failures"`
	// Delay is the wait before the next restart, and Next when it ends
	// (status backoff).
	Delay time.Duration `json:"delay,omitempty"`
	Next  time.Time     `json:"next,omitzero"`
}

// Run is one run of the command.
type Run struct {
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	Pid     int       `json:"pid,omitempty"`
	// ExitCode is the exit status, -1 when a signal ended it (Signal) or
	// it did not start (Error).
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	// Ingress are the last connections (at most maxIngress) forwarded to
	// this run through the published ports; IngressTotal counts them all.
	Ingress      []netns.IngressEvent `json:"ingress,omitempty"`
	IngressTotal int                  `json:"ingress_total,omitempty"`
	// Denials are what the run was refused, by which rule, as
	// runtime.Result.Denials says (DenialsDropped: the kinds beyond its
	// cap). While the run goes on they are those recorded so far, brought
	// into the record every denialsEvery when they change; at its end,
	// the Result's.
	Denials        []runtime.Denial `json:"denials,omitempty"`
	DenialsDropped int              `json:"denials_dropped,omitempty"`
}

// maxIngress is how many ingress events a Run keeps.
const maxIngress = 32

// maxRuns is how many Runs a record keeps.
const maxRuns = 32

// Reach is how a command reaches p's sandbox port: the runtime.Reach that
// leads its own 127.0.0.1:port to the host port p publishes it on (a
// host address left unspecified is reached on loopback). It refuses a
// process that is not running or does not publish port.
func (p Process) Reach(port int) (runtime.Reach, error) {
	if !p.Status.Active() {
		return runtime.Reach{}, fmt.Errorf("the process is %s", p.Status)
	}
	for _, pub := range p.Published {
		if pub.Port != port {
			continue
		}
		ip := pub.HostIP
		if a, err := netip.ParseAddr(ip); err != nil || a.IsUnspecified() {
			ip = "127.0.0.1"
		}
		return runtime.Reach{Port: port, Addr: net.JoinHostPort(ip, strconv.Itoa(pub.HostPort))}, nil
	}
	return runtime.Reach{}, fmt.Errorf("the process does not publish port %d (hutch process start --publish 0:%d)", port, port)
}
