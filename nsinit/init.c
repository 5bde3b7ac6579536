//go:build linux && cgo

/*
 * The sandbox init (see init.h): pid 1 of the sandbox, the zygote's child,
 * running without an exec and so without the Go runtime or any of the
 * host program's code. It reads the plan Go wrote, runs it record by
 * record through the executors (confine.c, identity.c, mounts.c), reports
 * ready, waits for its command, forks and execs it, forwards the host's
 * signals to it, reaps, and when the command ends empties the sandbox and
 * reports the exit. Every decision (which steps, which may degrade, what
 * the layers are called) came from Go; this file only keeps the order.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "fds.h"
#include "files.h"
#include "init.h"
#include "mounts.h"
#include "wire.h"

#define CONTROL_FD 3
#define STATUS_FD 4

/* What a started event can list. */
#define MAX_LAYERS 32
#define MAX_SKIPPED 32
#define MAX_PHASES 16

/* The signals passed on to the command's process group (Go reads this
 * list as nsinit.Forwarded); SIGCHLD is read beside them. */
const int init_forwarded[INIT_NFORWARDED] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

struct text {
	const char *p;
	uint32_t len;
};

struct phase {
	const char *name;
	int64_t start, ns;
};

/* The init's one run. Texts and records point into the config message,
 * which lives as long as the init. */
static struct {
	const struct wire_record *recs; /* the plan */
	size_t nrecs;
	struct text layers[MAX_LAYERS];
	size_t nlayers;
	struct text skipped[MAX_SKIPPED][2]; /* layer, reason */
	size_t nskipped;
	struct phase phases[MAX_PHASES];
	size_t nphases;
	int64_t last;
	struct text unix_wall;
} st;

static int64_t monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void phase(const char *name)
{
	int64_t now = monotonic();
	if (st.nphases < MAX_PHASES)
		st.phases[st.nphases++] = (struct phase){name, st.last, now - st.last};
	st.last = now;
}

static struct text text(const char *s) { return (struct text){s, (uint32_t)strlen(s)}; }

static struct text blob_text(const struct wire_record *r, unsigned i)
{
	return (struct text){(const char *)r->blobs[i].p, r->blobs[i].len};
}

static struct wire_blob blob(struct text t) { return (struct wire_blob){(const uint8_t *)t.p, t.len}; }

static void add_layer(struct text layer)
{
	if (st.nlayers < MAX_LAYERS)
		st.layers[st.nlayers++] = layer;
}

static void add_skipped(struct text layer, struct text reason)
{
	if (st.nskipped == MAX_SKIPPED)
		return;
	st.skipped[st.nskipped][0] = layer;
	st.skipped[st.nskipped++][1] = reason;
}

/* reported says whether layer was reported enforced. */
static int reported(struct text layer)
{
	for (size_t i = 0; i < st.nlayers; i++)
		if (st.layers[i].len == layer.len && memcmp(st.layers[i].p, layer.p, layer.len) == 0)
			return 1;
	return 0;
}

/* write_all writes one whole event; the host reads every event, so a
 * failure means it is gone and there is no one left to tell. */
static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static uint8_t event_buf[64 << 10];

static void send_event(struct wire_writer *w)
{
	size_t n = wire_end(w);
	if (n > 0)
		write_all(STATUS_FD, event_buf, n);
}

static void send_simple(uint16_t kind, const uint64_t *ints, unsigned nints)
{
	struct wire_writer w;
	wire_begin(&w, event_buf, sizeof event_buf);
	wire_add(&w, kind, ints, nints, NULL, 0);
	send_event(&w);
}

/* send_error reports a failed step: the init ends after it. */
static void send_error(struct text layer, struct text op, int err, int executor, uint64_t index, int refused,
		       const char *step_op, const char *path)
{
	struct wire_writer w;
	uint64_t ints[4] = {(uint64_t)err, (uint64_t)executor, index, refused != 0};
	struct wire_blob b[4] = {blob(layer), blob(op), blob(text(step_op ? step_op : "")), blob(text(path ? path : ""))};
	wire_begin(&w, event_buf, sizeof event_buf);
	wire_add(&w, EV_ERROR, ints, 4, b, 4);
	send_event(&w);
}

