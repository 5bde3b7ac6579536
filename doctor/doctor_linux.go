//go:build linux

package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/internal/hostprobe"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// Report is what this host offers a sandbox, and what it lacks with
// the remedy for each gap: `hutch doctor`'s content, in the spirit of
// `runc features`.
type Report struct {
	Kernel   string         `json:"kernel"`
	Arch     string         `json:"arch"`
	UID      int            `json:"uid"`
	UserNS   UserNSReport   `json:"userns"`
	Proc     FeatureReport  `json:"proc_mount"`
	Landlock LandlockReport `json:"landlock"`
	Seccomp  SeccompReport  `json:"seccomp"`
	Cgroup   CgroupReport   `json:"cgroup"`
	// Syscalls says which of the system calls hutch uses when present
	// the kernel has (the rest have fallbacks or lower levels).
	Syscalls map[string]bool `json:"syscalls"`
	// Level is what `hutch run` gets here with --min-level landlock (the
	// weakest it accepts); LevelReasons why it is not higher.
	Level        runtime.Level `json:"level"`
	LevelReasons []string      `json:"level_reasons,omitempty"`
	// Run is the outcome of one real sandboxed command at that level.
	Run      *RunReport `json:"run,omitempty"`
	Remedies []Remedy   `json:"remedies,omitempty"`
}

// FeatureReport is one feature: there or not, and why not.
type FeatureReport struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// UserNSReport describes user namespaces for the calling uid.
type UserNSReport struct {
	FeatureReport
	MaxUserNamespaces       *int `json:"max_user_namespaces,omitempty"`
	UnprivilegedUsernsClone *int `json:"unprivileged_userns_clone,omitempty"`
	AppArmorRestrictUserns  *int `json:"apparmor_restrict_unprivileged_userns,omitempty"`
}

// LandlockReport is the kernel's Landlock ABI (0: none).
type LandlockReport struct {
	ABI int `json:"abi"`
	// LSM says whether landlock is in /sys/kernel/security/lsm; nil when
	// securityfs is not mounted.
	LSM *bool  `json:"in_lsm_list,omitempty"`
	Why string `json:"reason,omitempty"`
}

// SeccompReport describes seccomp support.
type SeccompReport struct {
	Filter     bool `json:"filter"`
	UserNotify bool `json:"user_notify"`
	// Mode is this process's own seccomp mode (0 none, 2 filtered: a
	// container runtime's profile, for one).
	Mode int `json:"mode"`
}

// CgroupReport describes the cgroup layout and whether this uid can make
// groups in it.
type CgroupReport struct {
	Layout   string `json:"layout"`
	Writable bool   `json:"writable"`
	Reason   string `json:"reason,omitempty"`
}

// RunReport is one real run of `true` at the host's level.
type RunReport struct {
	OK      bool            `json:"ok"`
	Error   string          `json:"error,omitempty"`
	Layers  []runtime.Layer `json:"layers,omitempty"`
	Skipped []string        `json:"skipped,omitempty"`
	// UnixSocketWall is how the unix-sockets layer was enforced
	// (Result.UnixSocketWall).
	UnixSocketWall string `json:"unix_socket_wall,omitempty"`
}

// Remedy is one missing piece and the exact way to get it.
type Remedy struct {
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Probe probes the host: sysctls, the mount table, harmless system calls,
// and one real sandboxed command (so it spends a few processes, unlike
// runtime.New, which probes nothing per command).
func Probe(ctx context.Context) (*Report, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, err
	}
	r := &Report{Kernel: unix.ByteSliceToString(uts.Release[:]), Arch: goruntime.GOARCH, UID: os.Getuid()}

	r.UserNS.MaxUserNamespaces = hostprobe.Sysctl("/proc/sys/user/max_user_namespaces")
	r.UserNS.UnprivilegedUsernsClone = hostprobe.Sysctl("/proc/sys/kernel/unprivileged_userns_clone")
	r.UserNS.AppArmorRestrictUserns = hostprobe.Sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	if gap := hostprobe.UserNS(r.UID); gap == nil && hostprobe.Simulated("no-userns") {
		r.UserNS.Reason = hostprobe.SimulateEnv + " says no user namespaces"
	} else if gap != nil {
		r.UserNS.Reason = gap.Reason
		r.Remedies = append(r.Remedies, Remedy{Problem: "user namespaces: " + gap.Reason, Fix: gap.Remedy})
	} else {
		r.UserNS.Available = true
	}
	if err := hostprobe.ProcMountable(); err != nil {
		r.Proc.Reason = err.Error()
		r.Remedies = append(r.Remedies, Remedy{Problem: "a fresh /proc cannot be mounted: " + err.Error(), Fix: "in Docker: --security-opt systempaths=unconfined; in Kubernetes: procMount: Unmasked"})
	} else {
		r.Proc.Available = true
	}

	r.Landlock.ABI = landlock.ABI()
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		in := slices.Contains(strings.Split(strings.TrimSpace(string(b)), ","), "landlock")
		r.Landlock.LSM = &in
	}
	switch {
	case r.Landlock.ABI == 0:
		r.Landlock.Why = "the kernel has no Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK, and landlock in the lsm= boot list)"
		r.Remedies = append(r.Remedies, Remedy{Problem: "no Landlock", Fix: "boot with lsm=landlock,... appended to the kernel's LSM list (see /sys/kernel/security/lsm), on Linux 5.13 or later"})
	case r.Landlock.ABI < landlock.ReferABI:
		r.Landlock.Why = "ABI 1 cannot allow renames across directories: the namespaces level runs without the Landlock layer"
	}

	r.Seccomp = probeSeccomp()
	r.Cgroup = probeCgroup()
	if !r.Cgroup.Writable && r.UID != 0 {
		r.Remedies = append(r.Remedies, Remedy{Problem: "no cgroup for this user: limits fall back to rlimits", Fix: "run under a delegated cgroup v2 subtree: systemd-run --user --scope -p Delegate=yes hutch run ..."})
	}
	r.Syscalls = probeSyscalls()
	r.Syscalls["clone_into_cgroup"] = r.Syscalls["clone3"] && (r.Cgroup.Layout == "v2" || r.Cgroup.Layout == "hybrid")

	// The level, decided exactly as New decides it, and one real run.
	ws, err := os.MkdirTemp("", "hutch-doctor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	p := runtime.DefaultPolicy(ws)
	p.MinLevel = runtime.LevelLandlock
	decided, err := runtime.Check(p)
	var sb *runtime.Sandbox
	if err == nil {
		sb, err = runtime.NewResolved(decided)
	}
	if err != nil {
		r.Run = &RunReport{Error: err.Error()}
		var le *runtime.LevelError
		if errors.As(err, &le) {
			r.LevelReasons = le.Reasons
		}
		return r, nil
	}
	defer sb.Close()
	r.Level, r.LevelReasons = decided.Level(), decided.LevelReasons()
	if r.Level == runtime.LevelLandlock && r.UserNS.AppArmorRestrictUserns != nil && *r.UserNS.AppArmorRestrictUserns == 1 {
		exe, _ := os.Executable()
		r.Remedies = append(r.Remedies, Remedy{Problem: "AppArmor restricts unprivileged user namespaces",
			Fix: "hutch doctor --apparmor-profile | sudo tee /etc/apparmor.d/hutch && sudo apparmor_parser -r /etc/apparmor.d/hutch (a profile for " + exe + "), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"})
	}
	cmd := sb.Command(ctx, "true")
	run := &RunReport{}
	if err := cmd.Run(); err != nil {
		run.Error = err.Error()
	} else {
		run.OK = true
	}
	if cmd.Result != nil {
		run.Layers, run.UnixSocketWall = cmd.Result.Layers, cmd.Result.UnixSocketWall
		for _, s := range cmd.Result.Skipped {
			run.Skipped = append(run.Skipped, string(s.Layer)+": "+s.Reason)
		}
	}
	r.Run = run
	return r, nil
}

