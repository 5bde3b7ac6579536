// Package policyfile owns hutch's policy files: a runtime.Policy written
// as TOML, read with file and line in every error, layered on the
// embedded default (default.toml, which is exactly runtime.DefaultPolicy),
// with named profiles on top.
//
//	version = 1
//	[sandbox]
//	writable = ["~/.cache/pip"]
//	network = "allow"
//	package_managers = ["python"]
//	[profiles.offline]
//	network = "none"
//
// A file sets only the keys it names; the rest keep the value of the
// layer below. Paths may start with ~ (the host's home, as Policy.Deny
// takes it); seccomp's path is relative to the file.
package policyfile