/* init_error is a failed step of the init's own. */
static void init_error(const char *layer, const char *op, int err, const char *detail, const char *path)
{
	send_error(text(layer), text(op), err, EV_EXEC_INIT, 0, 0, detail, path);
}

static void send_started(pid_t pid)
{
	struct wire_writer w;
	wire_begin(&w, event_buf, sizeof event_buf);
	uint64_t p = (uint64_t)pid;
	wire_add(&w, EV_STARTED, &p, 1, NULL, 0);
	for (size_t i = 0; i < st.nlayers; i++) {
		struct wire_blob b = blob(st.layers[i]);
		wire_add(&w, EV_LAYER, NULL, 0, &b, 1);
	}
	for (size_t i = 0; i < st.nskipped; i++) {
		struct wire_blob b[2] = {blob(st.skipped[i][0]), blob(st.skipped[i][1])};
		wire_add(&w, EV_SKIPPED, NULL, 0, b, 2);
	}
	for (size_t i = 0; i < st.nphases; i++) {
		uint64_t ints[2] = {(uint64_t)st.phases[i].start, (uint64_t)st.phases[i].ns};
		struct wire_blob b = blob(text(st.phases[i].name));
		wire_add(&w, EV_PHASE, ints, 2, &b, 1);
	}
	if (st.unix_wall.len > 0) {
		struct wire_blob b = blob(st.unix_wall);
		wire_add(&w, EV_UNIX_WALL, NULL, 0, &b, 1);
	}
	send_event(&w);
}

/* step_failed handles a failed plan step: a degradable one is reported
 * skipped ("op: what failed") and the plan goes on (0); any other ends
 * the init (-1). */
static int step_failed(const struct wire_record *r, int executor, uint64_t index, int refused, int err,
		       const char *step_op, const char *path)
{
	struct text layer = blob_text(r, 0), op = blob_text(r, 1);
	if (r->ints[0] & INIT_DEGRADABLE) {
		/* The reason lives as long as the init, like the plan. */
		char *reason = NULL;
		if (asprintf(&reason, "%.*s: %s%s%s: %s", (int)op.len, op.p, step_op ? step_op : "",
			     path && *path ? " " : "", path ? path : "", strerror(err)) < 0)
			reason = NULL;
		add_skipped(layer, reason ? text(reason) : op);
		return 0;
	}
	send_error(layer, op, err, executor, index, refused, step_op, path);
	return -1;
}

static void step_done(const struct wire_record *r)
{
	if (r->ints[0] & INIT_REPORT)
		add_layer(blob_text(r, 0));
}

/* handoff sends the host one record with one fd on the handoff socket. */
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
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
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
		return step_failed(r, EV_EXEC_STEPS, 0, 0, e.err, e.op, e.path);
	if (listener >= 0)
		close(listener);
	step_done(r);
	return 0;
}

static int run_mounts(const struct wire_record *r)
{
	struct mnt_result res;
	memset(&res, 0, sizeof res);
	if (mnt_apply(r->blobs[2].p, r->blobs[2].len, &res) < 0)
		return step_failed(r, EV_EXEC_MOUNTS, (uint64_t)(int64_t)res.index, res.refused, res.err, res.op, res.path);
	step_done(r);
	return 0;
}

