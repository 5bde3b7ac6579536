//go:build linux

package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/seccomp"
)

// compileFilter compiles the policy's seccomp profile once; every command
// only loads the result. A profile that is one of seccomp's built-in
// filters, as the default policy's is, is not compiled at all: its program
// is embedded, precompiled.
func (sb *Sandbox) compileFilter() error {
	p := &sb.policy
	prof, builtin, name, err := filterProfile(p, sb.level, tracerPassesFilters())
	if err != nil {
		return err
	}
	if sb.level != LevelLandlock && !slices.Contains(p.SkipLayers, LayerUnixSockets) {
		wall, err := unixWallFilter()
		if err != nil {
			return &LayerError{Layer: LayerUnixSockets, Reason: err.Error()}
		}
		sb.unixWall = wall
	}
	if slices.Contains(p.SkipLayers, LayerSeccomp) {
		return nil
	}
	prog, ok := builtin.Precompiled()
	if !ok {
		if builtin != "" {
			prof = builtin.Profile()
		}
		var err error
		if prog, err = compileProfile(prof); err != nil {
			return &PolicyError{Field: "Seccomp", Reason: err.Error()}
		}
	}
	sb.filter, sb.filterName = prog, name
	if sb.level != LevelLandlock && p.Denials != DenialsOff {
		if sb.notify, err = newNotifyFilters(prog, sb.unixWall); err != nil {
			return &PolicyError{Field: "Denials", Value: string(p.Denials), Reason: err.Error() + " (Denials off loads the profile as it is)"}
		}
	}
	if p.Seccomp != nil || len(p.SeccompAllow) > 0 {
		// The caller's profile, or the default with calls allowed, may
		// allow what would leave a setuid file for the host: the mode
		// rules hold apart from it. (Denying calls lifts none of them.)
		var err error
		if sb.modeWall, err = compileProfile(seccomp.ModeWall()); err != nil {
			return &LayerError{Layer: LayerSeccomp, Reason: "mode wall: " + err.Error()}
		}
	}
	return nil
}

// compileProfile is seccomp.Compile; tests replace it to see which
// profiles are compiled rather than precompiled.
var compileProfile = seccomp.Compile

var (
	unixWallOnce sync.Once
	unixWallProg []byte
	unixWallErr  error
)

// unixWallFilter is seccomp.UnixWall's program: precompiled, or else
// compiled once per process (it does not depend on the policy).
func unixWallFilter() ([]byte, error) {
	unixWallOnce.Do(func() {
		var ok bool
		if unixWallProg, ok = seccomp.BuiltinUnixWall.Precompiled(); !ok {
			unixWallProg, unixWallErr = seccomp.BuiltinUnixWall.Compile()
		}
	})
	return unixWallProg, unixWallErr
}

// filterProfile is the system-call filter of policy p at level: a
// built-in filter (builtin set, prof nil) or a profile to compile; name
// says which, for results. The one rule both hutch's own inits and the
// OCI form of a policy take their filter from. oldKernel says the kernel
// lets a tracer carry a system call past a filter (see seccomp.Tracing):
// tracing is then refused, whatever the profile says.
func filterProfile(p *Policy, level Level, oldKernel bool) (prof *seccomp.Profile, builtin seccomp.Builtin, name string, err error) {
	// The filter is the built-in one named by builtin, or prof: a built-in
	// filter's profile is only made if it must be compiled after all.
	prof, name = p.Seccomp, seccomp.DefaultName
	if prof == nil {
		builtin = seccomp.BuiltinDefault
	} else {
		js, err := seccomp.Marshal(prof)
		if err != nil {
			return nil, "", "", &PolicyError{Field: "Seccomp", Reason: err.Error()}
		}
		sum := sha256.Sum256(js)
		name = "custom:" + hex.EncodeToString(sum[:6])
	}
	for i, n := range append(slices.Clone(p.SeccompAllow), p.SeccompDeny...) {
		field := "SeccompAllow"
		if i >= len(p.SeccompAllow) {
			field, i = "SeccompDeny", i-len(p.SeccompAllow)
		}
		if n == "" || strings.ContainsAny(n, " /\x00") {
			return nil, "", "", &PolicyError{Field: fmt.Sprintf("%s[%d]", field, i), Value: n, Reason: "not a system call name"}
		}
	}
	// adjust changes the profile by change, which a built-in filter
	// cannot take: its profile is made to be compiled instead.
	adjust := func(suffix string, change func(*seccomp.Profile) *seccomp.Profile) {
		if builtin != "" {
			prof, builtin = builtin.Profile(), ""
		}
		prof = change(prof)
		name += suffix
	}
	if p.AllowNested {
		// Before SeccompDeny, which may still refuse some of the calls.
		adjust("+nested", seccomp.AllowNested)
	}
	if len(p.SeccompAllow)+len(p.SeccompDeny) > 0 {
		adjust("+adjusted", func(prof *seccomp.Profile) *seccomp.Profile {
			return seccomp.Adjust(prof, p.SeccompAllow, p.SeccompDeny)
		})
	}
	if level == LevelLandlock && p.Network != NetworkHost {
		// No network namespace: seccomp.WithoutSocket says why.
		if builtin == seccomp.BuiltinDefault {
			builtin = seccomp.BuiltinDefaultNoSocket
		} else {
			prof = seccomp.WithoutSocket(prof)
		}
		name += "+no-socket"
	}
	if oldKernel {
		adjust("+no-tracing", func(prof *seccomp.Profile) *seccomp.Profile {
			return seccomp.Adjust(prof, nil, seccomp.Tracing())
		})
	}
	return prof, builtin, name, nil
}

// tracerPassesFilters reports whether this kernel is older than Linux
// 4.8, which first ran a traced process's seccomp filter again after its
// tracer changed the system call.
var tracerPassesFilters = sync.OnceValue(func() bool { return kernelBefore(kernelRelease(), 4, 8) })

// kernelRelease is uname -r, or "" if it cannot be read (which
// kernelBefore takes for an old kernel: the worst).
var kernelRelease = sync.OnceValue(func() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
})

// kernelBefore reports whether release (uname -r: "6.18.0-1-amd64")
// names a kernel older than major.minor; one it cannot read counts as
// older.
func kernelBefore(release string, major, minor int) bool {
	var maj, min int
	if n, _ := fmt.Sscanf(release, "%d.%d", &maj, &min); n != 2 {
		return true
	}
	return maj < major || maj == major && min < minor
}
