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
 *   (reaped)   ZYG_EXITED with the init's wait status
 *
 * Go decides everything (flags, ids, and the init's whole plan);
 * this file only executes a request. When the host closes its end, the
 * zygote kills its inits and exits; when the host dies, the kernel kills
 * the zygote (the host sets PR_SET_PDEATHSIG), and each init with it.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
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

/* child becomes the new init: the request's fds as 0 to 4, every other fd
 * of the zygote's closed (its socket to the host above all), then the init
 * itself (init.c), without an exec. sync says the ids are mapped (EOF: the
 * zygote gave up); errpipe takes a failure, and its closing tells the
 * zygote the init runs. */
static void child(const int *fds, int sync_r, int errpipe)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(errpipe, "set the parent-death signal");
	char c;
	ssize_t n;
	while ((n = read(sync_r, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(1);
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
	/* The init starts with the signal state of a fresh process, except
	 * for its own signals, blocked since the clone (init_signals). */
	sigset_t own;
	init_signals(&own);
	sigprocmask(SIG_SETMASK, &own, NULL);
	signal(SIGPIPE, SIG_DFL);
	close(errpipe);
	_exit(init_main());
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
	int sync[2], errp[2];
	if (pipe2(sync, O_CLOEXEC) < 0) {
		failed(id, errno, "pipe");
		return;
	}
	if (pipe2(errp, O_CLOEXEC) < 0) {
		failed(id, errno, "pipe");
		close(sync[0]);
		close(sync[1]);
		return;
	}
	/* The init's signals are blocked across the clone, so that the init
	 * holds them from its first instruction (init_signals). */
	sigset_t own, saved;
	init_signals(&own);
	sigprocmask(SIG_BLOCK, &own, &saved);
	pid_t pid = clone_init(flags, (opts & ZYG_INTO_CGROUP) ? fds[ZYG_SPAWN_FDS] : -1);
	if (pid == 0) {
		close(sync[1]);
		close(errp[0]);
		child(fds, sync[0], errp[1]);
	}
	int err = errno;
	sigprocmask(SIG_SETMASK, &saved, NULL);
	close(sync[0]);
	close(errp[1]);
	if (pid < 0) {
		close(sync[1]);
		close(errp[0]);
		failed(id, err, "clone");
		return;
	}
	const char *step = NULL;
	if (flags & CLONE_NEWUSER) {
		step = map_ids(pid, uid, gid);
		err = errno;
	}
	if (step == NULL && write(sync[1], "1", 1) != 1) {
		step = "release the init";
		err = errno;
	}
	close(sync[1]);
	struct child_err ce;
	ssize_t n;
	while ((n = read(errp[0], &ce, sizeof ce)) < 0 && errno == EINTR)
		;
	close(errp[0]);
	if (step == NULL && n == (ssize_t)sizeof ce) {
		err = ce.err;
		ce.step[sizeof ce.step - 1] = 0;
		step = ce.step;
	}
	if (step != NULL) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		failed(id, err, step);
		return;
	}
	inits[ninits++] = (struct init_entry){id, pid};
	uint64_t ints[2] = {id, (uint64_t)pid};
	reply(ZYG_STARTED, ints, 2, NULL);
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

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < ninits; i++) {
			if (inits[i].pid != pid)
				continue;
			/* Once pid 1 of a namespace is reaped, the kernel has
			 * killed and reaped everything else in it. */
			uint64_t ints[2] = {inits[i].id, (uint64_t)(uint32_t)status};
			inits[i] = inits[--ninits];
			reply(ZYG_EXITED, ints, 2, NULL);
			break;
		}
	}
}

/* handle decodes and executes one request. */
static void handle(const uint8_t *buf, size_t len, const int *fds, size_t nfds)
{
	struct wire_record rec;
	size_t n;
	const char *why;
	if (wire_decode(buf, len, &rec, 1, &n, &why) < 0 || n != 1)
		return;
	switch (rec.kind) {
	case ZYG_SPAWN:
		if (rec.nints == 5) {
			spawn(&rec, fds, nfds);
			return;
		}
		if (rec.nints >= 1)
			failed(rec.ints[0], EINVAL, "check the request");
		return;
	case ZYG_KILL:
		if (rec.nints == 2)
			kill_init(&rec);
		return;
	}
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
	uint8_t buf[ZYG_MAX_MSG];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	for (;;) {
		struct pollfd p[2] = {{.fd = ZYGOTE_FD, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 2;
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0)
				;
			reap();
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
		if (!(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
			handle(buf, (size_t)n, fds, nfds);
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
	}
	for (size_t i = 0; i < ninits; i++)
		kill(inits[i].pid, SIGKILL);
	return 0;
}

/* The role switch: glibc passes argc and argv to constructors. */
__attribute__((constructor)) static void zygote_role(int argc, char **argv)
{
	if (argc > 0 && argv != NULL && argv[0] != NULL && strcmp(argv[0], ZYGOTE_ARG0) == 0)
		_exit(serve());
}
