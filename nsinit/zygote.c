//go:build linux && cgo

/*
 * The zygote: the process every sandbox is cloned from.
 *
 * The host starts its own binary again with argv[0] ZYGOTE_ARG0. The
 * constructor below sees that before the Go runtime exists and never
 * returns, so none of the host program's Go code (its runtime, its
 * packages' init functions) runs here: the process stays single-threaded
 * and small, and cloning it with namespace flags costs the same whatever
 * the host's heap. It answers requests on ZYGOTE_FD (SOCK_SEQPACKET, wire
 * records, see zygote.h), one at a time:
 *
 *   ZYG_SPAWN  clone a sandbox init into the namespaces and the cgroup the
 *              host chose, map the host's uid and gid in its user
 *              namespace, and run the init (init.c) in it with the
 *              request's fds as 0 to 4; reply ZYG_STARTED with its pid or
 *              ZYG_FAILED
 *   ZYG_KILL   signal an init the zygote started
 *   ZYG_PREPARE keep a spare of the kind asked for: an init cloned ahead,
 *              taken by the next ZYG_SPAWN that asks the same clone flags
 *              and ids, so that a spawn's clone (the namespaces made, the
 *              ids mapped, the child's first run) is not on its path
 *   (reaped)   ZYG_EXITED with the init's wait status
 *
 * A spare waits on a socket of its own for the request's fds. It is
 * cloned without CLONE_NEWCGROUP and unshares that namespace once the
 * zygote has moved it into the request's cgroup, so that the namespace's
 * root is that cgroup, as a clone into it makes it. Its mount namespace is
 * a copy of the host's at its clone: a change of the host's mounts since
 * (POLLPRI on /proc/self/mountinfo) discards it. Once taken or discarded,
 * it is made again when an init ends (most likely, a command did): not
 * right after the spawn, where its clone would compete for the CPU with
 * the sandbox being built, nor at every change of a busy host's mounts.
 *
 * Go decides everything (flags, ids, and the init's whole plan);
 * this file only executes a request. When the host closes its end, the
 * zygote kills its inits and exits; when the host dies, the kernel kills
 * the zygote (the host sets PR_SET_PDEATHSIG), and each init with it.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fds.h"
#include "init.h"
#include "wire.h"
#include "zygote.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* The namespaces a request may ask for; anything else is refused. */
#define ZYG_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

struct init_entry {
	uint64_t id;
	pid_t pid;
};

static struct init_entry *inits;
static size_t ninits, capinits;

/* The spare (see above): its kind, as ZYG_PREPARE asked (flags 0: none),
 * and the zygote's ends of its socket and error pipe while one waits. */
static struct {
	uint64_t flags, uid, gid;
	pid_t pid; /* 0: none waits */
	int sock, errp;
} spare = {.sock = -1, .errp = -1};

/* /proc/self/mountinfo: POLLPRI says the host's mounts changed. */
static int mounts_fd = -1;

/* A pidfd of the zygote itself, which its clones poll (-1 without
 * pidfd_open, Linux 5.3). */
static int zygote_pidfd = -1;

/* A step of a spawn that failed, as the child reports it to the zygote. */
struct child_err {
	int err;
	char step[48];
};

