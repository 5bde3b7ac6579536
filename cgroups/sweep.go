//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// owner identifies the host process that made a group, as its name says:
// "hutch-<pid>-<start>-<pidns>-<seq>".
type owner struct {
	pid   int
	start uint64 // clock ticks after boot, /proc/<pid>/stat field 22
	pidns uint64 // pid namespace inode the pid is valid in
}

// parseName parses a group name; ok is false for anything else in a
// parent directory (hutch-host, other tools' groups).
func parseName(name string) (o owner, ok bool) {
	rest, ok := strings.CutPrefix(name, parentName+"-")
	if !ok {
		return o, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 {
		return o, false
	}
	var n [4]uint64
	for i, s := range f {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return o, false
		}
		n[i] = v
	}
	if n[0] == 0 || n[0] > 1<<22 {
		return o, false
	}
	return owner{pid: int(n[0]), start: n[1], pidns: n[2]}, true
}

// alive reports whether o is still running: its pid exists and started at
// the recorded time (otherwise the pid has been reused). Only a pid that is
// plainly gone counts as dead; an unreadable /proc entry counts as alive,
// since killing a live host's commands is worse than leaving a stale group.
func (h *host) alive(o owner) bool {
	start, err := procStart(h.proc, o.pid)
	if err != nil {
		return !isNotExist(err) && !errors.Is(err, unix.ESRCH)
	}
	return start == o.start
}

// Sweep removes the groups left behind by hutch hosts that died without
// destroying them (crashed or were killed): everything in them is killed,
// and the groups are removed from every hierarchy. Run it once at start-up.
//
// A group is stale when its name's owner is gone: no process with that pid,
// or one that started at another time. A group made in another pid
// namespace is stale once no process is left in that namespace (a host
// killed in a pid namespace of its own, which ended with it), which only
// a Manager in the initial pid namespace can tell; from any other such
// groups are left alone. This Manager's own are never touched.
func (m *Manager) Sweep() (removed int, err error) {
	stale := map[string]bool{}
	seen := map[owner]bool{}
	var inUse map[uint64]bool // the pid namespaces with a process, once needed
	var errs []error
	for _, p := range m.dirs {
		ents, err := os.ReadDir(p)
		if err != nil {
			if !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if !e.IsDir() || stale[name] || strings.HasPrefix(name, m.prefix) {
				continue
			}
			o, ok := parseName(name)
			if !ok {
				continue
			}
			live, known := seen[o]
			if !known {
				switch {
				case o.pidns == m.h.pidns:
					live = m.h.alive(o)
				case m.h.pidns == initialPidNS:
					// Made in another pid namespace: its owner is gone
					// once no process is left in that namespace, which
					// the initial namespace sees whole.
					if inUse == nil {
						inUse = pidNamespaces(m.h.proc)
					}
					// An unreadable /proc (nil) counts as alive.
					live = inUse == nil || inUse[o.pidns]
				default:
					live = true // not seen from here: left alone
				}
				seen[o] = live
			}
			if !live {
				stale[name] = true
			}
		}
	}
	for name := range stale {
		if err := m.group(name, nil, false).Destroy(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("cgroups: sweep: %w", errors.Join(errs...))
	}
	return removed, nil
}

// initialPidNS is the initial pid namespace's inode (PROC_PID_INIT_INO).
const initialPidNS = 0xEFFFFFFC

// pidNamespaces are the inodes of the pid namespaces of the processes in
// proc (a /proc); nil when it cannot be read.
func pidNamespaces(proc string) map[uint64]bool {
	ents, err := os.ReadDir(proc)
	if err != nil || len(ents) == 0 {
		return nil
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(proc+"/"+e.Name()+"/ns/pid", &st) == nil {
			out[st.Ino] = true
		}
	}
	return out
}
