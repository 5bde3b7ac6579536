package nsinit

// ProcReadOnly and ProcMasked are the kernel interfaces under /proc that
// a command may not change or read: in every view of hutch's, and in the
// OCI form of a policy (package oci). A command as uid 0 of a host-root
// run owns /proc/sys entries; read-only is what stops it from rewriting
// kernel.core_pattern, not the missing capabilities.
var (
	ProcReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	ProcMasked   = []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "kallsyms", "config.gz"}
)