static int run_egress(const struct wire_record *r)
{
	uint64_t port = r->ints[1];
	int sock = (int)r->ints[2];
	if (port == 0 || port > 65535)
		return step_failed(r, EV_EXEC_INIT, 0, 0, EINVAL, "port", NULL);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return step_failed(r, EV_EXEC_INIT, 0, 0, errno, "socket", NULL);
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
		return step_failed(r, EV_EXEC_INIT, 0, 0, err, what, NULL);
	step_done(r);
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
	while (roots > st.recs && roots[-1].kind == INIT_WALL_ROOT)
		roots--;
	size_t nroots = (size_t)(r - roots);
	if (step_run(r->blobs[2].p, r->blobs[2].len, &e, &listener) < 0) {
		if (e.err != EINVAL || step_run(r->blobs[3].p, r->blobs[3].len, &e, &listener) < 0)
			return step_failed(r, EV_EXEC_STEPS, 0, 0, e.err, e.op, e.path);
	}
	if (listener < 0)
		return step_failed(r, EV_EXEC_INIT, 0, 0, EINVAL, "load the filter: no listener", NULL);
	for (size_t i = 0; i < nroots; i++) {
		const char *path = wire_path(&roots[i], 0);
		int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0) {
			int err = errno;
			close(listener);
			return step_failed(r, EV_EXEC_INIT, 0, 0, err, "open", path);
		}
		struct wire_blob b = roots[i].blobs[0];
		int rc = handoff(sock, HANDOFF_WALL_ROOT, &b, 1, fd);
		int err = errno;
		close(fd);
		if (rc < 0) {
			close(listener);
			return step_failed(r, EV_EXEC_INIT, 0, 0, err, "hand off to the host", path);
		}
	}
	int rc = handoff(sock, HANDOFF_WALL, NULL, 0, listener);
	int err = errno;
	close(listener);
	if (rc < 0)
		return step_failed(r, EV_EXEC_INIT, 0, 0, err, "hand off to the host", NULL);
	step_done(r);
	return 0;
}

/* The shape of each config record. */
static const struct wire_shape shapes[] = {
	{INIT_LAYER, 0, 1},	{INIT_SKIP, 0, 2},	{INIT_PHASE, 0, 1},	   {INIT_STEPS, 1, 3},
	{INIT_MOUNTS, 1, 3},	{INIT_EGRESS, 3, 2},	{INIT_WALL_ROOT, 0, 1},	   {INIT_WALL, 2, 4},
	{INIT_SUBREAPER, 1, 2}, {INIT_CHILD_RLIMIT, 3, 0}, {INIT_UNIX_WALL, 0, 2},
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
		add_layer(blob_text(r, 0));
		return 0;
	case INIT_SKIP:
		add_skipped(blob_text(r, 0), blob_text(r, 1));
		return 0;
	case INIT_PHASE:
		phase(wire_path(r, 0));
		return 0;
	case INIT_STEPS:
		return run_steps(r);
	case INIT_MOUNTS:
		return run_mounts(r);
	case INIT_EGRESS:
		return run_egress(r);
	case INIT_WALL_ROOT: /* read by the INIT_WALL after it */
	case INIT_CHILD_RLIMIT: /* read once the command exists */
		return 0;
	case INIT_WALL:
		return run_wall(r);
	case INIT_SUBREAPER:
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
			return step_failed(r, EV_EXEC_INIT, 0, 0, errno, "prctl", NULL);
		step_done(r);
		return 0;
	case INIT_UNIX_WALL:
		if (reported(blob_text(r, 0)))
			st.unix_wall = blob_text(r, 1);
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

/* read_frame reads one frame (u32 length, message) from the control
 * socket into a new buffer, and the fds that came with it, at most
 * maxfds (more is an error). It returns 0, 1 at EOF before the frame, or
 * -1 with errno set. */
static int read_frame(uint8_t **out, size_t *len, int *fds, size_t maxfds, size_t *nfds)
{
	uint8_t hdr[4];
	uint8_t *buf = NULL;
	size_t want = sizeof hdr, got = 0, total = 0;
	*nfds = 0;
	for (;;) {
		uint8_t *dst = buf ? buf + got : hdr + got;
		union {
			struct cmsghdr h;
			char space[CMSG_SPACE(INIT_MAX_FDS * sizeof(int))];
		} ctl;
		struct iovec iov = {dst, want - got};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
		ssize_t n = recvmsg(CONTROL_FD, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		int err = errno;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c != NULL; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
				if (*nfds < maxfds)
					fds[(*nfds)++] = fd;
				else {
					close(fd);
					err = E2BIG;
					n = -1;
				}
			}
		}
		if (n >= 0 && (m.msg_flags & MSG_CTRUNC)) {
			err = E2BIG;
			n = -1;
		}
		if (n == 0 && buf == NULL && got == 0) {
			return 1;
		}
		if (n <= 0) {
			free(buf);
			errno = n == 0 ? EPIPE : err;
			return -1;
		}
		got += (size_t)n;
		if (got < want)
			continue;
		if (buf != NULL) {
			*out = buf;
			*len = total;
			return 0;
		}
		total = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
		if (total < WIRE_HEADER || total > INIT_MAX_FRAME) {
			errno = EMSGSIZE;
			return -1;
		}
		if ((buf = malloc(total)) == NULL)
			return -1;
		got = 0;
		want = total;
	}
}

