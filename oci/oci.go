// Package oci is the OCI form of a resolved hutch policy: Export turns a
// runtime.Policy into an OCI runtime configuration (config.json) with the
// same view, filter and limits hutch's own inits get, and says, one line
// each, what of the policy that form cannot express; Run runs a command
// through an installed OCI runtime (runc, crun, runsc) with it. Linux
// only: an OCI runtime runs Linux containers.
package oci

// Runtimes are the OCI runtimes Run drives, by their names on PATH.
var Runtimes = []string{"runc", "crun", "runsc"}
