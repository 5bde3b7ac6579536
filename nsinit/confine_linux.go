//go:build linux && cgo

package nsinit

import (
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
)

// The init's identity and confinement steps, as Go decides them: each
// function below returns the records of one step (confine.h), which the C
// in identity.c and confine.c executes on the thread that forks the
// command. EncodeConfig puts them in the init's plan; the tests run them
// on a test process (runSteps).

// keyringSteps give the init (and so the command) a fresh anonymous
// session keyring: the host's, inherited across clone, is no longer the
// command's.
func keyringSteps() []Record { return []Record{{Kind: stepKeyring}} }

func hostnameSteps(name string) []Record {
	return []Record{{Kind: stepHostname, Blobs: [][]byte{[]byte(name)}}}
}

// loopbackSteps bring up "lo" in the init's network namespace.
func loopbackSteps() []Record { return []Record{{Kind: stepLoopback}} }

// userCountSteps write each limit of counts in the init's user namespace
// (/proc/sys/user/<name>), in name order.
func userCountSteps(counts map[string]uint64) []Record {
	var recs []Record
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		recs = append(recs, Record{Kind: stepUserCount, Ints: []uint64{counts[name]}, Blobs: [][]byte{[]byte("/proc/sys/user/" + name)}})
	}
	return recs
}

// rlimitSteps lower the limits rl of process pid (0: the init itself);
// the C never raises a current limit (see cgroups.Rlimits).
func rlimitSteps(pid int, rl []cgroups.Rlimit) []Record {
	recs := make([]Record, 0, len(rl))
	for _, r := range rl {
		recs = append(recs, Record{Kind: stepRlimit, Ints: []uint64{uint64(pid), uint64(r.Resource), r.Soft, r.Hard}})
	}
	return recs
}

// cgroupSteps move the calling thread into the v1 groups whose tasks
// files are fds (Config.CgroupTasks): the command this thread forks is
// born there, and the group lists the init too, which dies with it.
func cgroupSteps(fds []int) []Record {
	recs := make([]Record, 0, len(fds))
	for _, fd := range fds {
		recs = append(recs, Record{Kind: stepCgroupJoin, Ints: []uint64{uint64(fd)}})
	}
	return recs
}

// secureBits are linux/securebits.h's NOROOT, NO_SETUID_FIXUP and
// NO_CAP_AMBIENT_RAISE, each with its lock bit: root's exec-time
// capabilities off for good.
const secureBits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<6 | 1<<7

// privilegeSteps leave the calling thread with no capability it could
// regain: every capability out of the bounding set, securebits set and
// locked, no ambient or inheritable ones, no new privileges through setuid
// or file capabilities. These are per-thread; the command inherits them
// because this thread forks it. Without CAP_SETPCAP (see
// Config.Unprivileged) no capability is held and the bounding set and
// securebits cannot change: no_new_privs and an empty capability set are
// all there is to do.
func privilegeSteps(setpcap bool) []Record {
	mode := uint64(stepCapsNoPcap)
	if setpcap {
		mode = stepCapsAll
	}
	return []Record{{Kind: stepCaps, Ints: []uint64{mode, secureBits}}}
}

// landlockSteps enforce r on the calling thread, setting no_new_privs
// first as Landlock requires. An ABI of 0 restricts nothing (the Ruleset
// says so in Unenforced): no steps. The carve-outs of r's ExpandDeny trees
// are listed here, by the caller; see EncodeConfig for why the host's
// listing is the sandbox's.
//
// With hostFd >= 0 the ruleset is begun on the host (Ruleset.Create) with
// the rules on paths for which onHost is true, which are returned, and
// passed to the thread as fd hostFd: the steps finish it with the other
// rules. Opening a path costs the init four system calls; a carve-out has
// hundreds, which the host holds open from one spawn to the next. from is
// what the carve-outs were listed from (see Plan.Current).
func landlockSteps(r landlock.Ruleset, hostFd int, onHost func(path string) bool) (recs []Record, host []landlock.Rule, from landlock.Listed, err error) {
	if r.ABI <= 0 {
		return nil, nil, from, nil
	}
	rules, from, err := r.Rules()
	if err != nil {
		return nil, nil, from, err
	}
	recs = make([]Record, 0, len(rules)+len(r.Ports)+2)
	if hostFd >= 0 {
		recs = append(recs, Record{Kind: stepLLRulesetFd, Ints: []uint64{uint64(hostFd)}})
	} else {
		recs = append(recs, Record{Kind: stepLLRuleset, Ints: []uint64{r.HandledFS, r.HandledNet, r.Scoped, r.AttrSize(), uint64(r.ABI)}})
	}
	for _, ru := range rules {
		if hostFd >= 0 && onHost(ru.Path) {
			host = append(host, ru)
			continue
		}
		recs = append(recs, Record{Kind: stepLLPath, Ints: []uint64{ru.Dir, ru.File}, Blobs: [][]byte{[]byte(ru.Path)}})
	}
	for _, p := range r.Ports {
		recs = append(recs, Record{Kind: stepLLPort, Ints: []uint64{landlock.ConnectTCP, uint64(p)}})
	}
	return append(recs, Record{Kind: stepLLRestrict}), host, from, nil
}

// seccompStep installs the BPF program prog (seccomp.Compile's) on the
// calling thread only, without TSYNC: the command inherits it from the
// thread that forks it, and nothing else of the init is constrained.
func seccompStep(prog []byte) Record {
	return Record{Kind: stepSeccomp, Ints: []uint64{0}, Blobs: [][]byte{prog}}
}

// filterFlagWaitKillableRecv is SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
// (linux/seccomp.h, 5.19).
const filterFlagWaitKillableRecv = 1 << 5

// listenerSteps install prog like seccompStep with a listener, the fd
// through which the init's host receives the calls the filter notifies and
// answers them (seccomp.UnixWall). Where the kernel has it (5.19), the
// filter waits killably once the supervisor has read a call: a signal
// then no longer interrupts a call the supervisor may already have
// performed (a connect that completed, then restarted, would fail with
// EISCONN). fallback is the same without that flag, for when the first
// fails with EINVAL (an older kernel).
func listenerSteps(prog []byte) (first, fallback Record) {
	first = Record{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | filterFlagWaitKillableRecv}, Blobs: [][]byte{prog}}
	fallback = Record{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}, Blobs: [][]byte{prog}}
	return first, fallback
}