static void close_all(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* build reads and runs the plan. It returns 0 when the sandbox is
 * built, -1 when the init must end (the error was reported). */
static int build(void)
{
	uint8_t *msg;
	size_t len, nfds;
	int fds[INIT_MAX_FDS];
	int rc = read_frame(&msg, &len, fds, INIT_MAX_FDS, &nfds);
	if (rc != 0) {
		init_error("filesystem", "read config", rc > 0 ? EPIPE : errno, NULL, NULL);
		return -1;
	}
	/* The plan names the frame's fds INIT_FD_BASE + i: out of the way of
	 * those numbers first, then into place. */
	for (size_t i = 0; i < nfds; i++) {
		int high = fcntl(fds[i], F_DUPFD_CLOEXEC, INIT_FD_BASE + INIT_MAX_FDS);
		if (high < 0 || close(fds[i]) < 0) {
			init_error("filesystem", "read config", errno, "place its fds", NULL);
			return -1;
		}
		fds[i] = high;
	}
	for (size_t i = 0; i < nfds; i++) {
		if (dup3(fds[i], INIT_FD_BASE + (int)i, O_CLOEXEC) < 0 || close(fds[i]) < 0) {
			init_error("filesystem", "read config", errno, "place its fds", NULL);
			return -1;
		}
	}
	const char *why = NULL;
	struct wire_record *recs = decode_plan(msg, len, &st.nrecs, &why);
	if (recs == NULL) {
		init_error("filesystem", "read config", EINVAL, why, NULL);
		return -1;
	}
	st.recs = recs; /* kept, with msg: events name layers by pointers into them */
	phase("config");
	for (size_t i = 0; i < st.nrecs; i++)
		if (run_record(&recs[i]) < 0)
			return -1;
	return 0;
}

/* within reports whether path p is dir or lies beneath it. */
static int within(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return p[0] == '/';
	return strncmp(p, dir, n) == 0 && (p[n] == 0 || p[n] == '/');
}

/* enter_dir enters the command's working directory, which must be a real
 * path of the view: a cwd that resolved outside it (a leaked fd's path)
 * reads as "(unreachable)", and a symlink must not lead into /proc or /dev.
 * With roots, it must lie in one of them: a directory the host checked
 * may have been replaced by a symlink since. */
static int enter_dir(const char *dir, char *const *roots)
{
	if (chdir(dir) < 0) {
		init_error("filesystem", "chdir", errno, NULL, dir);
		return -1;
	}
	static char wd[PATH_MAX + 64];
	char detail[PATH_MAX + 160];
	if (syscall(SYS_getcwd, wd, sizeof wd) < 0 || wd[0] != '/') {
		snprintf(detail, sizeof detail, "working directory \"%s\" is outside the sandbox", wd[0] ? wd : dir);
		init_error("filesystem", "chdir", 0, detail, dir);
		return -1;
	}
	if (within(wd, "/proc") || within(wd, "/dev")) {
		snprintf(detail, sizeof detail, "working directory \"%s\" (through a symlink) is a kernel interface", wd);
		init_error("filesystem", "chdir", 0, detail, dir);
		return -1;
	}
	if (roots[0] == NULL)
		return 0;
	for (char *const *r = roots; *r != NULL; r++)
		if (within(wd, *r))
			return 0;
	snprintf(detail, sizeof detail,
		 "working directory \"%s\" (through a symlink) is outside the workspace and the writable paths", wd);
	init_error("filesystem", "chdir", 0, detail, dir);
	return -1;
}

/* look_up finds file in the PATH of env, as execvp would, inside the
 * view. It returns a path to exec (file itself, or a new string). */
static const char *look_up(const char *file, char *const *env)
{
	if (strchr(file, '/') != NULL) {
		if (access(file, X_OK) < 0) {
			init_error("exec", "look up command", errno, NULL, file);
			return NULL;
		}
		return file;
	}
	const char *path = "";
	for (char *const *e = env; *e != NULL; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5; /* the last one wins, as in the environment Go built */
	size_t flen = strlen(file);
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		char *cand = malloc(dlen + flen + 3);
		if (cand == NULL)
			break;
		if (dlen == 0)
			sprintf(cand, "./%s", file);
		else
			sprintf(cand, "%.*s/%s", (int)dlen, p, file);
		struct stat s;
		if (stat(cand, &s) == 0 && !S_ISDIR(s.st_mode) && access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (*end == 0)
			break;
		p = end;
	}
	char detail[PATH_MAX + 64];
	snprintf(detail, sizeof detail, "\"%s\" not found in PATH", file);
	init_error("exec", "look up command", ENOENT, detail, file);
	return NULL;
}

/* split turns a blob of NUL-terminated strings into a NULL-terminated
 * vector. */
static char **split(const struct wire_blob *b)
{
	size_t n = 0;
	for (uint32_t i = 0; i < b->len; i++)
		n += b->p[i] == 0;
	if (b->len > 0 && b->p[b->len - 1] != 0)
		return NULL;
	char **v = calloc(n + 1, sizeof *v);
	if (v == NULL)
		return NULL;
	const char *s = (const char *)b->p;
	for (size_t i = 0; i < n; i++) {
		v[i] = (char *)s;
		s += strlen(s) + 1;
	}
	return v;
}

/* A failure in the command's child before its exec. */
struct exec_err {
	int err;
	int step; /* 0 stdio, 1 exec */
};

static void child_fail(int errpipe, int step)
{
	struct exec_err ee = {errno, step};
	ssize_t unused = write(errpipe, &ee, sizeof ee);
	(void)unused;
	_exit(127);
}

/* What the command's child needs until its exec. */
struct command_args {
	const char *path;
	char *const *argv, *const *env;
	const int *stdio;
	int errpipe;
};

/* command is the command's child until its exec. It shares the init's
 * memory (CLONE_VM, see run) and runs on its own stack while the init
 * waits: it makes system calls only, and leaves through execve or
 * _exit. Its fd table and signal dispositions are its own copies. */
static int command(void *arg)
{
	const struct command_args *a = arg;
	const char *path = a->path;
	char *const *argv = a->argv, *const *env = a->env;
	const int *stdio = a->stdio;
	int errpipe = a->errpipe;
	/* A new session without a controlling terminal: TIOCSTI has no
	 * terminal to inject into. */
	if (setsid() < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(errpipe, 0);
	for (int i = 0; i < 3; i++)
		if (dup2(stdio[i], i) < 0) /* dup2 clears close-on-exec on the copy */
			child_fail(errpipe, 0);
	/* A fresh signal state: nothing blocked, SIGPIPE back to default
	 * (ignored dispositions survive an exec). */
	sigset_t none;
	sigemptyset(&none);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(path, argv, env);
	child_fail(errpipe, 1);
	return 127;
}

/* The command's child runs on this stack until its exec; the init, its
 * only other user, is suspended meanwhile (CLONE_VFORK). */
static char command_stack[64 << 10] __attribute__((aligned(16)));

/* pid_state reads the parent and the state of process pid from
 * /proc/pid/stat. */
static int pid_state(const char *pid, pid_t *ppid, char *state)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* pid (comm) state ppid ...; comm may hold spaces and parentheses. */
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	int pp;
	if (sscanf(p + 1, " %c %d", state, &pp) != 2)
		return -1;
	*ppid = pp;
	return 0;
}

/* kill_descendants SIGKILLs every live process below this one, from the
 * parent links in /proc, until none is left: without a pid namespace
 * (LevelLandlock) nothing else holds the command's processes together,
 * and this init is their subreaper, so what they fork stays below it (see
 * nsinit.KillDescendants, the host's copy of this walk). */
static void kill_descendants(void)
{
	pid_t self = getpid();
	for (int round = 0; round < 1000; round++) {
		DIR *d = opendir("/proc");
		if (d == NULL)
			return;
		size_t n = 0, cap = 256;
		struct proc {
			pid_t pid, ppid;
			char state;
			int below;
		} *ps = malloc(cap * sizeof *ps);
		struct dirent *e;
		while (ps != NULL && (e = readdir(d)) != NULL) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);
			if (*end != 0 || end == e->d_name)
				continue;
			if (n == cap) {
				void *p = realloc(ps, (cap *= 2) * sizeof *ps);
				if (p == NULL)
					break;
				ps = p;
			}
			if (pid_state(e->d_name, &ps[n].ppid, &ps[n].state) == 0) {
				ps[n].pid = (pid_t)pid;
				ps[n].below = 0;
				n++;
			}
		}
		closedir(d);
		if (ps == NULL)
			return;
		/* Mark the tree below self, to a fixed point. */
		for (int changed = 1; changed;) {
			changed = 0;
			for (size_t i = 0; i < n; i++) {
				if (ps[i].below)
					continue;
				if (ps[i].ppid == self)
					ps[i].below = changed = 1;
				else
					for (size_t j = 0; j < n; j++)
						if (ps[j].below && ps[j].pid == ps[i].ppid) {
							ps[i].below = changed = 1;
							break;
						}
			}
		}
		int live = 0;
		for (size_t i = 0; i < n; i++)
			if (ps[i].below && ps[i].state != 'Z' && ps[i].state != 'X') {
				kill(ps[i].pid, SIGKILL);
				live = 1;
			}
		free(ps);
		if (!live)
			return;
	}
}

