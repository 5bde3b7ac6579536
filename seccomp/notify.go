package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// A compiled program is struct sock_filter[] (linux/filter.h): per
// instruction a 16-bit code, two 8-bit jump offsets and a 32-bit operand,
// in the machine's byte order.
const (
	insnSize = 8
	// maxInsns is BPF_MAXINSNS: the kernel refuses a longer filter.
	maxInsns = 4096

	codeRetK = 0x06 // BPF_RET|BPF_K: return the operand
	codeRetA = 0x16 // BPF_RET|BPF_A: return the accumulator
	codeJa   = 0x05 // BPF_JMP|BPF_JA: jump forward by the operand
)

// Return values of a filter (linux/seccomp.h).
const (
	RetKillProcess uint32 = 0x80000000
	RetErrno       uint32 = 0x00050000
	RetUserNotif   uint32 = 0x7fc00000
	RetAllow       uint32 = 0x7fff0000

	retActionFull uint32 = 0xffff0000
	retData       uint32 = 0x0000ffff
	errnoENOSYSv         = 38
)

// Refused reports whether ret, a filter's return value, refuses the call
// with an errno the caller is meant to see as a refusal, and which: a
// SECCOMP_RET_ERRNO other than ENOSYS. ENOSYS says "not implemented" (the
// profile's answer to calls it does not know, and to clone3 and openat2,
// whose callers fall back to the calls it checks): no refusal to report.
func Refused(ret uint32) (errno int, ok bool) {
	if ret&retActionFull != RetErrno || ret&retData == errnoENOSYSv {
		return 0, false
	}
	return int(ret & retData), true
}

// Notifying returns prog, a compiled filter, with every refusal (Refused)
// turned into a notification (SECCOMP_RET_USER_NOTIF): loaded with a
// listener, it hands the host exactly the calls prog refuses, and the host
// answers each with prog's own errno (Decide tells it which), while the
// calls prog allows run as fast as before, never leaving the kernel. Had
// prog been loaded beside a notifying filter instead, its errno would win
// (the kernel takes the strictest action of all filters, and an errno is
// stricter than a notification), and only one filter of a process may
// have a listener.
//
// Each program of then, in order, decides the calls the one before it
// allows (its own refusals also turned into notifications): one filter
// that does what prog and then loaded one after the other would, with one
// listener (the unix wall's, UnixWall; TraceAttach). Every other action
// (kill, the calls prog leaves to ENOSYS) stays as it is.
func Notifying(prog []byte, then ...[]byte) ([]byte, error) {
	progs := [][]bpf.RawInstruction{}
	total := 0
	for _, b := range append([][]byte{prog}, then...) {
		p, err := insns(b)
		if err != nil {
			return nil, err
		}
		progs = append(progs, p)
		total += len(p)
	}
	if total > maxInsns {
		return nil, fmt.Errorf("seccomp: %d instructions with the ones after it, more than the kernel's %d", total, maxInsns)
	}
	out := make([]byte, 0, total*insnSize)
	for k, p := range progs {
		last := k == len(progs)-1
		for i, in := range p {
			if !last && in.Op == codeRetK && in.K == RetAllow {
				// Forward to the next program's first instruction,
				// right after this one's last.
				in = bpf.RawInstruction{Op: codeJa, K: uint32(len(p) - i - 1)}
			}
			out = appendInsn(out, notifyRefusal(in))
		}
	}
	return out, nil
}

func notifyRefusal(in bpf.RawInstruction) bpf.RawInstruction {
	if in.Op == codeRetK {
		if _, ok := Refused(in.K); ok {
			in.K = RetUserNotif
		}
	}
	return in
}

// insns decodes prog, refusing what Notifying cannot rewrite: a return of
// the accumulator (whose value no rewrite of constants can see; libseccomp
// never emits one).
func insns(prog []byte) ([]bpf.RawInstruction, error) {
	if len(prog)%insnSize != 0 {
		return nil, fmt.Errorf("seccomp: a program of %d bytes is not whole instructions", len(prog))
	}
	out := make([]bpf.RawInstruction, 0, len(prog)/insnSize)
	for b := prog; len(b) > 0; b = b[insnSize:] {
		in := bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(b[0:]),
			Jt: b[2],
			Jf: b[3],
			K:  binary.NativeEndian.Uint32(b[4:]),
		}
		if in.Op == codeRetA {
			return nil, errors.New("seccomp: the program returns its accumulator, which a notifying filter cannot rewrite")
		}
		out = append(out, in)
	}
	return out, nil
}

func appendInsn(b []byte, in bpf.RawInstruction) []byte {
	b = binary.NativeEndian.AppendUint16(b, in.Op)
	b = append(b, in.Jt, in.Jf)
	return binary.NativeEndian.AppendUint32(b, in.K)
}

// Data is struct seccomp_data: the call a filter judges, as a notification
// hands it to the listener.
type Data struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// A Program is a compiled filter ready to be run in this process, as the
// kernel runs it: Decide answers what it returns for a call.
type Program struct {
	vm *bpf.VM
}

// NewProgram prepares prog, a compiled filter, to be run by Decide.
func NewProgram(prog []byte) (*Program, error) {
	raw, err := insns(prog)
	if err != nil {
		return nil, err
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		return nil, errors.New("seccomp: the program holds an instruction this process cannot run")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	return &Program{vm: vm}, nil
}

// Decide is what p returns for the call d: the same value the kernel's
// run of it returns (seccomp_data's 32-bit words are what the program
// loads, in the machine's byte order).
func (p *Program) Decide(d Data) uint32 {
	var native [64]byte
	binary.NativeEndian.PutUint32(native[0:], uint32(d.Nr))
	binary.NativeEndian.PutUint32(native[4:], d.Arch)
	binary.NativeEndian.PutUint64(native[8:], d.InstructionPointer)
	for i, a := range d.Args {
		binary.NativeEndian.PutUint64(native[16+8*i:], a)
	}
	// The VM loads words big-endian, as from a packet: each word is laid
	// out so that it loads as the machine's own.
	var packet [64]byte
	for o := 0; o < len(native); o += 4 {
		binary.BigEndian.PutUint32(packet[o:], binary.NativeEndian.Uint32(native[o:]))
	}
	ret, err := p.vm.Run(packet[:])
	if err != nil {
		// Only a division by zero fails, which libseccomp never emits:
		// as the kernel does with a broken program, refuse.
		return RetKillProcess
	}
	return uint32(ret)
}