func probeSeccomp() SeccompReport {
	var s SeccompReport
	if m, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil {
		s.Mode = m
		s.Filter = true
	}
	// SECCOMP_GET_ACTION_AVAIL for SECCOMP_RET_USER_NOTIF.
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	s.UserNotify = e == 0
	if e == unix.ENOSYS {
		s.Filter = false
	}
	return s
}

func probeCgroup() CgroupReport {
	l, err := cgroups.Detect()
	r := CgroupReport{Layout: l.String()}
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	m, err := cgroups.NewManager()
	if err == nil {
		var g *cgroups.Group
		if g, err = m.Create(cgroups.Limits{Pids: 1}); err == nil {
			_ = g.Destroy()
			r.Writable = true
			return r
		}
	}
	r.Reason = err.Error()
	return r
}

// probeSyscalls calls each with arguments no kernel accepts: ENOSYS means
// the call is missing, any other error that it is there.
func probeSyscalls() map[string]bool {
	empty, _ := unix.BytePtrFromString("")
	p := uintptr(unsafe.Pointer(empty))
	bad := ^uintptr(0) // fd -1
	probes := map[string][6]uintptr{
		"pidfd_open":    {unix.SYS_PIDFD_OPEN, bad, bad},
		"clone3":        {unix.SYS_CLONE3, 0, 0},
		"open_tree":     {unix.SYS_OPEN_TREE, bad, p, bad},
		"move_mount":    {unix.SYS_MOVE_MOUNT, bad, p, bad, p, bad},
		"mount_setattr": {unix.SYS_MOUNT_SETATTR, bad, p, bad, 0, 0},
		"openat2":       {unix.SYS_OPENAT2, bad, p, 0, 0},
		"close_range":   {unix.SYS_CLOSE_RANGE, 5, 4, bad},
	}
	out := map[string]bool{}
	for name, a := range probes {
		_, _, e := unix.Syscall6(a[0], a[1], a[2], a[3], a[4], a[5], 0)
		out[name] = e != unix.ENOSYS
	}
	return out
}

// AppArmorProfile is an AppArmor profile that lets the hutch binary at
// exe create user namespaces on hosts that restrict them
// (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+). The
// path is resolved and quoted; one that AppArmor's syntax cannot hold
// safely is refused.
func AppArmorProfile(exe string) (string, error) {
	path, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", err
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", err
	}
	if strings.ContainsAny(path, "\"\\\n\r\x00") || strings.ContainsFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", &runtime.PolicyError{Field: "executable path", Value: path, Reason: "holds a quote, backslash or control character that an AppArmor profile cannot name safely"}
	}
	// AppArmor globbing characters in the path would widen the profile to
	// other files: escape them.
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune("*?[]{}^", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return "# AppArmor profile for hutch: lets this binary create user namespaces.\n" +
		"# Install: sudo tee /etc/apparmor.d/hutch < this file; sudo apparmor_parser -r /etc/apparmor.d/hutch\n" +
		"abi <abi/4.0>,\n" +
		"include <tunables/global>\n\n" +
		"profile hutch \"" + b.String() + "\" flags=(unconfined) {\n" +
		"  userns,\n\n" +
		"  include if exists <local/hutch>\n" +
		"}\n", nil
}
