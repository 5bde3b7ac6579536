//go:build linux && cgo

/*
 * The init's plan (see plan.h): the config message is checked whole, each
 * record's shape and its strings, before anything of it runs, then its
 * records run in order, through the executors (confine.c, identity.c,
 * mounts.c) or, for the few steps that are the init's own, here: become
 * a child subreaper, listen for the egress proxy, load the unix wall's
 * filter and open its trees, handing the host those listeners and trees
 * on the handoff socket. What each step reports goes through report.c;
 * the plan itself decided which steps run, which may degrade and what
 * their layers are called.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "confine.h"
#include "init.h"
#include "mounts.h"
#include "plan.h"
#include "report.h"
#include "wire.h"

/* The init's plan. Its records point into the config message, which
 * lives as long as the init. */
static struct {
	const struct wire_record *recs;
	size_t nrecs;
	int ingress; /* INIT_INGRESS's handoff socket, or -1 */
} plan = {.ingress = -1};

/* handoff sends the host one record with one fd (none if fd < 0) on the
 * handoff socket. */
static int handoff(int sock, uint16_t kind, const struct wire_blob *b, unsigned nblobs, int fd)
{
	uint8_t buf[PATH_MAX + 64];
	struct wire_writer w;
	wire_begin(&w, buf, sizeof buf);
	wire_add(&w, kind, NULL, 0, b, nblobs);
	size_t n = wire_end(&w);
	if (n == 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {buf, n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
	if (fd >= 0) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	} else {
		m.msg_control = NULL;
		m.msg_controllen = 0;
	}
	ssize_t s;
	while ((s = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return s < 0 ? -1 : 0;
}

static int run_steps(const struct wire_record *r)
{
	struct step_err e;
	int listener;
	if (step_run(r->blobs[2].p, r->blobs[2].len, &e, &listener) < 0)
		return report_step_failed(r, EV_EXEC_STEPS, 0, 0, e.err, e.op, e.path);
	if (listener >= 0)
		close(listener);
	report_step_done(r);
	return 0;
}

static int run_mounts(const struct wire_record *r)
{
	struct mnt_result res;
	memset(&res, 0, sizeof res);
	if (mnt_apply(r->blobs[2].p, r->blobs[2].len, &res) < 0)
		return report_step_failed(r, EV_EXEC_MOUNTS, (uint64_t)(int64_t)res.index, res.refused, res.err, res.op,
					  res.path);
	report_step_done(r);
	return 0;
}

static int run_egress(const struct wire_record *r)
{
	uint64_t port = r->ints[1];
	int sock = (int)r->ints[2];
	if (port == 0 || port > 65535)
		return report_step_failed(r, EV_EXEC_INIT, 0, 0, EINVAL, "port", NULL);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return report_step_failed(r, EV_EXEC_INIT, 0, 0, errno, "socket", NULL);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	const char *what = NULL;
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0)
		what = "bind";
	else if (listen(l, SOMAXCONN) < 0)
		what = "listen";
	else if (handoff(sock, HANDOFF_EGRESS, NULL, 0, l) < 0)
		what = "hand off to the host";
	int err = errno;
	close(l);
	if (what != NULL)
		return report_step_failed(r, EV_EXEC_INIT, 0, 0, err, what, NULL);
	report_step_done(r);
	return 0;
}

/* run_wall loads the unix wall's notifying filter and hands the host its
 * allowed trees, opened in this view, then its listener. */
static int run_wall(const struct wire_record *r)
{
	int sock = (int)r->ints[1];
	struct step_err e;
	int listener;
	/* Its trees are the INIT_WALL_ROOT records right before it. */
	const struct wire_record *roots = r;
	while (roots > plan.recs && roots[-1].kind == INIT_WALL_ROOT)
		roots--;
	size_t nroots = (size_t)(r - roots);
	if (step_run(r->blobs[2].p, r->blobs[2].len, &e, &listener) < 0) {
		if (e.err != EINVAL || step_run(r->blobs[3].p, r->blobs[3].len, &e, &listener) < 0)
			return report_step_failed(r, EV_EXEC_STEPS, 0, 0, e.err, e.op, e.path);
	}
	if (listener < 0)
		return report_step_failed(r, EV_EXEC_INIT, 0, 0, EINVAL, "load the filter: no listener", NULL);
	for (size_t i = 0; i < nroots; i++) {
		const char *path = wire_path(&roots[i], 0);
		int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0) {
			int err = errno;
			close(listener);
			return report_step_failed(r, EV_EXEC_INIT, 0, 0, err, "open", path);
		}
		struct wire_blob b = roots[i].blobs[0];
		int rc = handoff(sock, HANDOFF_WALL_ROOT, &b, 1, fd);
		int err = errno;
		close(fd);
		if (rc < 0) {
			close(listener);
			return report_step_failed(r, EV_EXEC_INIT, 0, 0, err, "hand off to the host", path);
		}
	}
	int rc = handoff(sock, HANDOFF_WALL, NULL, 0, listener);
	int err = errno;
	close(listener);
	if (rc < 0)
		return report_step_failed(r, EV_EXEC_INIT, 0, 0, err, "hand off to the host", NULL);
	report_step_done(r);
	return 0;
}

/* The shape of each config record. */
static const struct wire_shape shapes[] = {
	{INIT_LAYER, 0, 1},	{INIT_SKIP, 0, 2},	{INIT_PHASE, 0, 1},	   {INIT_STEPS, 1, 3},
	{INIT_MOUNTS, 1, 3},	{INIT_EGRESS, 3, 2},	{INIT_WALL_ROOT, 0, 1},	   {INIT_WALL, 2, 4},
	{INIT_SUBREAPER, 1, 2}, {INIT_CHILD_RLIMIT, 3, 0}, {INIT_UNIX_WALL, 0, 2}, {INIT_INGRESS, 1, 0},
};

/* check_plan refuses a plan with a record of the wrong shape, or a path or
 * name holding a NUL of its own, before anything runs. */
static const char *check_plan(const struct wire_record *recs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct wire_record *r = &recs[i];
		const char *why = wire_check_shape(r, shapes, sizeof shapes / sizeof shapes[0]);
		if (why != NULL)
			return why;
		/* Layer, op, names and paths are C strings; nested
		 * messages (blobs 2 and 3 of steps, mounts and the wall)
		 * are not. */
		unsigned strings = r->nblobs;
		if (r->kind == INIT_STEPS || r->kind == INIT_MOUNTS || r->kind == INIT_WALL)
			strings = 2;
		for (unsigned b = 0; b < strings; b++)
			if (wire_path(r, b) == NULL)
				return "a name holding a NUL";
	}
	return NULL;
}

