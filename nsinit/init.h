//go:build linux && cgo

/*
 * The sandbox init: the zygote's child, in its new namespaces, runs it
 * without an exec; or the host starts its own binary in the new
 * namespaces with argv[0] INIT_ARG0 (zygote.h, package spawn's Direct),
 * and the pre-runtime stage's constructor runs it before the Go runtime
 * exists. Either way no Go code of the host program ever runs in a
 * sandbox. It executes the plan Go wrote (package nsinit's EncodeConfig)
 * and reports what happened as events; it decides nothing itself. Its
 * files: init.c (the main loop: frames, signals, the command's lifetime),
 * plan.c (the config's records), report.c (events and what they list),
 * command.c (from the command frame to the exec), reap.c (emptying the
 * sandbox); the executors it runs the plan through are confine.c,
 * identity.c and mounts.c, and files.c is the file server it may become.
 *
 * Fds: 0-2 /dev/null, 3 the control socket (SOCK_STREAM), 4 the status
 * pipe, all close-on-exec; everything else the zygote had, or the host
 * left open across the exec, is closed before init_main runs, and every
 * fd the init opens is close-on-exec, so no fd of the init's reaches its
 * command but the stdio it dup2s (CVE-2024-21626; TestNoLeakedFds checks
 * it from the host).
 *
 * Control socket, host to init: two frames, each a u32 little-endian
 * length and a wire message (wire.h) of that length. The config frame
 * comes at once; its fds (SCM_RIGHTS, at most INIT_MAX_FDS) are moved to
 * INIT_FD_BASE, INIT_FD_BASE+1, ... in the order they came, close-on-exec,
 * and the plan names them by those numbers. The command frame comes when
 * the host has a command (at once, or much later for a pooled init) and
 * carries the command's stdin, stdout and stderr; or, with no fds, it makes
 * the init a file server (CMD_FILES, files.h) until the host closes the
 * socket. EOF instead of the command frame: the host no longer needs this
 * init; it exits 0.
 *
 * Status pipe, init to host: events, each one wire message, written whole.
 */
#ifndef HUTCH_INIT_H
#define HUTCH_INIT_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#define INIT_FD_BASE 10
#define INIT_MAX_FDS 16
/* The largest frame: a config with a large Landlock carve-out. */
#define INIT_MAX_FRAME (16u << 20)

/*
 * The config message: records run in order. "layer" and "op" name the
 * step in events; a failed step without INIT_DEGRADABLE ends the init with
 * an EV_ERROR; with it, the layer is reported skipped ("op: strerror").
 */
#define INIT_LAYER 1     /* blobs: layer; report it enforced */
#define INIT_SKIP 2      /* blobs: layer, reason; report it skipped */
#define INIT_PHASE 3     /* blobs: name; a phase ends here (EV_PHASE) */
#define INIT_STEPS 4     /* ints: flags; blobs: layer, op, a confine.h message */
#define INIT_MOUNTS 5    /* ints: flags; blobs: layer, op, a mounts.h message */
#define INIT_EGRESS 6    /* ints: flags, port, handoff fd; blobs: layer, op
			  * listen on 127.0.0.1:port, hand the listener to the host */
#define INIT_WALL_ROOT 7 /* blobs: path; a tree the INIT_WALL right after these allows */
#define INIT_WALL 8      /* ints: flags, handoff fd; blobs: layer, op, a confine.h
			  * message loading one filter with a listener, and
			  * the same for when the first fails with EINVAL;
			  * open each INIT_WALL_ROOT (O_PATH, a missing one
			  * left out), hand each and then the listener over */
#define INIT_SUBREAPER 9 /* ints: flags; blobs: layer, op; become a child subreaper */
#define INIT_CHILD_RLIMIT 10 /* ints: resource, soft, hard; lowered by the command's child before its exec */
#define INIT_UNIX_WALL 11    /* blobs: layer, how it is enforced; reported in EV_STARTED
			      * when the layer was reported enforced by then */
#define INIT_INGRESS 12      /* ints: handoff fd; while the command runs, answer each
			      * message on it with a new TCP socket (HANDOFF_INGRESS) */

/* INIT_* flags. */
#define INIT_DEGRADABLE 0x1 /* a failure skips the layer */
#define INIT_REPORT 0x2     /* success reports the layer enforced */

/* Records handed to the host on the handoff socket (nsinit.Handoff*). */
#define HANDOFF_EGRESS 1
#define HANDOFF_WALL_ROOT 2
#define HANDOFF_WALL 3
#define HANDOFF_INGRESS 4

/* The command message: one record. */
#define CMD_EXEC 0x20 /* blobs: path, dir, argv, env, roots, refused; the
		       * last four as strings each followed by a NUL */

/* The command message that makes the init a file server instead (files.h):
 * no fields, no fds. */
#define CMD_FILES 0x21

/* Events, init to host. */
#define EV_READY 0x40    /* the sandbox is built; the init waits for its command */
#define EV_STARTED 0x41  /* ints: pid; followed in its message by: */
#define EV_LAYER 0x42    /*   blobs: layer enforced */
#define EV_SKIPPED 0x43  /*   blobs: layer, reason */
#define EV_PHASE 0x44    /*   ints: start, duration (CLOCK_MONOTONIC ns); blobs: name */
#define EV_UNIX_WALL 0x45 /*  blobs: how the unix-sockets layer is enforced */
#define EV_EXITED 0x46   /* ints: wait status; the sandbox is empty */
#define EV_ERROR 0x47    /* ints: errno, executor, index, refused; blobs: layer, op, step op, path
			  * executor: EV_EXEC_INIT (the init's own step),
			  * EV_EXEC_STEPS or EV_EXEC_MOUNTS; index: for
			  * EV_EXEC_MOUNTS the failed record of the nested
			  * message (-1 as u64: none); refused: the nested
			  * message was malformed and nothing of it ran */

#define EV_EXEC_INIT 0
#define EV_EXEC_STEPS 1
#define EV_EXEC_MOUNTS 2

/* The first phase, from the init's first instruction; the host turns it
 * into "spawn" (from its request to here). */
#define INIT_FIRST_PHASE "init-start"

/* The signals the init passes on to its command's process group when it
 * receives them; any other reaches the init itself. */
#define INIT_NFORWARDED 8
extern const int init_forwarded[INIT_NFORWARDED];

/* init_signals fills set with the signals the init takes through its
 * signalfd: SIGCHLD and the forwarded ones. Its creator blocks them from
 * the init's first instruction on, because pid 1 of a namespace drops a
 * signal that is neither blocked nor handled: a SIGTERM the host sends
 * while the init is still starting would be lost, not held. */
void init_signals(sigset_t *set);

/* init_main runs the whole init and returns its exit status. */
int init_main(void);

/* init_check (plan.c) decodes a config message and checks every record's
 * shape, running nothing (for the fuzzer); it returns 0, or -1 with *why
 * set. */
int init_check(const uint8_t *msg, size_t len, const char **why);

#endif
