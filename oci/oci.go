// Package oci is the OCI form of a resolved hutch policy: Export compiles
// a runtime.Resolved (runtime.Check's decision) into an OCI runtime
// configuration (config.json) with the same view, filter and limits
// hutch's own inits get, and says, one line each, what of the policy
// that form cannot express; Run runs a command
// through an installed OCI runtime (runc, crun, runsc) with it, as root
// or, rootless (Options.Rootless), as another user where the runtime can;
// Probe judges that on the host for hutch doctor --oci. Pod turns the
// same policy into a Kubernetes Pod manifest (with the NetworkPolicy and
// ConfigMap it needs, its seccomp profile as the Security Profiles
// Operator's SeccompProfile, and the policy's environment, not this
// host's), saying as well what a Pod cannot express. Linux only: an OCI
// runtime runs Linux containers.
package oci

// Runtimes are the OCI runtimes Run drives, by their names on PATH.
var Runtimes = []string{"runc", "crun", "runsc"}
