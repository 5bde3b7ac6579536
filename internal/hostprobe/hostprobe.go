//go:build linux

// Package hostprobe reads what this host offers a sandbox from its
// settings and mount table, starting no process: whether user namespaces
// can be made and a fresh procfs mounted. runtime's level ladder decides
// from it, and package doctor reports it; neither reads the host twice
// in two ways.
package hostprobe

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// SimulateEnv makes hutch treat the host as lacking a feature it has, to
// test the lower rungs on a capable machine: a comma-separated list of
// "no-userns", "no-proc" and "no-landlock". It can only lower the level,
// never below the policy's MinLevel, so it cannot weaken what a policy
// accepts.
const SimulateEnv = "HUTCH_SIMULATE"

// Simulated reports whether SimulateEnv names what.
func Simulated(what string) bool {
	return slices.Contains(strings.Split(os.Getenv(SimulateEnv), ","), what)
}

// Gap is a feature the host lacks: why, and the remedy.
type Gap struct {
	Reason, Remedy string
}

// Sysctl reads the integer setting at path (under /proc/sys), or nil when
// the host has no such setting or it is not an integer.
func Sysctl(path string) *int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return &n
}

// UserNS checks from the host's sysctls, without starting a process, that
// uid can create user namespaces; nil when it can.
func UserNS(uid int) *Gap {
	is := func(path string, v int) bool {
		n := Sysctl(path)
		return n != nil && *n == v
	}
	if is("/proc/sys/user/max_user_namespaces", 0) {
		return &Gap{"user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000"}
	}
	if uid != 0 {
		if is("/proc/sys/kernel/unprivileged_userns_clone", 0) {
			return &Gap{"kernel.unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1"}
		}
		if is("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 1) {
			return &Gap{"AppArmor restricts unprivileged user namespaces", "add an AppArmor profile with 'userns,' for this binary, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"}
		}
	}
	return nil
}

// ProcMountable reports whether a fresh procfs can be mounted in a
// sandbox's namespaces. The kernel refuses one ("mount too revealing")
// when the procfs this process sees has something mounted over part of
// it, as container runtimes do to mask /proc/kcore and friends; this reads
// that from the mount table rather than spending a probe process.
func ProcMountable() error {
	if Simulated("no-proc") {
		return errors.New(SimulateEnv + " says /proc cannot be mounted")
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil // no way to tell: try, and fail loudly at mount time
	}
	return procMasked(b)
}

// procMasked finds, in a mountinfo table, a mount over part of /proc that
// makes the kernel refuse a fresh procfs.
func procMasked(mountinfo []byte) error {
	for _, l := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(l)
		_, after, ok := strings.Cut(l, " - ")
		if len(f) < 5 || !ok || !strings.HasPrefix(f[4], "/proc/") {
			continue
		}
		// The kernel allows mounts on procfs's permanently empty
		// directories: binfmt_misc (or systemd's autofs for it) and nfsd.
		// Anything else over /proc masks part of it.
		switch fstype := strings.Fields(after)[0]; fstype {
		case "binfmt_misc", "autofs", "nfsd":
			continue
		}
		return fmt.Errorf("%s is mounted over part of this /proc (a container's masks)", f[4])
	}
	return nil
}
