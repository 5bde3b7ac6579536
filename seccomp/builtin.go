package seccomp

import (
	"embed"
	goruntime "runtime"
	"slices"
)

//go:generate go run gen_builtin.go

// A Builtin is one of hutch's own filters that takes none of a caller's
// input, so its program is the same in every process: it is compiled ahead
// of time (go generate ./seccomp, on linux/amd64) and embedded, which
// spares each Sandbox, and so each `hutch run`, the milliseconds
// libseccomp takes to compile it. TestPrecompiled keeps the embedded
// programs equal to what libseccomp compiles now.
type Builtin string

const (
	// BuiltinDefault is Default, as a sandbox loads it when its policy
	// names no profile and allows or denies no call.
	BuiltinDefault Builtin = "default"
	// BuiltinDefaultNoSocket is WithoutSocket(Default()): the same, for a
	// sandbox without a network namespace of its own.
	BuiltinDefaultNoSocket Builtin = "default-no-socket"
	// BuiltinUnixWall is UnixWall.
	BuiltinUnixWall Builtin = "unix-wall"
	// BuiltinTraceAttach is TraceAttach.
	BuiltinTraceAttach Builtin = "trace-attach"
)

// Builtins returns every Builtin.
func Builtins() []Builtin {
	return []Builtin{BuiltinDefault, BuiltinDefaultNoSocket, BuiltinUnixWall, BuiltinTraceAttach}
}

// Profile returns b's profile, a fresh copy, or nil if b is none of
// Builtins.
func (b Builtin) Profile() *Profile {
	switch b {
	case BuiltinDefault:
		return Default()
	case BuiltinDefaultNoSocket:
		return WithoutSocket(Default())
	case BuiltinUnixWall:
		return UnixWall()
	case BuiltinTraceAttach:
		return TraceAttach()
	}
	return nil
}

// precompiledArch is the architecture the embedded programs were compiled
// for: a program checks the architecture of every system call against its
// own, so it is of use nowhere else.
const precompiledArch = "amd64"

//go:embed precompiled/*.bpf
var precompiled embed.FS

// Precompiled returns b's program as go generate compiled it (a fresh
// copy, the bytes b.Compile would return), if this build's architecture is
// the one it was compiled for. Otherwise ok is false, and the caller
// compiles b.Profile().
func (b Builtin) Precompiled() (prog []byte, ok bool) {
	if goruntime.GOARCH != precompiledArch || !slices.Contains(Builtins(), b) {
		return nil, false
	}
	prog, err := precompiled.ReadFile(b.file())
	return prog, err == nil
}

// file is where b's program is embedded from, relative to the package.
func (b Builtin) file() string { return "precompiled/" + string(b) + ".bpf" }
