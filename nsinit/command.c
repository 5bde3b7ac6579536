//go:build linux && cgo

/*
 * The sandbox's command (see command.h): the init decodes the command
 * frame, enters the working directory, refusing one that resolved outside
 * the view, into a tree the plan refuses or outside the roots the host checked,
 * looks the command up in the PATH of its environment, as execvp would,
 * inside the view, then forks it as posix_spawn does (CLONE_VM,
 * CLONE_VFORK): the child gets its stdio, a session of its own and a
 * fresh signal state, and execs. What the command is, and every string of
 * its argv and environment, came from Go.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "init.h"
#include "plan.h"
#include "report.h"
#include "wire.h"

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
 * reads as "(unreachable)", and a symlink must not lead into a refused
 * tree. With roots, it must lie in one of them: a directory the host
 * checked may have been replaced by a symlink since. */
static int enter_dir(const char *dir, char *const *roots, char *const *refused)
{
	if (chdir(dir) < 0) {
		report_init_error("chdir", errno, NULL, dir);
		return -1;
	}
	static char wd[PATH_MAX + 64];
	char detail[PATH_MAX + 160];
	if (syscall(SYS_getcwd, wd, sizeof wd) < 0 || wd[0] != '/') {
		snprintf(detail, sizeof detail, "working directory \"%s\" is outside the sandbox", wd[0] ? wd : dir);
		report_init_error("chdir", 0, detail, dir);
		return -1;
	}
	for (char *const *r = refused; *r != NULL; r++) {
		if (within(wd, *r)) {
			snprintf(detail, sizeof detail, "working directory \"%s\" (through a symlink) lies in %s, where no command starts",
				 wd, *r);
			report_init_error("chdir", 0, detail, dir);
			return -1;
		}
	}
	if (roots[0] == NULL)
		return 0;
	for (char *const *r = roots; *r != NULL; r++)
		if (within(wd, *r))
			return 0;
	snprintf(detail, sizeof detail,
		 "working directory \"%s\" (through a symlink) is outside the workspace and the writable paths", wd);
	report_init_error("chdir", 0, detail, dir);
	return -1;
}

/* look_up finds file in the PATH of env, as execvp would, inside the
 * view. It returns a path to exec (file itself, or a new string). */
static const char *look_up(const char *file, char *const *env)
{
	if (strchr(file, '/') != NULL) {
		if (access(file, X_OK) < 0) {
			report_init_error("look up command", errno, NULL, file);
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
	report_init_error("look up command", ENOENT, detail, file);
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
	int step; /* 0 stdio, 1 exec, 2 rlimits */
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
 * memory (CLONE_VM, see command_start) and runs on its own stack while
 * the init waits: it makes system calls only, and leaves through execve
 * or _exit. Its fd table and signal dispositions are its own copies. */
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
	/* The limits that would stop the init itself (the rlimit fallback's
	 * memory limit: its address space is the host binary's) are the
	 * command's own, set here, before its first instruction: set on it
	 * after the exec, what it forked first went without them. */
	if (plan_child_rlimits() < 0)
		child_fail(errpipe, 2);
	execve(path, argv, env);
	child_fail(errpipe, 1);
	return 127;
}

/* The command's child runs on this stack until its exec; the init, its
 * only other user, is suspended meanwhile (CLONE_VFORK). */
static char command_stack[64 << 10] __attribute__((aligned(16)));

static void close_all(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

pid_t command_start(const uint8_t *msg, size_t len, const int *stdio)
{
	struct wire_record r;
	size_t n;
	const char *why;
	if (wire_decode(msg, len, &r, 1, &n, &why) < 0 || n != 1 || r.kind != CMD_EXEC || r.nints != 0 ||
	    r.nblobs != 6 || wire_path(&r, 0) == NULL || wire_path(&r, 1) == NULL) {
		report_init_error("read command", EINVAL, "malformed", NULL);
		return -1;
	}
	const char *file = wire_path(&r, 0), *dir = wire_path(&r, 1);
	char **argv = split(&r.blobs[2]), **env = split(&r.blobs[3]), **roots = split(&r.blobs[4]),
	     **refused = split(&r.blobs[5]);
	if (argv == NULL || env == NULL || roots == NULL || refused == NULL) {
		report_init_error("read command", EINVAL, "malformed argv, env, roots or refused trees", NULL);
		return -1;
	}
	if (enter_dir(dir, roots, refused) < 0)
		return -1;
	const char *path = look_up(file, env);
	if (path == NULL)
		return -1;
	int errp[2];
	if (pipe2(errp, O_CLOEXEC) < 0) {
		report_init_error("exec", errno, "pipe", path);
		return -1;
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
		report_init_error("exec", err, "fork", path);
		return -1;
	}
	struct exec_err ee;
	ssize_t got;
	while ((got = read(errp[0], &ee, sizeof ee)) < 0 && errno == EINTR)
		;
	close(errp[0]);
	if (got == (ssize_t)sizeof ee) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		report_init_error(ee.step == 0 ? "set up stdio" : ee.step == 2 ? "set the command's rlimits" : "exec", ee.err, NULL, path);
		return -1;
	}
	return pid;
}
