//go:build linux && cgo

/*
 * The init's confinement, executed from wire records (confine.h):
 *
 *   STEP_RLIMIT       lower one resource limit of this process or another
 *   STEP_CGROUP_JOIN  move this thread into a v1 cgroup (write "0" to tasks)
 *   STEP_CAPS         drop every capability for good, or (without
 *                     CAP_SETPCAP) set no_new_privs and clear what is held
 *   STEP_LL_*         build a Landlock ruleset, or finish one the host began
 *                     (STEP_LL_RULESET_FD), and restrict this thread
 *   STEP_SECCOMP      load a BPF filter on this thread, maybe with a listener
 *
 * Capabilities, no_new_privs, Landlock domains and seccomp filters belong
 * to the calling thread: the init (plan.c, single-threaded) calls step_run
 * before it forks the command, which inherits them all. Nothing here
 * decides anything; every value comes from Go.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "wire.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#define STEP_SECCOMP_FLAGS (SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)

/* struct landlock_ruleset_attr as of ABI 6 (with scoped), whatever the
 * installed headers know; Go says how much of it the kernel is given. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2
#endif

int step_fail(struct step_err *e, int err, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->op, sizeof e->op, fmt, ap);
	va_end(ap);
	e->err = err;
	snprintf(e->path, sizeof e->path, "%s", path ? path : "");
	return -1;
}

/* The shape of each kind. */
static const struct wire_shape shapes[] = {
	{STEP_KEYRING, 0, 0},	  {STEP_HOSTNAME, 0, 1},   {STEP_LOOPBACK, 0, 0}, {STEP_RLIMIT, 4, 0},
	{STEP_CGROUP_JOIN, 1, 0}, {STEP_CAPS, 2, 0},	   {STEP_LL_RULESET, 5, 0}, {STEP_LL_PATH, 2, 1},
	{STEP_LL_PORT, 2, 0},	  {STEP_LL_RESTRICT, 0, 0}, {STEP_SECCOMP, 1, 1}, {STEP_LL_RULESET_FD, 1, 0},
	{STEP_USER_COUNT, 1, 1},
};

static int refuse(struct step_err *e, size_t i, const char *why)
{
	return step_fail(e, EINVAL, NULL, "refuse step record %zu: %s", i, why);
}

/* check refuses a message that is not, record by record, something the
 * steps below can run without further checks. */
static int check(const struct wire_record *recs, size_t n, struct step_err *e)
{
	int ruleset = 0, listeners = 0;
	for (size_t i = 0; i < n; i++) {
		const struct wire_record *r = &recs[i];
		const char *why = wire_check_shape(r, shapes, sizeof shapes / sizeof shapes[0]);
		if (why != NULL)
			return refuse(e, i, why);
		switch (r->kind) {
		case STEP_HOSTNAME:
			if (wire_path(r, 0) == NULL || r->blobs[0].len > HOST_NAME_MAX)
				return refuse(e, i, "bad host name");
			break;
		case STEP_USER_COUNT:
			if (wire_path(r, 0) == NULL || strncmp(wire_path(r, 0), "/proc/sys/user/", 15) != 0 ||
			    strchr(wire_path(r, 0) + 15, '/') != NULL || r->ints[0] > INT_MAX)
				return refuse(e, i, "not a /proc/sys/user file, or a bad value");
			break;
		case STEP_RLIMIT:
			if (r->ints[0] > INT_MAX || r->ints[1] >= RLIM_NLIMITS)
				return refuse(e, i, "bad pid or resource");
			break;
		case STEP_CGROUP_JOIN:
			if (r->ints[0] > INT_MAX)
				return refuse(e, i, "bad fd");
			break;
		case STEP_CAPS:
			if (r->ints[0] > STEP_CAPS_ALL || r->ints[1] > 0xffff)
				return refuse(e, i, "bad mode or securebits");
			break;
		case STEP_LL_RULESET:
			if (ruleset++ || r->ints[3] % 8 != 0 || r->ints[3] == 0 || r->ints[3] > sizeof(struct ll_ruleset_attr) ||
			    r->ints[4] > INT_MAX)
				return refuse(e, i, "second ruleset, or bad attribute size or ABI");
			break;
		case STEP_LL_RULESET_FD:
			if (ruleset++ || r->ints[0] > INT_MAX)
				return refuse(e, i, "second ruleset, or a bad fd");
			break;
		case STEP_LL_PATH:
			if (!ruleset || wire_path(r, 0) == NULL || r->blobs[0].len == 0 || r->blobs[0].len >= PATH_MAX)
				return refuse(e, i, "path rule without a ruleset, or a bad path");
			break;
		case STEP_LL_PORT:
			if (!ruleset || r->ints[1] > 65535)
				return refuse(e, i, "port rule without a ruleset, or a bad port");
			break;
		case STEP_LL_RESTRICT:
			if (!ruleset)
				return refuse(e, i, "restrict without a ruleset");
			break;
		case STEP_SECCOMP:
			if (r->blobs[0].len == 0 || r->blobs[0].len % sizeof(struct sock_filter) != 0 ||
			    r->blobs[0].len / sizeof(struct sock_filter) > BPF_MAXINSNS)
				return refuse(e, i, "not a BPF program");
			if ((r->ints[0] & ~(uint64_t)STEP_SECCOMP_FLAGS) != 0)
				return refuse(e, i, "bad seccomp flags");
			if ((r->ints[0] & SECCOMP_FILTER_FLAG_NEW_LISTENER) && listeners++)
				return refuse(e, i, "a second listener");
			break;
		}
	}
	return 0;
}

