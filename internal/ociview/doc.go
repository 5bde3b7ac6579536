// Package ociview carries a resolved policy from package runtime, which
// compiles it, to package oci, which writes it out as an OCI runtime's
// configuration or a Kubernetes Pod: the same mount plan, filter,
// environment and limits hutch's own inits get, so that each rule has one
// implementation and runtime's public surface does not grow by the form.
package ociview
