//go:build linux && cgo && amd64

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNotifying: the notifying form of the default profile hands the host
// exactly the calls the profile refuses (an errno other than ENOSYS),
// keeps every other verdict, and with the unix wall chained after it
// decides each call as the two filters loaded one after the other would,
// but with notifications in place of their refusals; the host learns the
// errno to answer by running the profile itself (Decide, Refused).
func TestNotifying(t *testing.T) {
	def, ok := BuiltinDefault.Precompiled()
	if !ok {
		t.Fatal("no precompiled default")
	}
	wall, ok := BuiltinUnixWall.Precompiled()
	if !ok {
		t.Fatal("no precompiled unix wall")
	}
	alone, err := Notifying(def)
	if err != nil {
		t.Fatal(err)
	}
	chained, err := Notifying(def, wall)
	if err != nil {
		t.Fatal(err)
	}
	if len(alone) != len(def) || len(chained) != len(def)+len(wall) {
		t.Fatalf("lengths %d, %d; want %d, %d", len(alone), len(chained), len(def), len(def)+len(wall))
	}
	progs := map[string]*Program{}
	for name, b := range map[string][]byte{"def": def, "wall": wall, "alone": alone, "chained": chained} {
		if progs[name], err = NewProgram(b); err != nil {
			t.Fatal(name, err)
		}
	}
	const (
		afUnix = 1
		dgram  = 2
		stream = 1
	)
	for _, tt := range []struct {
		name    string
		nr      int
		args    [6]uint64
		arch    uint32
		def     uint32 // the profile's verdict
		wall    uint32 // the unix wall's
		alone   uint32
		chained uint32
	}{
		{"read", unix.SYS_READ, [6]uint64{}, 0, RetAllow, RetAllow, RetAllow, RetAllow},
		{"bpf", unix.SYS_BPF, [6]uint64{}, 0, RetErrno | 1, RetAllow, RetUserNotif, RetUserNotif},
		{"mount", unix.SYS_MOUNT, [6]uint64{}, 0, RetErrno | 1, RetAllow, RetUserNotif, RetUserNotif},
		{"clone with a user namespace", unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWUSER}, 0, RetErrno | 1, RetAllow, RetUserNotif, RetUserNotif},
		{"clone of a thread", unix.SYS_CLONE, [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD}, 0, RetAllow, RetAllow, RetAllow, RetAllow},
		{"clone3: ENOSYS, no refusal", unix.SYS_CLONE3, [6]uint64{}, 0, RetErrno | 38, RetAllow, RetErrno | 38, RetErrno | 38},
		{"unknown call: ENOSYS", 999, [6]uint64{}, 0, RetErrno | 38, RetAllow, RetErrno | 38, RetErrno | 38},
		{"connect", unix.SYS_CONNECT, [6]uint64{3}, 0, RetAllow, RetUserNotif, RetAllow, RetUserNotif},
		{"unix stream socket", unix.SYS_SOCKET, [6]uint64{afUnix, stream}, 0, RetAllow, RetAllow, RetAllow, RetAllow},
		{"unix datagram socket", unix.SYS_SOCKET, [6]uint64{afUnix, dgram}, 0, RetAllow, RetErrno | 13, RetAllow, RetUserNotif},
		{"chmod setuid", unix.SYS_CHMOD, [6]uint64{0, 0o4755}, 0, RetErrno | 1, RetAllow, RetUserNotif, RetUserNotif},
		{"another architecture", unix.SYS_READ, [6]uint64{}, unix.AUDIT_ARCH_I386, RetErrno | 1, RetErrno | 1, RetUserNotif, RetUserNotif},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Data{Nr: int32(tt.nr), Arch: unix.AUDIT_ARCH_X86_64, Args: tt.args}
			if tt.arch != 0 {
				d.Arch = tt.arch
			}
			for name, want := range map[string]uint32{"def": tt.def, "wall": tt.wall, "alone": tt.alone, "chained": tt.chained} {
				got := progs[name].Decide(d)
				if got != want {
					t.Errorf("%s decides %#x, want %#x", name, got, want)
				}
			}
		})
	}
}

// TestNotifyingChain: with the ptrace watch chained after the profile and
// the wall, an attach by pid is notified, every other ptrace request and
// what the profile and the wall decide are as before.
func TestNotifyingChain(t *testing.T) {
	var progs [][]byte
	for _, b := range []Builtin{BuiltinDefault, BuiltinUnixWall, BuiltinTraceAttach} {
		p, ok := b.Precompiled()
		if !ok {
			t.Fatal(b, "not precompiled")
		}
		progs = append(progs, p)
	}
	chain, err := Notifying(progs[0], progs[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProgram(chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		nr   int
		args [6]uint64
		want uint32
	}{
		{"ptrace attach", unix.SYS_PTRACE, [6]uint64{unix.PTRACE_ATTACH, 1}, RetUserNotif},
		{"ptrace seize", unix.SYS_PTRACE, [6]uint64{unix.PTRACE_SEIZE, 1}, RetUserNotif},
		{"ptrace peek", unix.SYS_PTRACE, [6]uint64{unix.PTRACE_PEEKDATA, 1}, RetAllow},
		{"ptrace traceme", unix.SYS_PTRACE, [6]uint64{unix.PTRACE_TRACEME}, RetAllow},
		{"connect", unix.SYS_CONNECT, [6]uint64{3}, RetUserNotif},
		{"bpf", unix.SYS_BPF, [6]uint64{}, RetUserNotif},
		{"read", unix.SYS_READ, [6]uint64{}, RetAllow},
		{"unknown", 999, [6]uint64{}, RetErrno | 38},
	} {
		if got := p.Decide(Data{Nr: int32(tt.nr), Arch: unix.AUDIT_ARCH_X86_64, Args: tt.args}); got != tt.want {
			t.Errorf("%s: %#x, want %#x", tt.name, got, tt.want)
		}
	}
}

func TestRefused(t *testing.T) {
	for _, tt := range []struct {
		ret   uint32
		errno int
		ok    bool
	}{
		{RetErrno | 1, 1, true},
		{RetErrno | 13, 13, true},
		{RetErrno | 38, 0, false},
		{RetAllow, 0, false},
		{RetUserNotif, 0, false},
		{RetKillProcess, 0, false},
	} {
		if errno, ok := Refused(tt.ret); errno != tt.errno || ok != tt.ok {
			t.Errorf("Refused(%#x) = %d, %v; want %d, %v", tt.ret, errno, ok, tt.errno, tt.ok)
		}
	}
}

func TestNotifyingRefuses(t *testing.T) {
	retA := []byte{0x16, 0, 0, 0, 0, 0, 0, 0}
	for name, prog := range map[string][]byte{
		"part of an instruction":  {0x06, 0, 0},
		"returns its accumulator": retA,
	} {
		if _, err := Notifying(prog); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	long := make([]byte, insnSize*maxInsns)
	if _, err := Notifying(long, []byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}); err == nil {
		t.Error("a program beyond the kernel's length: no error")
	}
}

func TestSyscallName(t *testing.T) {
	for nr, want := range map[int32]string{unix.SYS_BPF: "bpf", unix.SYS_MOUNT: "mount", unix.SYS_CONNECT: "connect"} {
		if got := SyscallName(nr, unix.AUDIT_ARCH_X86_64); got != want {
			t.Errorf("SyscallName(%d) = %q, want %q", nr, got, want)
		}
	}
	if got := SyscallName(3, unix.AUDIT_ARCH_I386); got != "syscall 3 of arch 0x40000003" {
		t.Errorf("another architecture's call: %q", got)
	}
}