/* empty_sandbox kills every other process of the sandbox and reaps them
 * all. Orphans are re-parented to the init (or to a subreaper, which dies
 * too), so when wait reports no children left, nothing but the init is
 * alive. A process forking while the kill goes out cannot escape: fork
 * fails for a parent with a fatal signal pending. */
static void empty_sandbox(void)
{
	if (getpid() == 1)
		kill(-1, SIGKILL);
	else /* not a pid namespace of its own: kill(-1) would reach the host */
		kill_descendants();
	while (waitpid(-1, NULL, __WALL) >= 0 || errno == EINTR)
		;
}

/* is_files says whether a command frame asks for a file server. */
static int is_files(const uint8_t *msg, size_t len)
{
	struct wire_record r;
	size_t n;
	const char *why;
	return wire_decode(msg, len, &r, 1, &n, &why) == 0 && n == 1 && r.kind == CMD_FILES && r.nints == 0 &&
	       r.nblobs == 0;
}

/* run waits for the command frame, starts the command and waits for it.
 * It returns the init's exit status. */
static int run(int sfd)
{
	uint8_t *msg;
	size_t len, nfds;
	int stdio[INIT_MAX_FDS];
	int rc = read_frame(&msg, &len, stdio, INIT_MAX_FDS, &nfds);
	if (rc > 0)
		return 0; /* the host closed the socket: a pooled init it no longer needs */
	phase("wait-command");
	if (rc == 0 && nfds == 0 && is_files(msg, len)) {
		/* A file server: nothing of the command's (the status pipe,
		 * the signalfd, the config's fds) stays open in it, so no
		 * path through /proc/self/fd reaches any of them. */
		free(msg);
		if (close_from(CONTROL_FD + 1, -1) < 0)
			return 1;
		return files_serve(CONTROL_FD);
	}
	if (rc < 0 || nfds != 3) {
		init_error("exec", "read command", rc < 0 ? errno : EINVAL, nfds != 3 ? "want 3 fds" : NULL, NULL);
		return 1;
	}
	struct wire_record r;
	size_t n;
	const char *why;
	if (wire_decode(msg, len, &r, 1, &n, &why) < 0 || n != 1 || r.kind != CMD_EXEC || r.nints != 0 ||
	    r.nblobs != 5 || wire_path(&r, 0) == NULL || wire_path(&r, 1) == NULL) {
		init_error("exec", "read command", EINVAL, "malformed", NULL);
		return 1;
	}
	const char *file = wire_path(&r, 0), *dir = wire_path(&r, 1);
	char **argv = split(&r.blobs[2]), **env = split(&r.blobs[3]), **roots = split(&r.blobs[4]);
	if (argv == NULL || env == NULL || roots == NULL) {
		init_error("exec", "read command", EINVAL, "malformed argv, env or roots", NULL);
		return 1;
	}
	if (enter_dir(dir, roots) < 0)
		return 1;
	const char *path = look_up(file, env);
	if (path == NULL)
		return 1;
	int errp[2];
	if (pipe2(errp, O_CLOEXEC) < 0) {
		init_error("exec", "exec", errno, "pipe", path);
		return 1;
	}
	/* As posix_spawn does: the child borrows the init's memory until its
	 * exec instead of a copy of it, so neither the copy nor its teardown
	 * at the exec is paid, and the init sleeps until the exec is done. */
	struct command_args args = {path, argv, env, stdio, errp[1]};
	pid_t pid = clone(command, command_stack + sizeof command_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
	int err = errno;
	close(errp[1]);
	close_all(stdio, 3); /* the init keeps no copy: output reaches EOF with the command's tree */
	if (pid < 0) {
		close(errp[0]);
		init_error("exec", "exec", err, "fork", path);
		return 1;
	}
	struct exec_err ee;
	ssize_t got;
	while ((got = read(errp[0], &ee, sizeof ee)) < 0 && errno == EINTR)
		;
	close(errp[0]);
	if (got == (ssize_t)sizeof ee) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		init_error("exec", ee.step == 0 ? "set up stdio" : "exec", ee.err, NULL, path);
		return 1;
	}
	/* Microseconds after its exec, before the dynamic loader is done: the
	 * command cannot have grown much yet. (Only the rlimit fallback for
	 * hosts without cgroups takes this path.) */
	for (size_t i = 0; i < st.nrecs; i++) {
		if (st.recs[i].kind != INIT_CHILD_RLIMIT)
			continue;
		const uint64_t *v = st.recs[i].ints;
		struct step_err e;
		if (step_rlimit(pid, (int)v[0], v[1], v[2], &e) < 0) {
			kill(pid, SIGKILL);
			send_error(text("rlimits"), text("set the command's rlimits"), e.err, EV_EXEC_STEPS, 0, 0, e.op,
				   e.path);
			empty_sandbox();
			return 1;
		}
	}
	phase("exec");
	send_started(pid);

	/* Signals go to the command's process group (it leads its session),
	 * as a terminal's ^C would send them: a shell script and the
	 * children it waits for stop together. Whatever left the group is
	 * killed with the rest of the sandbox when the command ends. */
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t s = read(sfd, &si, sizeof si);
		if (s < 0 && errno == EINTR)
			continue;
		if (s != (ssize_t)sizeof si) {
			init_error("exec", "wait", s < 0 ? errno : EIO, "signalfd", NULL);
			kill(pid, SIGKILL);
			empty_sandbox();
			return 1;
		}
		if (si.ssi_signo != SIGCHLD) {
			kill(-pid, (int)si.ssi_signo);
			continue;
		}
		int status;
		pid_t w;
		while ((w = waitpid(-1, &status, WNOHANG | __WALL)) > 0) {
			if (w != pid)
				continue;
			empty_sandbox();
			uint64_t ws = (uint64_t)(uint32_t)status;
			send_simple(EV_EXITED, &ws, 1);
			return 0;
		}
	}
}

void init_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	for (size_t i = 0; i < INIT_NFORWARDED; i++)
		sigaddset(set, init_forwarded[i]);
}

int init_main(void)
{
	st.last = monotonic();
	st.phases[st.nphases++] = (struct phase){INIT_FIRST_PHASE, st.last, 0};
	/* Nothing in the sandbox may open /proc/1/exe, /proc/1/mem or
	 * /proc/1/environ of this process, the host's binary: non-dumpable
	 * makes every such access need CAP_SYS_PTRACE, which the command
	 * never holds (CVE-2019-5736). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return 1;
	prctl(PR_SET_NAME, "hutch-init", 0, 0, 0);
	/* The host's signals wait in the signalfd until there is a command
	 * to pass them to (the creator blocked them already; blocking again
	 * keeps the init correct without one); a write to a gone host fails
	 * instead of killing. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	init_signals(&set);
	int sfd;
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
		init_error("exec", "block signals", errno, NULL, NULL);
		return 1;
	}
	if (build() < 0)
		return 1;
	send_simple(EV_READY, NULL, 0);
	return run(sfd);
}