static int run_record(const struct wire_record *r)
{
	switch (r->kind) {
	case INIT_LAYER:
		report_layer(r);
		return 0;
	case INIT_SKIP:
		report_skipped(r);
		return 0;
	case INIT_PHASE:
		report_phase(wire_path(r, 0));
		return 0;
	case INIT_STEPS:
		return run_steps(r);
	case INIT_MOUNTS:
		return run_mounts(r);
	case INIT_EGRESS:
		return run_egress(r);
	case INIT_WALL_ROOT: /* read by the INIT_WALL after it */
	case INIT_CHILD_RLIMIT: /* read by the command's child, before its exec */
		return 0;
	case INIT_WALL:
		return run_wall(r);
	case INIT_SUBREAPER:
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
			return report_step_failed(r, EV_EXEC_INIT, 0, 0, errno, "prctl", NULL);
		report_step_done(r);
		return 0;
	case INIT_UNIX_WALL:
		report_unix_wall(r);
		return 0;
	case INIT_INGRESS: /* served once the command runs */
		plan.ingress = (int)r->ints[0];
		return 0;
	}
	return -1; /* check_plan let nothing else through */
}

/* decode_plan decodes and checks a config message into a new array of
 * records, or returns NULL with *why set. */
static struct wire_record *decode_plan(const uint8_t *msg, size_t len, size_t *n, const char **why)
{
	struct wire_record *recs = wire_decode_alloc(msg, len, WIRE_MAX_RECORDS, n, why);
	if (recs != NULL && (*why = check_plan(recs, *n)) != NULL) {
		free(recs);
		recs = NULL;
	}
	return recs;
}

int init_check(const uint8_t *msg, size_t len, const char **why)
{
	size_t n;
	struct wire_record *recs = decode_plan(msg, len, &n, why);
	free(recs);
	return recs ? 0 : -1;
}

int plan_run(const uint8_t *msg, size_t len)
{
	const char *why = NULL;
	struct wire_record *recs = decode_plan(msg, len, &plan.nrecs, &why);
	if (recs == NULL) {
		report_init_error("read config", EINVAL, why, NULL);
		return -1;
	}
	plan.recs = recs; /* kept, with msg: events name layers by pointers into them */
	report_phase("config");
	for (size_t i = 0; i < plan.nrecs; i++)
		if (run_record(&recs[i]) < 0)
			return -1;
	return 0;
}

int plan_child_rlimits(void)
{
	for (size_t i = 0; i < plan.nrecs; i++) {
		if (plan.recs[i].kind != INIT_CHILD_RLIMIT)
			continue;
		const uint64_t *v = plan.recs[i].ints;
		if (lower_rlimit(0, (int)v[0], v[1], v[2]) < 0)
			return -1;
	}
	return 0;
}

int plan_ingress_fd(void)
{
	return plan.ingress;
}

int plan_ingress_serve(void)
{
	for (;;) {
		char req[16];
		ssize_t n = recv(plan.ingress, req, sizeof req, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int rc = handoff(plan.ingress, HANDOFF_INGRESS, NULL, 0, s);
		if (s >= 0)
			close(s);
		if (rc < 0)
			return -1;
	}
}
