//go:build linux && cgo

package nsinit

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
)

// The init's identity and confinement steps, as Go decides them: each
// function below computes the records of one step and has the C in
// identity.c and confine.c execute them on the calling thread (runSteps).

// joinSessionKeyring gives the init (and so the command) a fresh anonymous
// session keyring: the host's, inherited across clone, is no longer the
// command's.
func joinSessionKeyring() error {
	_, err := runSteps(Record{Kind: stepKeyring})
	return err
}

func sethostname(name string) error {
	_, err := runSteps(Record{Kind: stepHostname, Blobs: [][]byte{[]byte(name)}})
	return err
}

// loopbackUp brings up "lo" in the init's network namespace.
func loopbackUp() error {
	_, err := runSteps(Record{Kind: stepLoopback})
	return err
}

// setRlimits lowers the limits rl of process pid (0: the init itself);
// the C never raises a current limit (see cgroups.Rlimits).
func setRlimits(pid int, rl []cgroups.Rlimit) error {
	recs := make([]Record, 0, len(rl))
	for _, r := range rl {
		recs = append(recs, Record{Kind: stepRlimit, Ints: []uint64{uint64(pid), uint64(r.Resource), r.Soft, r.Hard}})
	}
	if _, err := runSteps(recs...); err != nil {
		return err
	}
	if pid == 0 {
		// The Go runtime raised the init's soft RLIMIT_NOFILE at start
		// and restores the original in every process it starts unless
		// the limit went through package syscall: a setrlimit to the
		// value the C just set tells it so, and changes nothing.
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err != nil {
			return err
		}
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &cur)
	}
	return nil
}

// joinCgroup moves the calling thread into the v1 groups whose tasks
// files fds are (Config.CgroupTasks): the command this thread forks is
// born there, and the group lists the init too, which dies with it.
func joinCgroup(fds []int) error {
	recs := make([]Record, 0, len(fds))
	for _, fd := range fds {
		recs = append(recs, Record{Kind: stepCgroupJoin, Ints: []uint64{uint64(fd)}})
	}
	_, err := runSteps(recs...)
	return err
}

// secureBits are linux/securebits.h's NOROOT, NO_SETUID_FIXUP and
// NO_CAP_AMBIENT_RAISE, each with its lock bit: root's exec-time
// capabilities off for good.
const secureBits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<6 | 1<<7

// dropPrivileges leaves the calling thread with no capability it could
// regain: every capability out of the bounding set, securebits set and
// locked, no ambient or inheritable ones, no new privileges through setuid
// or file capabilities. These are per-thread; the command inherits them
// because this thread forks it. Without CAP_SETPCAP (only at
// LevelLandlock as an ordinary user) no capability is held and the
// bounding set and securebits cannot change: no_new_privs and an empty
// capability set are all there is to do.
func dropPrivileges() error {
	mode := uint64(stepCapsNoPcap)
	if hasCapSetpcap() {
		mode = stepCapsAll
	}
	_, err := runSteps(Record{Kind: stepCaps, Ints: []uint64{mode, secureBits}})
	return err
}

// hasCapSetpcap reports whether this thread holds CAP_SETPCAP.
func hasCapSetpcap() bool {
	var data [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
}

// restrictLandlock enforces r on the calling thread, setting no_new_privs
// first as Landlock requires. An ABI of 0 restricts nothing (the Ruleset
// says so in Unenforced). The rules are listed here, in the sandbox's
// view, after the filesystem step: a carve-out lists what the command
// will see.
func restrictLandlock(r landlock.Ruleset) error {
	if r.ABI <= 0 {
		return nil
	}
	rules, err := r.Rules()
	if err != nil {
		return err
	}
	recs := make([]Record, 0, len(rules)+len(r.Ports)+2)
	recs = append(recs, Record{Kind: stepLLRuleset, Ints: []uint64{r.HandledFS, r.HandledNet, r.Scoped, r.AttrSize(), uint64(r.ABI)}})
	for _, ru := range rules {
		recs = append(recs, Record{Kind: stepLLPath, Ints: []uint64{ru.Dir, ru.File}, Blobs: [][]byte{[]byte(ru.Path)}})
	}
	for _, p := range r.Ports {
		recs = append(recs, Record{Kind: stepLLPort, Ints: []uint64{landlock.ConnectTCP, uint64(p)}})
	}
	recs = append(recs, Record{Kind: stepLLRestrict})
	_, err = runSteps(recs...)
	return err
}

// loadSeccomp installs the BPF program prog (seccomp.Compile's) on the
// calling thread only, without TSYNC: the command inherits it from the
// thread that forks it, and nothing else of the init is constrained.
func loadSeccomp(prog []byte) error {
	_, err := runSteps(Record{Kind: stepSeccomp, Ints: []uint64{0}, Blobs: [][]byte{prog}})
	return err
}

// filterFlagWaitKillableRecv is SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
// (linux/seccomp.h, 5.19).
const filterFlagWaitKillableRecv = 1 << 5

// loadListener installs prog like loadSeccomp and returns the filter's
// listener, the fd through which the init receives the calls the filter
// notifies and answers them (seccomp.UnixWall). Where the kernel has it
// (5.19), the filter waits killably once the supervisor has read a call:
// a signal then no longer interrupts a call the supervisor may already
// have performed (a connect that completed, then restarted, would fail
// with EISCONN).
func loadListener(prog []byte) (int, error) {
	fd, err := runSteps(Record{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | filterFlagWaitKillableRecv}, Blobs: [][]byte{prog}})
	if errors.Is(err, unix.EINVAL) {
		fd, err = runSteps(Record{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}, Blobs: [][]byte{prog}})
	}
	return fd, err
}
