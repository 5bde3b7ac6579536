package runtime

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
)

// Backend is Policy.Backend: what enforces the sandbox. "" keeps the
// rule of Policy.MinLevel alone (by default: namespaces or nothing).
type Backend string

const (
	// BackendAuto takes the strongest this host has, rung by rung, and
	// never none: on Linux namespaces with a fresh /proc, then
	// namespaces without one (a container that masks /proc), then
	// Landlock and seccomp alone (no user namespaces); on macOS the
	// Seatbelt profile. A host with none of them refuses
	// (ErrBackendUnavailable). MinLevel, when set, is still the floor.
	BackendAuto Backend = "auto"
	// BackendNamespaces is Linux namespaces (LevelNamespaces, or
	// LevelNamespacesNoProc where /proc cannot be mounted afresh).
	BackendNamespaces Backend = "namespaces"
	// BackendLandlock is Landlock and seccomp alone (LevelLandlock), also
	// on a host that has namespaces.
	BackendLandlock Backend = "landlock"
	// BackendSeatbelt is macOS's sandbox-exec profile.
	BackendSeatbelt Backend = "seatbelt"
	// BackendOCI runs commands through an installed OCI runtime (runc,
	// crun, runsc): package oci compiles what Check decides for it, and
	// hutch run --backend oci --oci-runtime NAME runs that. New and
	// NewResolved do not run it: chosen there, it is unavailable.
	BackendOCI Backend = "oci"
	// BackendNone is Policy.Unsandboxed, the disabled mode, with the
	// same consent (Policy.AllowUnsandboxed): chosen by name, never by
	// auto.
	BackendNone Backend = "none"
)

var backends = []Backend{BackendAuto, BackendNamespaces, BackendLandlock, BackendSeatbelt, BackendOCI, BackendNone}

// ErrBackendUnavailable is matched (errors.Is) by the error of New when
// this platform or host does not have the backend the policy chose: a
// *BackendError, or a *LevelError whose Backend is set (with BackendAuto:
// none of the rungs). Nothing was run unconfined. The CLI exits 127 then,
// as an agent's own backends do.
var ErrBackendUnavailable = errors.New("sandbox backend not available")

// BackendError is a backend this platform or host does not have.
type BackendError struct {
	Backend Backend
	Reason  string
}

// Error implements error.
func (e *BackendError) Error() string {
	return fmt.Sprintf("hutch: backend %s: %s", e.Backend, e.Reason)
}

// Is makes a BackendError match ErrBackendUnavailable (errors.Is).
func (e *BackendError) Is(target error) bool { return target == ErrBackendUnavailable }

// resolveBackend checks Backend against MinLevel and the platform's
// backends, and makes BackendNone the disabled mode it is.
func resolveBackend(p *Policy) error {
	b := p.Backend
	switch {
	case b == "":
		return nil
	case !slices.Contains(backends, b):
		return &PolicyError{Field: "Backend", Value: string(b), Reason: fmt.Sprintf("not a backend (one of %v)", backends)}
	case b == BackendNone:
		p.Unsandboxed = true
		return nil
	case b == BackendLandlock && p.MinLevel != "" && p.MinLevel != LevelLandlock:
		return &PolicyError{Field: "Backend", Value: string(b), Reason: fmt.Sprintf("gives level landlock, below MinLevel %s", p.MinLevel)}
	case b == BackendOCI:
		return &BackendError{Backend: b, Reason: "a Sandbox runs commands under hutch's own backends (auto, namespaces, landlock, seatbelt); an OCI runtime runs them through package oci (hutch run --backend oci --oci-runtime NAME)"}
	}
	if own := platformBackends[goruntime.GOOS]; !slices.Contains(own, b) && b != BackendAuto {
		return &BackendError{Backend: b, Reason: fmt.Sprintf("not on %s (here: %v)", goruntime.GOOS, own)}
	}
	return nil
}

// platformBackends are the backends each platform has, strongest first.
var platformBackends = map[string][]Backend{
	"linux":  {BackendNamespaces, BackendLandlock},
	"darwin": {BackendSeatbelt},
}

// Backend says which backend enforced a level.
func (l Level) Backend() Backend {
	switch l {
	case LevelNamespaces, LevelNamespacesNoProc:
		return BackendNamespaces
	case LevelLandlock:
		return BackendLandlock
	case LevelSeatbelt:
		return BackendSeatbelt
	case LevelUnsandboxed:
		return BackendNone
	}
	return ""
}
