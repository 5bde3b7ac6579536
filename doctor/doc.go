// Package doctor reports what this host offers a sandbox and how to get
// what it lacks: user namespaces, a fresh /proc, Landlock, seccomp,
// cgroups, the system calls hutch uses, the isolation level runtime.Check
// decides here, and one real sandboxed run. It is `hutch doctor`, in the
// spirit of `runc features`; Probe is its one entry, and AppArmorProfile
// writes the profile that hosts restricting user namespaces need.
//
// It reads the host through the same probes as runtime's level ladder
// (internal/hostprobe), so that what it reports is what runtime decides.
package doctor