static void reply(uint16_t kind, const uint64_t *ints, unsigned nints, const char *step)
{
	uint8_t buf[256];
	struct wire_writer w;
	struct wire_blob b = {(const uint8_t *)step, step ? (uint32_t)strlen(step) : 0};
	wire_begin(&w, buf, sizeof buf);
	wire_add(&w, kind, ints, nints, &b, step ? 1 : 0);
	size_t n = wire_end(&w);
	if (n == 0)
		return;
	/* The host reads every reply; a full socket means it is gone. */
	while (send(ZYGOTE_FD, buf, n, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void failed(uint64_t id, int err, const char *step)
{
	uint64_t ints[2] = {id, (uint64_t)err};
	reply(ZYG_FAILED, ints, 2, step);
}

static int write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(data);
	ssize_t w = write(fd, data, n);
	int err = errno;
	close(fd);
	if (w != (ssize_t)n) {
		errno = w < 0 ? err : EIO;
		return -1;
	}
	return 0;
}

/* map_ids maps uid and gid to themselves in pid's user namespace, with
 * setgroups denied (an unprivileged writer must; root gains nothing from
 * it). */
static const char *map_ids(pid_t pid, uint64_t uid, uint64_t gid)
{
	char path[64], map[64];
	snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
	if (write_file(path, "deny") < 0 && errno != ENOENT)
		return "write setgroups";
	snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
	snprintf(map, sizeof map, "%llu %llu 1\n", (unsigned long long)uid, (unsigned long long)uid);
	if (write_file(path, map) < 0)
		return "write uid_map";
	snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
	snprintf(map, sizeof map, "%llu %llu 1\n", (unsigned long long)gid, (unsigned long long)gid);
	if (write_file(path, map) < 0)
		return "write gid_map";
	return NULL;
}

static void child_fail(int errpipe, const char *step)
{
	struct child_err ce = {.err = errno};
	snprintf(ce.step, sizeof ce.step, "%s", step);
	ssize_t unused = write(errpipe, &ce, sizeof ce);
	(void)unused;
	_exit(127);
}

/* child_wait is a clone's first step: it dies with the zygote (and ends
 * if the zygote went before the signal was set, which nothing would then
 * send: a pid namespace of its own hides the parent from getppid), and
 * waits on sync for its ids to be mapped (EOF: the zygote gave up). */
static void child_wait(int sync_r, int errpipe)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(errpipe, "set the parent-death signal");
	struct pollfd gone = {.fd = zygote_pidfd, .events = POLLIN};
	if (zygote_pidfd >= 0 && poll(&gone, 1, 0) != 0)
		_exit(1);
	char c;
	ssize_t n;
	while ((n = read(sync_r, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(1);
	close(sync_r);
}

/* enter_init runs the init (init.c) on fds 0 to 4, every other fd
 * closed, and exits with its status. The init starts with the signal
 * state of a fresh process, except for its own signals, blocked
 * (init_signals), which a zygote's child holds since its clone. */
static void __attribute__((noreturn)) enter_init(void)
{
	sigset_t own;
	init_signals(&own);
	sigprocmask(SIG_SETMASK, &own, NULL);
	signal(SIGPIPE, SIG_DFL);
	_exit(init_main());
}

/* child_run becomes the new init: the request's fds as 0 to 4, every
 * other fd of the zygote's closed (its socket to the host above all),
 * then the init itself (init.c), without an exec. errpipe takes a
 * failure, and its closing tells the zygote the init runs. */
static void child_run(const int *fds, int errpipe)
{
	if (setsid() < 0)
		child_fail(errpipe, "setsid");
	/* Out of the way of 0 to 4 first, then into place. */
	int high[ZYG_SPAWN_FDS];
	for (int i = 0; i < ZYG_SPAWN_FDS; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
			child_fail(errpipe, "dup");
	for (int i = 0; i < ZYG_SPAWN_FDS; i++)
		if (dup3(high[i], i, O_CLOEXEC) < 0)
			child_fail(errpipe, "dup3");
	if (close_from(ZYG_SPAWN_FDS, errpipe) < 0)
		child_fail(errpipe, "close the zygote's fds");
	close(errpipe);
	enter_init();
}

/* spare_child is a spare until a spawn takes it: it waits on sock for the
 * request's fds (EOF: the zygote dropped it), enters a cgroup namespace
 * rooted at the cgroup the zygote moved it into, and runs as the init. */
static void spare_child(int sock, int errpipe, int newcgroup)
{
	prctl(PR_SET_NAME, "hutch-spare", 0, 0, 0);
	/* Nothing of the zygote's while it waits (its socket to the host
	 * above all, and the other end of this spare's): should the zygote
	 * go, its host sees its socket close, and this spare its own. sock
	 * to 3, errpipe to 5, out of the way first; child_run puts the
	 * request's fds at 0 to 4 and keeps errpipe. */
	int s = fcntl(sock, F_DUPFD_CLOEXEC, 16), e = fcntl(errpipe, F_DUPFD_CLOEXEC, 16);
	if (s < 0 || e < 0 || dup3(s, 3, O_CLOEXEC) < 0 || dup3(e, 5, O_CLOEXEC) < 0)
		child_fail(errpipe, "dup");
	errpipe = 5;
	sock = 3;
	close(4);
	if (close_from(6, -1) < 0)
		child_fail(errpipe, "close the zygote's fds");
	uint8_t b[8];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(ZYG_SPAWN_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = {b, sizeof b};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
	ssize_t n;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		_exit(0);
	int fds[ZYG_SPAWN_FDS];
	size_t nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && nfds < ZYG_SPAWN_FDS; i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (nfds != ZYG_SPAWN_FDS || (m.msg_flags & MSG_CTRUNC)) {
		errno = EPROTO;
		child_fail(errpipe, "receive the spawn's fds");
	}
	if (newcgroup && unshare(CLONE_NEWCGROUP) < 0)
		child_fail(errpipe, "unshare the cgroup namespace");
	child_run(fds, errpipe);
}

static pid_t clone_init(uint64_t flags, int cgroup)
{
	struct clone_args args;
	memset(&args, 0, sizeof args);
	args.flags = flags;
	args.exit_signal = SIGCHLD;
	if (cgroup >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup;
	}
	long pid = syscall(SYS_clone3, &args, sizeof args);
	if (pid < 0 && errno == ENOSYS && cgroup < 0)
		/* No clone3 (a container runtime's filter may hide it): a
		 * fork-like clone, with no stack of its own to give. */
		pid = syscall(SYS_clone, (unsigned long)flags | SIGCHLD, 0, 0, 0, 0);
	return (pid_t)pid;
}

/* clone_child clones a child with flags, into cgroup unless it is -1,
 * maps its ids and releases it. With sock >= 0 the child is a spare
 * waiting on sock (newcgroup: to unshare the cgroup namespace once
 * taken); otherwise it runs as the init on fds. It returns the child's
 * pid with *errp the read end of its error pipe, or -1 with errno set
 * and *step naming what failed (the child killed and reaped). */
static pid_t clone_child(uint64_t flags, int cgroup, uint64_t uid, uint64_t gid, const int *fds, int sock,
			 int newcgroup, int *errp_r, const char **step)
{
	int sync[2], errp[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		*step = "pipe";
		return -1;
	}
	if (pipe2(errp, O_CLOEXEC) < 0) {
		int err = errno;
		close(sync[0]);
		close(sync[1]);
		errno = err;
		*step = "pipe";
		return -1;
	}
	/* The init's signals are blocked across the clone, so that the init
	 * holds them from its first instruction (init_signals). */
	sigset_t own, saved;
	init_signals(&own);
	sigprocmask(SIG_BLOCK, &own, &saved);
	pid_t pid = clone_init(flags, cgroup);
	if (pid == 0) {
		close(sync[1]);
		close(errp[0]);
		child_wait(sync[0], errp[1]);
		if (sock >= 0)
			spare_child(sock, errp[1], newcgroup);
		child_run(fds, errp[1]);
	}
	int err = errno;
	sigprocmask(SIG_SETMASK, &saved, NULL);
	close(sync[0]);
	close(errp[1]);
	if (pid < 0) {
		close(sync[1]);
		close(errp[0]);
		errno = err;
		*step = "clone";
		return -1;
	}
	*step = NULL;
	if (flags & CLONE_NEWUSER) {
		*step = map_ids(pid, uid, gid);
		err = errno;
	}
	if (*step == NULL && write(sync[1], "1", 1) != 1) {
		*step = "release the init";
		err = errno;
	}
	close(sync[1]);
	if (*step != NULL) {
		close(errp[0]);
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		errno = err;
		return -1;
	}
	*errp_r = errp[0];
	return pid;
}

/* drop_spare ends the spare, if one waits; reap() reaps it. */
static void drop_spare(void)
{
	if (spare.pid == 0)
		return;
	kill(spare.pid, SIGKILL);
	close(spare.sock);
	close(spare.errp);
	spare.pid = 0;
	spare.sock = spare.errp = -1;
}

/* mounts_changed reports whether the host's mounts changed since it was
 * last asked (or the main loop's poll saw it), or cannot tell. */
static int mounts_changed(void)
{
	if (mounts_fd < 0)
		return 1;
	struct pollfd p = {.fd = mounts_fd, .events = POLLPRI};
	return poll(&p, 1, 0) != 0;
}

/* make_spare clones a spare of the kind asked for, if none waits. A
 * failure leaves none: spawns clone their own until the next try. */
static void make_spare(void)
{
	if (spare.flags == 0 || spare.pid != 0)
		return;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return;
	mounts_changed(); /* what the clone copies is current */
	const char *step;
	int errp;
	pid_t pid = clone_child(spare.flags & ~(uint64_t)CLONE_NEWCGROUP, -1, spare.uid, spare.gid, NULL, sp[1],
				(spare.flags & CLONE_NEWCGROUP) != 0, &errp, &step);
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return;
	}
	spare.pid = pid;
	spare.sock = sp[0];
	spare.errp = errp;
}

/* join_cgroup moves pid into the cgroup v2 directory cgroup. */
static int join_cgroup(int cgroup, pid_t pid)
{
	int fd = openat(cgroup, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char b[32];
	int n = snprintf(b, sizeof b, "%d\n", (int)pid);
	ssize_t w = write(fd, b, (size_t)n);
	int err = errno;
	close(fd);
	if (w != n) {
		errno = w < 0 ? err : EIO;
		return -1;
	}
	return 0;
}

/* take_spare hands the request's fds to the spare if it is of the kind
 * asked and current, moved into cgroup first unless that is -1, and
 * returns its pid with *errp its error pipe; 0 when there is none to
 * take (the request then clones its own). */
static pid_t take_spare(uint64_t flags, uint64_t uid, uint64_t gid, int cgroup, const int *fds, int *errp)
{
	if (spare.pid == 0 || spare.flags != flags || spare.uid != uid || spare.gid != gid)
		return 0;
	if (mounts_changed()) {
		drop_spare();
		return 0;
	}
	pid_t pid = spare.pid;
	int sock = spare.sock;
	*errp = spare.errp;
	spare.pid = 0;
	spare.sock = spare.errp = -1;
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(ZYG_SPAWN_FDS * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	uint8_t b = 1;
	struct iovec iov = {&b, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(ZYG_SPAWN_FDS * sizeof(int));
	memcpy(CMSG_DATA(c), fds, ZYG_SPAWN_FDS * sizeof(int));
	int ok = cgroup < 0 || join_cgroup(cgroup, pid) == 0;
	if (ok) {
		ssize_t n;
		while ((n = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
			;
		ok = n == 1;
	}
	close(sock);
	if (!ok) {
		/* A spare that cannot be taken is dropped; reap() reaps it. */
		kill(pid, SIGKILL);
		close(*errp);
		return 0;
	}
	return pid;
}

static void spawn(const struct wire_record *r, const int *fds, size_t nfds)
{
	uint64_t id = r->ints[0], flags = r->ints[1], uid = r->ints[2], gid = r->ints[3], opts = r->ints[4];
	size_t want = ZYG_SPAWN_FDS + ((opts & ZYG_INTO_CGROUP) ? 1 : 0);
	if (nfds != want || (flags & ~(uint64_t)ZYG_CLONE_FLAGS) != 0 || (opts & ~(uint64_t)ZYG_INTO_CGROUP) != 0 ||
	    uid > UINT32_MAX || gid > UINT32_MAX) {
		failed(id, EINVAL, "check the request");
		return;
	}
	if (ninits == capinits) {
		size_t c = capinits ? capinits * 2 : 16;
		struct init_entry *p = realloc(inits, c * sizeof *p);
		if (p == NULL) {
			failed(id, ENOMEM, "grow the init table");
			return;
		}
		inits = p;
		capinits = c;
	}
	int cgroup = (opts & ZYG_INTO_CGROUP) ? fds[ZYG_SPAWN_FDS] : -1;
	int errp;
	pid_t pid = take_spare(flags, uid, gid, cgroup, fds, &errp);
	if (pid == 0) {
		const char *step;
		pid = clone_child(flags, cgroup, uid, gid, fds, -1, 0, &errp, &step);
		if (pid < 0) {
			failed(id, errno, step);
			return;
		}
	}
	/* The init runs once its error pipe closes, or reports what failed. */
	struct child_err ce;
	ssize_t n;
	while ((n = read(errp, &ce, sizeof ce)) < 0 && errno == EINTR)
		;
	close(errp);
	if (n == (ssize_t)sizeof ce) {
		ce.step[sizeof ce.step - 1] = 0;
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		failed(id, ce.err, ce.step);
		return;
	}
	inits[ninits++] = (struct init_entry){id, pid};
	uint64_t ints[2] = {id, (uint64_t)pid};
	reply(ZYG_STARTED, ints, 2, NULL);
}

/* prepare sets the spare's kind; a spare of another kind is dropped. */
static void prepare(const struct wire_record *r)
{
	uint64_t flags = r->ints[0], uid = r->ints[1], gid = r->ints[2];
	if ((flags & ~(uint64_t)ZYG_CLONE_FLAGS) != 0 || uid > UINT32_MAX || gid > UINT32_MAX)
		return;
	if (flags != spare.flags || uid != spare.uid || gid != spare.gid)
		drop_spare();
	spare.flags = flags;
	spare.uid = uid;
	spare.gid = gid;
}

static void kill_init(const struct wire_record *r)
{
	int sig = (int)r->ints[1];
	if (sig <= 0 || sig >= 65)
		return;
	for (size_t i = 0; i < ninits; i++)
		if (inits[i].id == r->ints[0])
			kill(inits[i].pid, sig);
}

static int reap(void)
{
	int ended = 0;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == spare.pid) {
			/* Died waiting (killed from outside): made again at the
			 * next request, not here, so that a spare that cannot
			 * live is not cloned over and over. */
			close(spare.sock);
			close(spare.errp);
			spare.pid = 0;
			spare.sock = spare.errp = -1;
			continue;
		}
		for (size_t i = 0; i < ninits; i++) {
			if (inits[i].pid != pid)
				continue;
			/* Once pid 1 of a namespace is reaped, the kernel has
			 * killed and reaped everything else in it. */
			uint64_t ints[2] = {inits[i].id, (uint64_t)(uint32_t)status};
			inits[i] = inits[--ninits];
			reply(ZYG_EXITED, ints, 2, NULL);
			ended = 1;
			break;
		}
	}
	return ended;
}

/* handle decodes and executes one request. It returns 2 after a
 * prepare, 1 after a spawn, 0 otherwise. */
static int handle(const uint8_t *buf, size_t len, const int *fds, size_t nfds)
{
	struct wire_record rec;
	size_t n;
	const char *why;
	if (wire_decode(buf, len, &rec, 1, &n, &why) < 0 || n != 1)
		return 0;
	switch (rec.kind) {
	case ZYG_SPAWN:
		if (rec.nints == 5) {
			spawn(&rec, fds, nfds);
			return 1;
		}
		if (rec.nints >= 1)
			failed(rec.ints[0], EINVAL, "check the request");
		return 0;
	case ZYG_KILL:
		if (rec.nints == 2)
			kill_init(&rec);
		return 0;
	case ZYG_PREPARE:
		if (rec.nints == 3 && rec.nblobs == 0) {
			prepare(&rec);
			return 2;
		}
		return 0;
	}
	return 0;
}

static int serve(void)
{
	if (mark_cloexec(ZYGOTE_FD) < 0)
		return 2;
	/* A child that died before reading its sync pipe must not take the
	 * zygote with it: the write fails with EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0)
		return 2;
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 2;
	/* Without it no spare is ever current (mounts_changed). */
	mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	zygote_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0); /* close-on-exec */
	uint8_t buf[ZYG_MAX_MSG];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	for (;;) {
		struct pollfd p[3] = {{.fd = ZYGOTE_FD, .events = POLLIN},
				      {.fd = sfd, .events = POLLIN},
				      {.fd = mounts_fd, .events = POLLPRI}};
		if (poll(p, mounts_fd >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 2;
		}
		if (mounts_fd >= 0 && p[2].revents) {
			/* The spare's copy of the host's mounts is stale. The
			 * next is made when an init ends, not here: a host
			 * whose mounts change often (a container host) would
			 * have a clone made at every change. */
			drop_spare();
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0)
				;
			if (reap())
				make_spare(); /* an init ended: a command, most likely */
		}
		if (!p[0].revents)
			continue;
		struct iovec iov = {buf, sizeof buf};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof ctl};
		ssize_t n = recvmsg(ZYGOTE_FD, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the host is done or gone */
		int fds[8];
		size_t nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k && nfds < 8; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
		int again = 0;
		if (!(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
			again = handle(buf, (size_t)n, fds, nfds);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		/* A prepare asks for one now; a spawn leaves it to the end of
		 * an init, so that its clone does not compete for the CPU with
		 * the sandbox just started. No fd of the request is open
		 * here any more. */
		if (again == 2)
			make_spare();
	}
	drop_spare();
	for (size_t i = 0; i < ninits; i++)
		kill(inits[i].pid, SIGKILL);
	return 0;
}

/* direct_init is an init the host started itself (INIT_ARG0): its
 * parent put it in its namespaces, mapped its ids and gave it fds 0 to 4
 * before the exec. What else it had open is closed, 0 to 4 made
 * close-on-exec, as a zygote's child does. An exec strips the
 * capabilities of a uid other than 0, so Direct passes that init its
 * capabilities in its user namespace as ambient ones: they are kept
 * permitted and effective, and none is left inheritable or ambient, as in
 * a zygote's clone. Its own signals are blocked only from here: until
 * then the host sends it none but SIGKILL. */
static void __attribute__((noreturn)) direct_init(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct caps[2];
	if (close_from(ZYG_SPAWN_FDS, -1) < 0 || mark_cloexec(0) < 0)
		_exit(127);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		_exit(127);
	if (syscall(SYS_capget, &hdr, caps) < 0)
		_exit(127);
	caps[0].inheritable = caps[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, caps) < 0)
		_exit(127);
	enter_init();
}

/* The role switch: glibc passes argc and argv to constructors. */
__attribute__((constructor)) static void zygote_role(int argc, char **argv)
{
	if (argc <= 0 || argv == NULL || argv[0] == NULL)
		return;
	if (strcmp(argv[0], ZYGOTE_ARG0) == 0)
		_exit(serve());
	if (strcmp(argv[0], INIT_ARG0) == 0)
		direct_init();
}
