//go:build linux && amd64

package runtime

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/seccomp"
)

// TestSeccompDenial: each kind of refused call is told in its own words,
// with a remedy only where a policy can allow it.
func TestSeccompDenial(t *testing.T) {
	native := uint32(unix.AUDIT_ARCH_X86_64)
	for _, tt := range []struct {
		name    string
		call    netns.Call
		profile string
		op      string
		object  string
		remedy  bool
	}{
		{"refused call", netns.Call{Nr: unix.SYS_BPF, Arch: native}, seccomp.DefaultName, "bpf", "", true},
		{"a namespace", netns.Call{Nr: unix.SYS_UNSHARE, Arch: native, Args: [6]uint64{unix.CLONE_NEWUSER}}, seccomp.DefaultName, "unshare", "", true},
		{"terminal input", netns.Call{Nr: unix.SYS_IOCTL, Arch: native, Args: [6]uint64{0, unix.TIOCSTI}}, seccomp.DefaultName, "ioctl", "TIOCSTI", false},
		{"socket family", netns.Call{Nr: unix.SYS_SOCKET, Arch: native, Args: [6]uint64{unix.AF_PACKET}}, seccomp.DefaultName, "socket", "AF_PACKET", false},
		{"setuid mode", netns.Call{Nr: unix.SYS_CHMOD, Arch: native, Args: [6]uint64{0, 0o4755}}, seccomp.DefaultName, "chmod", "", false},
		{"another architecture", netns.Call{Nr: 3, Arch: unix.AUDIT_ARCH_I386}, seccomp.DefaultName, "syscall 3 of arch 0x40000003", "", false},
		{"a caller's profile", netns.Call{Nr: unix.SYS_BPF, Arch: native}, "custom:0123", "bpf", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := seccompDenial(tt.call, unix.EPERM, tt.profile)
			if d.Op != tt.op || d.Object != tt.object || (d.Allow != nil) != tt.remedy || d.Reason == "" || d.Errno != "EPERM" || d.Rule != RuleSeccomp {
				t.Errorf("%+v (allow %+v); want op %q, object %q, a remedy %v", d, d.Allow, tt.op, tt.object, tt.remedy)
			}
			t.Log(d)
		})
	}
}

// BenchmarkNotifyFilters is what recording denials adds to making a
// Sandbox (every hutch run makes one): the default profile's notifying
// forms, the wall chained in, and the programs the host runs.
func BenchmarkNotifyFilters(b *testing.B) {
	prof, _ := seccomp.BuiltinDefault.Precompiled()
	wall, _ := seccomp.BuiltinUnixWall.Precompiled()
	for b.Loop() {
		if _, err := newNotifyFilters(prof, wall); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNotifyFiltersCached: the same programs give the same notifying
// forms, made once; other programs, or the same profile without the
// wall, give their own.
func TestNotifyFiltersCached(t *testing.T) {
	prof, _ := seccomp.BuiltinDefault.Precompiled()
	other, _ := seccomp.BuiltinDefaultNoSocket.Precompiled()
	wall, _ := seccomp.BuiltinUnixWall.Precompiled()
	a, err := newNotifyFilters(prof, wall)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newNotifyFilters(prof, wall)
	c, _ := newNotifyFilters(prof, nil)
	d, _ := newNotifyFilters(other, wall)
	if a != b {
		t.Error("the same programs made anew")
	}
	if c == a || d == a || c.WithWall != nil || string(d.Filter) == string(a.Filter) {
		t.Error("other programs given the same notifying forms")
	}
	want, _ := seccomp.Notifying(prof, wall, mustTrace(t))
	if string(a.WithWall) != string(want) {
		t.Error("the cached form is not the profile's")
	}
}

func mustTrace(t *testing.T) []byte {
	t.Helper()
	p, err := traceAttachFilter()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
