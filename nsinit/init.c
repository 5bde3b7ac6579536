//go:build linux && cgo

/*
 * The sandbox init (see init.h): pid 1 of the sandbox, the zygote's child,
 * running without an exec and so without the Go runtime or any of the
 * host program's code. This file is its main loop: it reads the config
 * frame and has the plan run (plan.c), reports ready, waits for its
 * command frame and starts the command (command.c) or becomes a file
 * server (files.c), forwards the host's signals to the command, reaps,
 * and when the command ends empties the sandbox (reap.c) and reports the
 * exit (report.c). Every decision (which steps, which may degrade, what
 * the layers are called) came from Go; the init only keeps the order.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "confine.h"
#include "fds.h"
#include "files.h"
#include "init.h"
#include "plan.h"
#include "reap.h"
#include "report.h"
#include "wire.h"

#define CONTROL_FD 3

/* The signals passed on to the command's process group (Go reads this
 * list as nsinit.Forwarded); SIGCHLD is read beside them. */
const int init_forwarded[INIT_NFORWARDED] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

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

/* build reads and runs the plan. It returns 0 when the sandbox is
 * built, -1 when the init must end (the error was reported). */
static int build(void)
{
	uint8_t *msg;
	size_t len, nfds;
	int fds[INIT_MAX_FDS];
	int rc = read_frame(&msg, &len, fds, INIT_MAX_FDS, &nfds);
	if (rc != 0) {
		report_init_error("read config", rc > 0 ? EPIPE : errno, NULL, NULL);
		return -1;
	}
	/* The plan names the frame's fds INIT_FD_BASE + i: out of the way of
	 * those numbers first, then into place. */
	for (size_t i = 0; i < nfds; i++) {
		int high = fcntl(fds[i], F_DUPFD_CLOEXEC, INIT_FD_BASE + INIT_MAX_FDS);
		if (high < 0 || close(fds[i]) < 0) {
			report_init_error("read config", errno, "place its fds", NULL);
			return -1;
		}
		fds[i] = high;
	}
	for (size_t i = 0; i < nfds; i++) {
		if (dup3(fds[i], INIT_FD_BASE + (int)i, O_CLOEXEC) < 0 || close(fds[i]) < 0) {
			report_init_error("read config", errno, "place its fds", NULL);
			return -1;
		}
	}
	return plan_run(msg, len);
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
	report_phase("wait-command");
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
		report_init_error("read command", rc < 0 ? errno : EINVAL, nfds != 3 ? "want 3 fds" : NULL,
				  NULL);
		return 1;
	}
	pid_t pid = command_start(msg, len, stdio);
	if (pid < 0)
		return 1;
	report_phase("exec");
	report_started(pid);

	/* Signals go to the command's process group (it leads its session),
	 * as a terminal's ^C would send them: a shell script and the
	 * children it waits for stop together. Whatever left the group is
	 * killed with the rest of the sandbox when the command ends. */
	int ingress = plan_ingress_fd();
	for (;;) {
		if (ingress >= 0) {
			/* The host's requests for ingress sockets beside the
			 * signals (Config.Ingress). */
			struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = ingress, .events = POLLIN}};
			if (poll(p, 2, -1) < 0) {
				if (errno == EINTR)
					continue;
				ingress = -1;
				continue;
			}
			if (p[1].revents != 0 && plan_ingress_serve() < 0)
				ingress = -1;
			if ((p[0].revents & POLLIN) == 0)
				continue;
		}
		struct signalfd_siginfo si;
		ssize_t s = read(sfd, &si, sizeof si);
		if (s < 0 && errno == EINTR)
			continue;
		if (s != (ssize_t)sizeof si) {
			report_init_error("wait", s < 0 ? errno : EIO, "signalfd", NULL);
			kill(pid, SIGKILL);
			reap_sandbox();
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
			reap_sandbox();
			uint64_t ws = (uint64_t)(uint32_t)status;
			report_event(EV_EXITED, &ws, 1);
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
	report_begin();
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
		report_init_error("block signals", errno, NULL, NULL);
		return 1;
	}
	if (build() < 0)
		return 1;
	report_event(EV_READY, NULL, 0);
	return run(sfd);
}
