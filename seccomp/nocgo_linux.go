//go:build linux && !cgo

package seccomp

// hutch compiles its system-call filters with libseccomp, through cgo: a
// build without cgo would have no filter to load. It fails here, with the
// remedy as the undefined name the compiler reports, rather than in the
// packages that call Compile.
const _ = hutch_needs_cgo_and_libseccomp__build_with_CGO_ENABLED_1_after_make_deps
