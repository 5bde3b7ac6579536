//go:build linux

// Command guest is the helper the VM harness puts in each guest's
// initramfs (as /usr/local/bin/hutch-vm-guest), built static:
//
//	hutch-vm-guest probe                  print the layers this kernel offers, as one marker line
//	hutch-vm-guest as UID GID CMD ARGS... drop to uid/gid (no supplementary groups) and exec CMD
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hutch-vm-guest probe | as UID GID CMD ARGS...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "probe":
		probe()
	case "as":
		if len(os.Args) < 5 {
			fmt.Fprintln(os.Stderr, "usage: hutch-vm-guest as UID GID CMD ARGS...")
			os.Exit(2)
		}
		as(os.Args[2], os.Args[3], os.Args[4:])
	default:
		fmt.Fprintf(os.Stderr, "hutch-vm-guest: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func as(uidS, gidS string, argv []string) {
	uid, err1 := strconv.Atoi(uidS)
	gid, err2 := strconv.Atoi(gidS)
	if err := errors.Join(err1, err2); err != nil {
		fail(err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fail(err)
	}
	// The Go runtime applies these to every thread.
	if err := unix.Setgroups(nil); err != nil {
		fail(fmt.Errorf("setgroups: %w", err))
	}
	if err := unix.Setresgid(gid, gid, gid); err != nil {
		fail(fmt.Errorf("setresgid: %w", err))
	}
	if err := unix.Setresuid(uid, uid, uid); err != nil {
		fail(fmt.Errorf("setresuid: %w", err))
	}
	fail(unix.Exec(path, argv, os.Environ()))
}

// unixWall runs one command through the CLI, as root on the default
// policy, and returns the mechanism its Result says enforced the
// unix-sockets layer ("none" if it was not among the layers).
func unixWall() string {
	ws, err := os.MkdirTemp("/var/tmp", "probe-")
	if err != nil {
		return "error:" + err.Error()
	}
	defer os.RemoveAll(ws)
	rj := filepath.Join(ws, "result.json")
	if out, err := exec.Command("/usr/local/bin/hutch", "run", "--workspace", ws, "--result-json", rj, "--", "true").CombinedOutput(); err != nil {
		return "error:" + strings.Join(strings.Fields(string(out)), "_")
	}
	var r struct {
		Wall string `json:"unix_socket_wall"`
	}
	if b, err := os.ReadFile(rj); err != nil || json.Unmarshal(b, &r) != nil {
		return "error:no-result"
	}
	if r.Wall == "" {
		return "none"
	}
	return r.Wall
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "hutch-vm-guest:", err)
	os.Exit(126)
}

// probe prints one line:
//
//	@@HUTCH-VM LAYERS kernel=R landlock=N cgroup=v2 controllers=a,b lsm=x,y userns=1 syscalls=a,b missing=c,d@@
func probe() {
	var f []string
	var u unix.Utsname
	_ = unix.Uname(&u)
	f = append(f, "kernel="+unix.ByteSliceToString(u.Release[:]))

	// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
	ll := "none"
	if r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); e == 0 {
		ll = strconv.Itoa(int(r))
	} else if e == unix.EOPNOTSUPP {
		ll = "disabled"
	} else if e != unix.ENOSYS {
		ll = "error:" + e.Error()
	}
	f = append(f, "landlock="+ll)

	cg := "none"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil {
		switch st.Type {
		case unix.CGROUP2_SUPER_MAGIC:
			cg = "v2"
		case unix.TMPFS_MAGIC:
			cg = "v1"
		}
	}
	f = append(f, "cgroup="+cg)
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		f = append(f, "controllers="+strings.Join(strings.Fields(string(b)), ","))
	}
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		f = append(f, "lsm="+strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil {
		f = append(f, "unprivileged_userns_clone="+strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		f = append(f, "max_user_namespaces="+strings.TrimSpace(string(b)))
	}

	// Each call is made with arguments it rejects; only ENOSYS means the
	// kernel lacks it.
	calls := []struct {
		name string
		nr   uintptr
		args [6]uintptr
	}{
		{"open_tree", unix.SYS_OPEN_TREE, [6]uintptr{^uintptr(0), 0, 0}},
		{"move_mount", unix.SYS_MOVE_MOUNT, [6]uintptr{^uintptr(0), 0, ^uintptr(0), 0, 0}},
		{"fsopen", unix.SYS_FSOPEN, [6]uintptr{0, 0}},
		{"openat2", unix.SYS_OPENAT2, [6]uintptr{^uintptr(0), 0, 0, 0}},
		{"close_range", unix.SYS_CLOSE_RANGE, [6]uintptr{5, 4, 0}},
		{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{^uintptr(0), 0, 0, 0, 0}},
		{"landlock_create_ruleset", unix.SYS_LANDLOCK_CREATE_RULESET, [6]uintptr{0, 0, 1}},
	}
	var have, missing []string
	for _, c := range calls {
		_, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		if e == unix.ENOSYS {
			missing = append(missing, c.name)
		} else {
			have = append(have, c.name)
		}
	}
	// close_range's CLOSE_RANGE_CLOEXEC flag came in 5.11: on an empty
	// range above any fd it succeeds, or fails with EINVAL when unknown.
	if _, _, e := unix.Syscall(unix.SYS_CLOSE_RANGE, 1<<30, 1<<30, unix.CLOSE_RANGE_CLOEXEC); e == 0 {
		have = append(have, "close_range_cloexec")
	} else {
		missing = append(missing, "close_range_cloexec")
	}
	f = append(f, "syscalls="+strings.Join(have, ","))
	if len(missing) > 0 {
		f = append(f, "missing="+strings.Join(missing, ","))
	}
	f = append(f, "unixwall="+unixWall())
	fmt.Printf("\n@@HUTCH-VM LAYERS %s@@\n", strings.Join(f, " "))
}
