//go:build linux && cgo && amd64

package seccomp

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// TestAllowNested: the compiled AllowNested profile lets a command create
// every namespace with clone and unshare (but a time namespace), setns
// and chroot, which the default profile refuses; the mount API stays
// refused, and every other call keeps its verdict.
func TestAllowNested(t *testing.T) {
	const hi = 0xdead_beef_0000_0000 // garbage in the upper half of a register
	nsFlags := append(slices.Clone(cloneNamespaceFlags), cloneNewUser|cloneNewPID|cloneNewNet|cloneNewNS)
	// The clone of Chromium's zygote (CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET
	// with SIGCHLD as its exit signal), as strace shows it.
	chromium := uint64(cloneNewUser | cloneNewPID | cloneNewNet | uint64(unix.SIGCHLD))
	type call struct {
		name string
		nr   int
		arg0 uint64
	}
	var opened []call
	for _, f := range append(nsFlags, chromium) {
		opened = append(opened, call{"clone", unix.SYS_CLONE, f}, call{"unshare", unix.SYS_UNSHARE, f})
	}
	opened = append(opened, call{"setns", unix.SYS_SETNS, 3}, call{"chroot", unix.SYS_CHROOT, 0})
	still := []call{
		{"unshare(CLONE_NEWTIME)", unix.SYS_UNSHARE, cloneNewTime},
		{"unshare(CLONE_NEWTIME|CLONE_NEWUSER)", unix.SYS_UNSHARE, cloneNewTime | cloneNewUser},
		{"mount", unix.SYS_MOUNT, 0},
		{"umount2", unix.SYS_UMOUNT2, 0},
		{"pivot_root", unix.SYS_PIVOT_ROOT, 0},
		{"open_tree", unix.SYS_OPEN_TREE, 0},
		{"bpf", unix.SYS_BPF, 0},
	}
	def, err := Compile(Default())
	if err != nil {
		t.Fatal(err)
	}
	nested, err := Compile(AllowNested(Default()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range opened {
		if c.arg0 == 0 || c.name == "setns" || c.name == "chroot" {
			if got := runBPF(t, def, c.nr, [6]uint64{c.arg0}); got != retEPERM {
				t.Errorf("default: %s(%#x): %s, want EPERM", c.name, c.arg0, verdict(got))
			}
		}
		for _, a := range []uint64{c.arg0, c.arg0 | hi} {
			if got := runBPF(t, nested, c.nr, [6]uint64{a}); got != retAllow {
				t.Errorf("nested: %s(%#x): %s, want allow", c.name, a, verdict(got))
			}
			if c.name == "clone" || c.name == "unshare" {
				if got := runBPF(t, def, c.nr, [6]uint64{a}); got != retEPERM {
					t.Errorf("default: %s(%#x): %s, want EPERM", c.name, a, verdict(got))
				}
			}
		}
	}
	for _, c := range still {
		if got := runBPF(t, nested, c.nr, [6]uint64{c.arg0}); got != retEPERM {
			t.Errorf("nested: %s: %s, want EPERM", c.name, verdict(got))
		}
	}
	// Everything the default profile decides, but the four, it still
	// decides the same way.
	for nr := range 460 {
		switch nr {
		case unix.SYS_CLONE, unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_CHROOT:
			continue
		}
		args := [6]uint64{1, 2, 0o6755, 4, 5, 6}
		if got, want := runBPF(t, nested, nr, args), runBPF(t, def, nr, args); got != want {
			t.Errorf("system call %d: %s, default says %s", nr, verdict(got), verdict(want))
		}
	}
}

// TestAllowNestedCopies: AllowNested leaves its argument as it was, and
// replaces a custom profile's own rules for the calls it opens.
func TestAllowNestedCopies(t *testing.T) {
	p := &Profile{
		DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"read", "clone", "chroot"}, Action: specs.ActErrno},
			{Names: []string{"unshare"}, Action: specs.ActKillProcess},
		},
	}
	before, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q := AllowNested(p)
	if after, _ := Marshal(p); string(after) != string(before) {
		t.Errorf("AllowNested changed its argument:\n%s", after)
	}
	for _, s := range q.Syscalls {
		if s.Action != specs.ActAllow && slices.ContainsFunc(s.Names, func(n string) bool { return slices.Contains(Nested(), n) }) && len(s.Args) == 0 {
			t.Errorf("a rule %s for %v is left", s.Action, s.Names)
		}
	}
	if !slices.ContainsFunc(q.Syscalls, func(s specs.LinuxSyscall) bool {
		return slices.Contains(s.Names, "read") && s.Action == specs.ActErrno
	}) {
		t.Error("the profile's rule for read is gone")
	}
	if err := Check(q); err != nil {
		t.Error(err)
	}
}