/* Lowered to at most soft and hard, never raised: an unprivileged process
 * cannot raise a hard limit, and a sandbox never gets more than its host.
 * System calls only: the command's child calls it before its exec. */
int lower_rlimit(pid_t pid, int resource, uint64_t soft, uint64_t hard)
{
	struct rlimit cur, want;
	if (prlimit(pid, resource, NULL, &cur) < 0)
		return -1;
	want.rlim_max = hard < cur.rlim_max ? hard : cur.rlim_max;
	want.rlim_cur = soft < cur.rlim_cur ? soft : cur.rlim_cur;
	if (want.rlim_cur > want.rlim_max)
		want.rlim_cur = want.rlim_max;
	return prlimit(pid, resource, &want, NULL);
}

int step_rlimit(pid_t pid, int resource, uint64_t soft, uint64_t hard, struct step_err *e)
{
	if (lower_rlimit(pid, resource, soft, hard) < 0)
		return step_fail(e, errno, NULL, "cgroups: lower rlimit %d of %d", resource, pid);
	return 0;
}

/* Processes this thread forks afterwards are born in the group. */
static int join_cgroup(int fd, struct step_err *e)
{
	ssize_t n;
	while ((n = write(fd, "0", 1)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return step_fail(e, errno, NULL, "cgroups: join thread");
	return 0;
}

static int clear_caps(struct step_err *e)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return step_fail(e, errno, NULL, "set no_new_privs");
	if (syscall(SYS_capset, &hdr, data) < 0)
		return step_fail(e, errno, NULL, "clear capabilities");
	return 0;
}

/*
 * Leaves this thread no capability it could regain: every one out of the
 * bounding set (up to the kernel's last, where PR_CAPBSET_DROP says
 * EINVAL), root's exec-time capabilities switched off and locked by
 * securebits, no ambient ones, no new privileges through setuid or file
 * capabilities. Without CAP_SETPCAP (an ordinary user at LevelLandlock)
 * the bounding set and securebits cannot change, and nothing is held to
 * drop from them.
 */
static int drop_caps(uint64_t mode, unsigned long securebits, struct step_err *e)
{
	if (mode == STEP_CAPS_NO_SETPCAP)
		return clear_caps(e);
	for (int c = 0;; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && c > 0)
			break;
		return step_fail(e, errno, NULL, "drop capability %d from the bounding set", c);
	}
	if (prctl(PR_SET_SECUREBITS, securebits, 0, 0, 0) < 0)
		return step_fail(e, errno, NULL, "set securebits");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return step_fail(e, errno, NULL, "clear ambient capabilities");
	return clear_caps(e);
}

static int ll_ruleset(const uint64_t *ints, struct step_err *e)
{
	struct ll_ruleset_attr attr = {ints[0], ints[1], ints[2]};
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, (size_t)ints[3], 0);
	if (fd < 0)
		return step_fail(e, errno, NULL, "landlock: create ruleset (ABI %d)", (int)ints[4]);
	return fd;
}

/* A rule for path as the policy names it: a symlink gets none, a path
 * that does not exist has nothing beneath it to grant. */
