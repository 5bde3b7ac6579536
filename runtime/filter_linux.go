//go:build linux

package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/seccomp"
)

// only loads the result.
func (sb *Sandbox) compileFilter() error {
	p := &sb.policy
	prof, name := p.Seccomp, seccomp.DefaultName
	if prof == nil {
		prof = seccomp.Default()
	} else {
		js, err := seccomp.Marshal(prof)
		if err != nil {
			return &PolicyError{Field: "Seccomp", Reason: err.Error()}
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
			return &PolicyError{Field: fmt.Sprintf("%s[%d]", field, i), Value: n, Reason: "not a system call name"}
		}
	}
	if len(p.SeccompAllow)+len(p.SeccompDeny) > 0 {
		prof = seccomp.Adjust(prof, p.SeccompAllow, p.SeccompDeny)
		name += "+adjusted"
	}
	if sb.level == LevelLandlock && p.Network != NetworkHost {
		// No network namespace: the host's network, its loopback services
		// and its unix sockets are all a socket(2) away. socketpair(2)
		// stays: pipes between a program's own processes need no network.
		prof = seccomp.Adjust(prof, nil, []string{"socket"})
		name += "+no-socket"
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
	prog, err := seccomp.Compile(prof)
	if err != nil {
		return &PolicyError{Field: "Seccomp", Reason: err.Error()}
	}
	sb.filter, sb.filterName = prog, name
	if p.Seccomp != nil || len(p.SeccompAllow) > 0 {
		// The caller's profile, or the default with calls allowed, may
		// allow what would leave a setuid file for the host: the mode
		// rules hold apart from it. (Denying calls lifts none of them.)
		if sb.modeWall, err = seccomp.Compile(seccomp.ModeWall()); err != nil {
			return &LayerError{Layer: LayerSeccomp, Reason: "mode wall: " + err.Error()}
		}
	}
	return nil
}

var (
	unixWallOnce sync.Once
	unixWallProg []byte
	unixWallErr  error
)

// unixWallFilter is seccomp.UnixWall compiled, once per process: it does
// not depend on the policy.
func unixWallFilter() ([]byte, error) {
	unixWallOnce.Do(func() { unixWallProg, unixWallErr = seccomp.BuiltinUnixWall.Compile() })
	return unixWallProg, unixWallErr
}
