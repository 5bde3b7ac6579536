//go:build linux && cgo

/*
 * The stage's fd hygiene (fds.h), shared by the zygote and the init.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fds.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* mark_cloexec sets close-on-exec on every fd from first up, through
 * close_range where the kernel has CLOSE_RANGE_CLOEXEC (5.11) and through
 * /proc/self/fd otherwise (CVE-2024-21626: no fd reaches an exec by
 * mistake). */
int mark_cloexec(int first)
{
	if (syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != 0 || end == e->d_name || fd < first || fd == dirfd(d))
			continue;
		if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

/* close_from closes every fd from first up but keep, through close_range
 * or, where a filter hides it, /proc/self/fd. */
int close_from(int first, int keep)
{
	int ok;
	if (keep < first)
		ok = syscall(SYS_close_range, first, ~0U, 0) == 0;
	else
		ok = (keep == first || syscall(SYS_close_range, first, keep - 1, 0) == 0) &&
		     syscall(SYS_close_range, keep + 1, ~0U, 0) == 0;
	if (ok)
		return 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return -1;
	int fds[64];
	size_t n;
	do { /* collected first: closing while reading the directory skips entries */
		n = 0;
		rewinddir(d);
		struct dirent *e;
		while (n < 64 && (e = readdir(d)) != NULL) {
			char *end;
			long fd = strtol(e->d_name, &end, 10);
			if (*end != 0 || end == e->d_name || fd < first || fd == keep || fd == dirfd(d))
				continue;
			fds[n++] = (int)fd;
		}
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
	} while (n == 64);
	closedir(d);
	return 0;
}

