//go:build linux && cgo

package seccomp

import (
	"fmt"
	"io"
	"os"
	goruntime "runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Compile turns p into a BPF program (struct sock_filter[], as raw bytes)
// for Load. It is the expensive step, done once per Sandbox. Every system
// call name must be known to libseccomp; an unknown one is an error that
// names it.
func Compile(p *Profile) ([]byte, error) {
	if err := Check(p); err != nil {
		return nil, err
	}
	return compile(p)
}

// Compile compiles b's profile now, with libseccomp: what go generate
// embeds, and what a caller compiles where b.Precompiled has nothing.
// Check is not applied: these profiles are hutch's own, and Check refuses
// the unix wall's notify action, which in a caller's profile would hang
// the call without a supervisor.
func (b Builtin) Compile() ([]byte, error) {
	p := b.Profile()
	if p == nil {
		return nil, fmt.Errorf("seccomp: no built-in filter %q", string(b))
	}
	return compile(p)
}

// newerSyscalls are system calls younger than the libseccomp hutch may be
// built against (Debian 12 has 2.5.4), by their native number: a filter
// that allows by default must still name them.
var newerSyscalls = map[string]int{
	"fchmodat2": unix.SYS_FCHMODAT2, // Linux 6.6, libseccomp 2.5.5
}

func compile(p *Profile) ([]byte, error) {
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp: defaultAction: %w", err)
	}
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("seccomp: new filter: %w", err)
	}
	defer f.Release()
	// A binary tree instead of a linear scan: a command's every system
	// call walks this program.
	_ = f.SetOptimize(2)
	// A system call of a foreign architecture (int 0x80, x32) fails.
	if err := f.SetBadArchAction(libseccomp.ActErrno.SetReturnCode(errnoEPERM)); err != nil {
		return nil, fmt.Errorf("seccomp: bad-arch action: %w", err)
	}
	archs := p.Architectures
	if len(archs) == 0 {
		archs = nativeArchitectures()
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, err
	}
	nativeListed := false
	for _, a := range archs {
		arch, err := libseccomp.GetArchFromString(archNames[a])
		if err != nil {
			return nil, fmt.Errorf("seccomp: architectures: %q: %w", a, err)
		}
		if arch == native {
			nativeListed = true
			continue
		}
		if err := f.AddArch(arch); err != nil {
			return nil, fmt.Errorf("seccomp: architectures: add %q: %w", a, err)
		}
	}
	if !nativeListed {
		// Only the listed architectures may pass.
		if err := f.RemoveArch(native); err != nil {
			return nil, fmt.Errorf("seccomp: architectures: %w", err)
		}
	}
	for i, s := range p.Syscalls {
		act, err := action(s.Action, s.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp: syscalls[%d]: %w", i, err)
		}
		var conds []libseccomp.ScmpCondition
		for j, a := range s.Args {
			c, err := libseccomp.MakeCondition(a.Index, operator(a.Op), a.Value, a.ValueTwo)
			if err != nil {
				return nil, fmt.Errorf("seccomp: syscalls[%d] args[%d]: %w", i, j, err)
			}
			conds = append(conds, c)
		}
		for _, name := range s.Names {
			call, err := libseccomp.GetSyscallFromName(name)
			if n, ok := newerSyscalls[name]; err != nil && ok {
				call, err = libseccomp.ScmpSyscall(n), nil
			}
			if err != nil {
				return nil, fmt.Errorf("seccomp: syscalls[%d]: unknown system call %q", i, name)
			}
			if act == def && len(conds) == 0 {
				continue // libseccomp refuses rules that repeat the default
			}
			if len(conds) == 0 {
				err = f.AddRule(call, act)
			} else {
				err = f.AddRuleConditional(call, act, conds)
			}
			if err != nil {
				return nil, fmt.Errorf("seccomp: syscalls[%d]: rule for %q: %w", i, name, err)
			}
		}
	}
	return exportBPF(f)
}

func action(a specs.LinuxSeccompAction, ret *uint) (libseccomp.ScmpAction, error) {
	code := int16(errnoEPERM)
	if ret != nil {
		code = int16(*ret)
	}
	switch a {
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActErrno:
		return libseccomp.ActErrno.SetReturnCode(code), nil
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActTrace:
		return libseccomp.ActTrace.SetReturnCode(code), nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	case specs.ActNotify:
		return libseccomp.ActNotify, nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("unsupported action %q", a)
}

func operator(op specs.LinuxSeccompOperator) libseccomp.ScmpCompareOp {
	switch op {
	case specs.OpNotEqual:
		return libseccomp.CompareNotEqual
	case specs.OpLessThan:
		return libseccomp.CompareLess
	case specs.OpLessEqual:
		return libseccomp.CompareLessOrEqual
	case specs.OpEqualTo:
		return libseccomp.CompareEqual
	case specs.OpGreaterEqual:
		return libseccomp.CompareGreaterEqual
	case specs.OpGreaterThan:
		return libseccomp.CompareGreater
	case specs.OpMaskedEqual:
		return libseccomp.CompareMaskedEqual
	}
	return libseccomp.CompareInvalid
}

// exportBPF writes the filter's program through a memfd (libseccomp 2.5
// exports only to an fd).
func exportBPF(f *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("hutch-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp: memfd: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "hutch-seccomp")
	defer mf.Close()
	if err := f.ExportBPF(mf); err != nil {
		return nil, fmt.Errorf("seccomp: export: %w", err)
	}
	if _, err := mf.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(mf)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b)%8 != 0 {
		return nil, fmt.Errorf("seccomp: export: %d bytes is not a BPF program", len(b))
	}
	return b, nil
}

// SyscallName is the name of system call nr of arch (an AUDIT_ARCH_*
// value, as seccomp_data holds it): "bpf", or "syscall 321 of arch
// 0x40000003" for one this machine's libseccomp cannot name.
func SyscallName(nr int32, arch uint32) string {
	if arch == nativeAuditArch() {
		if name, err := libseccomp.ScmpSyscall(nr).GetName(); err == nil {
			return name
		}
	}
	return fmt.Sprintf("syscall %d of arch %#x", nr, arch)
}

// Native reports whether arch (an AUDIT_ARCH_* value, as seccomp_data
// holds it) is this build's architecture: the one the profiles allow
// calls of.
func Native(arch uint32) bool { return arch == nativeAuditArch() }

// nativeAuditArch is the AUDIT_ARCH_* value of this build's architecture.
func nativeAuditArch() uint32 {
	switch goruntime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64
	case "ppc64le":
		return unix.AUDIT_ARCH_PPC64LE
	case "s390x":
		return unix.AUDIT_ARCH_S390X
	}
	return 0
}
