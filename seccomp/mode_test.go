//go:build linux && cgo && amd64

package seccomp

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// runBPF runs a classic BPF seccomp program (as Compile exports it) on one
// system call, the way the kernel would (Program.Decide), and returns its
// verdict.
func runBPF(t *testing.T, prog []byte, nr int, args [6]uint64) uint32 {
	t.Helper()
	p, err := NewProgram(prog)
	if err != nil {
		t.Fatal(err)
	}
	return p.Decide(Data{Nr: int32(nr), Arch: unix.AUDIT_ARCH_X86_64, Args: args})
}

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | errnoEPERM
	retENOSYS = unix.SECCOMP_RET_ERRNO | errnoENOSYS
)

func verdict(r uint32) string {
	switch r {
	case retAllow:
		return "allow"
	case retEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", r)
}

// TestModeRules (issue #13): the compiled default profile refuses every
// mode-setting call whose mode carries S_ISUID or S_ISGID, whatever else
// the arguments hold, and allows every other mode; open and openat only
// when they create (O_CREAT, O_TMPFILE); openat2 and fchmodat2 fail with
// ENOSYS. ModeWall, loaded beside a caller's own profile, holds the same
// rules and lets everything else through to that profile.
func TestModeRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		prof *Profile
		// other is the verdict on calls the rules do not name.
		other uint32
	}{
		{"default profile", Default(), retENOSYS},
		{"mode wall", ModeWall(), retAllow},
		{"nested", AllowNested(Default()), retENOSYS},
	} {
		t.Run(tt.name, func(t *testing.T) { checkModeRules(t, tt.prof, tt.other) })
	}
}

func checkModeRules(t *testing.T, prof *Profile, other uint32) {
	prog, err := Compile(prof)
	if err != nil {
		t.Fatal(err)
	}
	const hi = 0xdead_beef_0000_0000 // garbage in the upper half of a register
	modes := []uint64{0, 0o644, 0o755, 0o777, 0o1777, 0o4755, 0o2755, 0o6755, 0o4000, 0o2000,
		0o2644, 0o2775 | unix.S_IFDIR, 0o4755 | unix.S_IFREG, 0o755 | unix.S_IFREG, 0o600 | unix.S_IFIFO, 0o4755 | 0x10000, 0o755 | 0x10000}
	bad := func(m uint64) bool { return m&(unix.S_ISUID|unix.S_ISGID) != 0 }
	type call struct {
		name  string
		nr    int
		flags int // -1: none
		mode  int
	}
	calls := []call{
		{"chmod", unix.SYS_CHMOD, -1, 1}, {"fchmod", unix.SYS_FCHMOD, -1, 1}, {"fchmodat", unix.SYS_FCHMODAT, -1, 2},
		{"creat", unix.SYS_CREAT, -1, 1}, {"mknod", unix.SYS_MKNOD, -1, 1}, {"mknodat", unix.SYS_MKNODAT, -1, 2},
		{"open", unix.SYS_OPEN, 1, 2}, {"openat", unix.SYS_OPENAT, 2, 3},
	}
	flagSets := []uint64{unix.O_RDONLY, unix.O_WRONLY | unix.O_CREAT, unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC,
		unix.O_TMPFILE | unix.O_WRONLY, unix.O_RDONLY | unix.O_DIRECTORY, unix.O_WRONLY | unix.O_TRUNC | unix.O_APPEND}
	for _, c := range calls {
		fs := []uint64{0}
		if c.flags >= 0 {
			fs = flagSets
		}
		for _, f := range fs {
			for _, m := range modes {
				for _, h := range []uint64{0, hi} {
					var args [6]uint64
					args[0] = 3 | h // a path pointer or an fd: irrelevant
					args[c.mode] = m | h
					if c.flags >= 0 {
						args[c.flags] = f | h
					}
					want := uint32(retAllow)
					creates := c.flags < 0 || f&(unix.O_CREAT|0o20000000) != 0 // __O_TMPFILE, which O_TMPFILE includes
					if creates && bad(m) {
						want = retEPERM
					}
					if got := runBPF(t, prog, c.nr, args); got != want {
						t.Errorf("%s(flags %#o, mode %#o, upper bits %#x): %s, want %s", c.name, f, m, h>>32, verdict(got), verdict(want))
					}
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		nr   int
		args [6]uint64
	}{
		{"openat2", unix.SYS_OPENAT2, [6]uint64{unix.AT_FDCWD & 0xffffffff, 1, 2, 24}},
		{"fchmodat2", 452, [6]uint64{unix.AT_FDCWD & 0xffffffff, 1, 0o4755, 0}},
		{"fchmodat2 plain", 452, [6]uint64{unix.AT_FDCWD & 0xffffffff, 1, 0o755, 0}},
	} {
		if got := runBPF(t, prog, c.nr, c.args); got != retENOSYS {
			t.Errorf("%s: %s, want ENOSYS", c.name, verdict(got))
		}
	}
	// The xattr family stays: security.capability is the kernel's to
	// refuse (CAP_SETFCAP), user.* xattrs must keep working.
	for _, nr := range []int{unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_CHOWN, unix.SYS_MKDIR, unix.SYS_MKDIRAT} {
		if got := runBPF(t, prog, nr, [6]uint64{1, 2, 0o6755, 4, 0}); got != retAllow {
			t.Errorf("system call %d: %s, want allow", nr, verdict(got))
		}
	}
	// io_uring would go around every filter.
	if got := runBPF(t, prog, unix.SYS_IO_URING_SETUP, [6]uint64{1}); got != retEPERM {
		t.Errorf("io_uring_setup: %s, want EPERM", verdict(got))
	}
	// The interpreter itself: a call the rules do not name, known or not.
	want := other
	if other == retENOSYS {
		want = retEPERM // mount is among the default profile's refused calls
	}
	if got := runBPF(t, prog, unix.SYS_MOUNT, [6]uint64{}); got != want {
		t.Errorf("mount: %s, want %s", verdict(got), verdict(want))
	}
	if got := runBPF(t, prog, 1000, [6]uint64{}); got != other {
		t.Errorf("system call 1000: %s, want %s", verdict(got), verdict(other))
	}
}
