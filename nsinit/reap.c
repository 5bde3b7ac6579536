//go:build linux && cgo

/*
 * The sandbox's end (see reap.h): pid 1 of a pid namespace kills
 * everything else in it at once; an init without a pid namespace of its
 * own (LevelLandlock), a child subreaper, walks /proc for the processes
 * below it instead. Either way it then reaps until it has no child left.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reap.h"

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

/* reap_sandbox kills every other process of the sandbox and reaps them
 * all. Orphans are re-parented to the init (or to a subreaper, which dies
 * too), so when wait reports no children left, nothing but the init is
 * alive. A process forking while the kill goes out cannot escape: fork
 * fails for a parent with a fatal signal pending. */
void reap_sandbox(void)
{
	if (getpid() == 1)
		kill(-1, SIGKILL);
	else /* not a pid namespace of its own: kill(-1) would reach the host */
		kill_descendants();
	while (waitpid(-1, NULL, __WALL) >= 0 || errno == EINTR)
		;
}
