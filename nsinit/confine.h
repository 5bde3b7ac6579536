//go:build linux && cgo

/*
 * The init's identity and confinement steps (identity.c, confine.c), as
 * wire records. Go decides every value (which limits, which capabilities
 * mode, which Landlock rules, which BPF program); C only executes the
 * records of one message, in order, on the calling thread. Go reads these
 * names through cgo (confine_cgo_linux.go), so the two cannot disagree.
 *
 * A message is checked whole before anything is applied: a record of an
 * unknown kind, with the wrong number of ints or blobs, or with a path
 * holding a NUL of its own, refuses the message and changes nothing.
 */
#ifndef HUTCH_CONFINE_H
#define HUTCH_CONFINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Identity (identity.c). */
#define STEP_KEYRING 1  /* join a new anonymous session keyring */
#define STEP_HOSTNAME 2 /* blobs: the host name */
#define STEP_LOOPBACK 3 /* bring "lo" up in this network namespace */
#define STEP_USER_COUNT 4 /* ints: value; blobs: a /proc/sys/user file: write value
			   * (the file missing, an older kernel: nothing) */

/* Confinement (confine.c). */
#define STEP_RLIMIT 10       /* ints: pid (0: this process), resource, soft, hard; never raises */
#define STEP_CGROUP_JOIN 11  /* ints: a v1 tasks fd this thread joins */
#define STEP_CAPS 12         /* ints: STEP_CAPS_* mode, securebits */
#define STEP_LL_RULESET 13   /* ints: handled fs, handled net, scoped, attr size, ABI */
#define STEP_LL_PATH 14      /* ints: access for a directory, for anything else; blobs: path */
#define STEP_LL_PORT 15      /* ints: access, TCP port */
#define STEP_LL_RESTRICT 16  /* no_new_privs, then restrict this thread to the ruleset */
#define STEP_SECCOMP 17      /* ints: SECCOMP_SET_MODE_FILTER flags; blobs: the BPF program */
#define STEP_LL_RULESET_FD 18 /* ints: fd of a ruleset the host began, which this step takes over */

/* STEP_CAPS modes. */
#define STEP_CAPS_NO_SETPCAP 0 /* no_new_privs and capset to zero only */
#define STEP_CAPS_ALL 1        /* bounding set, securebits, ambient, no_new_privs, capset */

/* The most records of one message (a Landlock carve-out may list a
 * large directory). */
#define STEP_MAX_RECORDS 4096

/* What a failed step says: the operation, the path if any, the errno. */
struct step_err {
	int err;
	char op[96];
	char path[4096];
};

/*
 * step_run checks msg[0:len] and runs its records on the calling thread.
 * It returns 0, or -1 with *e filled in. *listener is the fd of the last
 * seccomp filter loaded with SECCOMP_FILTER_FLAG_NEW_LISTENER, or -1.
 */
int step_run(const uint8_t *msg, size_t len, struct step_err *e, int *listener);

/* Set by every step that fails; returns -1. */
int step_fail(struct step_err *e, int err, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* lower_rlimit lowers limit resource of process pid (0: this one) to at
 * most soft and hard; it never raises one. It returns -1 with errno set
 * on failure. step_rlimit does the same as a plan's step. */
int lower_rlimit(pid_t pid, int resource, uint64_t soft, uint64_t hard);
int step_rlimit(pid_t pid, int resource, uint64_t soft, uint64_t hard, struct step_err *e);

/* identity.c */
int join_session_keyring(struct step_err *e);
int set_hostname(const char *name, size_t len, struct step_err *e);
int loopback_up(struct step_err *e);
int set_user_count(const char *path, uint64_t value, struct step_err *e);

#endif