static int ll_path(int ruleset, const char *path, uint64_t dir_access, uint64_t other_access, struct step_err *e)
{
	int fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : step_fail(e, errno, path, "landlock: open");
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int err = errno;
		close(fd);
		return step_fail(e, err, path, "landlock: stat");
	}
	uint64_t access = S_ISDIR(st.st_mode) ? dir_access : other_access;
	if (S_ISLNK(st.st_mode) || access == 0) {
		close(fd);
		return 0;
	}
	struct landlock_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0) {
		int err = errno;
		close(fd);
		return step_fail(e, err, path, "landlock: allow %#llx beneath", (unsigned long long)access);
	}
	close(fd);
	return 0;
}

static int ll_port(int ruleset, uint64_t access, uint64_t port, struct step_err *e)
{
	struct ll_net_port_attr rule = {access, port};
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_NET_PORT, &rule, 0) < 0)
		return step_fail(e, errno, NULL, "landlock: allow TCP connect to port %llu", (unsigned long long)port);
	return 0;
}

/* Landlock requires no_new_privs of a caller without CAP_SYS_ADMIN. */
static int ll_restrict(int ruleset, struct step_err *e)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return step_fail(e, errno, NULL, "landlock: no_new_privs");
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return step_fail(e, errno, NULL, "landlock: restrict self");
	return 0;
}

/* The program is copied out of the message, which gives it no alignment. */
static int load_seccomp(const struct wire_blob *prog, unsigned long flags, int *listener, struct step_err *e)
{
	struct sock_filter *insns = malloc(prog->len);
	if (insns == NULL)
		return step_fail(e, ENOMEM, NULL, "seccomp: load filter");
	memcpy(insns, prog->p, prog->len);
	struct sock_fprog fprog = {(unsigned short)(prog->len / sizeof *insns), insns};
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
	int err = errno;
	free(insns);
	if (r < 0)
		return step_fail(e, err, NULL, "seccomp: load filter");
	if (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)
		*listener = (int)r;
	return 0;
}

static int run(const struct wire_record *r, int *ruleset, int *listener, struct step_err *e)
{
	const uint64_t *v = r->ints;
	switch (r->kind) {
	case STEP_KEYRING:
		return join_session_keyring(e);
	case STEP_HOSTNAME:
		return set_hostname((const char *)r->blobs[0].p, r->blobs[0].len, e);
	case STEP_LOOPBACK:
		return loopback_up(e);
	case STEP_USER_COUNT:
		return set_user_count(wire_path(r, 0), v[0], e);
	case STEP_RLIMIT:
		return step_rlimit((pid_t)v[0], (int)v[1], v[2], v[3], e);
	case STEP_CGROUP_JOIN:
		return join_cgroup((int)v[0], e);
	case STEP_CAPS:
		return drop_caps(v[0], (unsigned long)v[1], e);
	case STEP_LL_RULESET:
		*ruleset = ll_ruleset(v, e);
		return *ruleset < 0 ? -1 : 0;
	case STEP_LL_RULESET_FD:
		/* Taken over whatever it is: closed with the message's end. A
		 * fd that is no ruleset fails the rules and the restriction
		 * that follow (EBADFD), never grants. */
		*ruleset = (int)v[0];
		return 0;
	case STEP_LL_PATH:
		return ll_path(*ruleset, wire_path(r, 0), v[0], v[1], e);
	case STEP_LL_PORT:
		return ll_port(*ruleset, v[0], v[1], e);
	case STEP_LL_RESTRICT:
		return ll_restrict(*ruleset, e);
	case STEP_SECCOMP:
		return load_seccomp(&r->blobs[0], (unsigned long)v[0], listener, e);
	}
	return refuse(e, 0, "unknown kind"); /* check let nothing else through */
}

int step_run(const uint8_t *msg, size_t len, struct step_err *e, int *listener)
{
	*listener = -1;
	size_t n;
	const char *why;
	int ret = -1;
	struct wire_record *recs = wire_decode_alloc(msg, len, STEP_MAX_RECORDS, &n, &why);
	if (recs == NULL)
		return step_fail(e, EINVAL, NULL, "refuse step message: %s", why);
	if (check(recs, n, e) == 0) {
		int ruleset = -1;
		size_t i = 0;
		while (i < n && run(&recs[i], &ruleset, listener, e) == 0)
			i++;
		ret = i == n ? 0 : -1;
		if (ruleset >= 0)
			close(ruleset);
		if (ret < 0 && *listener >= 0) {
			close(*listener);
			*listener = -1;
		}
	}
	free(recs);
	return ret;
}
