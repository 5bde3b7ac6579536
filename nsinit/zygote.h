//go:build linux && cgo

/*
 * The zygote's protocol (see zygote.c), as wire records. Package spawn
 * speaks it from the host through the Go names cgo_linux.go gives these.
 */
#ifndef HUTCH_ZYGOTE_H
#define HUTCH_ZYGOTE_H

/* argv[0] that makes the binary the zygote before the Go runtime starts. */
#define ZYGOTE_ARG0 "hutch-spawn"
/* argv[0] that makes the binary a sandbox init the host started itself,
 * with no zygote (package spawn's Direct): already in its namespaces, its
 * ids mapped, its fds 0 to 4 in place (init.h). */
#define INIT_ARG0 "hutch-init"
/* The zygote's end of its socket with the host. */
#define ZYGOTE_FD 3

/* Requests, host to zygote. */
#define ZYG_SPAWN 1 /* ints: id, clone flags, uid, gid, flags; fds: ZYG_SPAWN_FDS, +1 with ZYG_INTO_CGROUP */
#define ZYG_KILL 2  /* ints: id, signal */
#define ZYG_PREPARE 3 /* ints: clone flags, uid, gid: the spare's kind (flags 0: none) */

/* Replies, zygote to host. */
#define ZYG_STARTED 0x81 /* ints: id, host pid */
#define ZYG_FAILED 0x82  /* ints: id, errno; blobs: the failed step */
#define ZYG_EXITED 0x83  /* ints: id, wait status */

/* ZYG_SPAWN flags. */
#define ZYG_INTO_CGROUP 1 /* the last fd is a cgroup v2 directory to clone into */

/* A spawn carries the init's stdin, stdout, stderr, control socket and
 * status pipe, which it gets as fds 0 to 4 (see init.h). */
#define ZYG_SPAWN_FDS 5

/* The largest request; requests carry no configuration. */
#define ZYG_MAX_MSG 4096

#endif
