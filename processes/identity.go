package processes

import "errors"

// Identity names one process so that a reused pid cannot pass for it: the
// pid together with the process's start time (clock ticks after boot,
// field 22 of /proc/<pid>/stat) and the id of the boot it ran in. Nothing
// is ever signalled on the strength of a pid alone.
type Identity struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
}

// ErrGone is returned for an identity whose process no longer exists: it
// ended, or its pid now names another process, or it ran in another boot.
var ErrGone = errors.New("processes: the process is gone")
