//go:build linux && cgo

/*
 * The sandbox's identity: its own session keyring, its host name, its
 * loopback interface, and the kernel's per-user counts in its own user
 * namespace. Each runs in the init, in the namespaces the zygote
 * cloned it into, before the filesystem is built; confine.c dispatches the
 * records (STEP_KEYRING, STEP_HOSTNAME, STEP_LOOPBACK, STEP_USER_COUNT)
 * here.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"

/* The host's session keyring, inherited across clone, is no longer the
 * command's: a fresh anonymous one replaces it. */
int join_session_keyring(struct step_err *e)
{
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
		return step_fail(e, errno, NULL, "keyctl(KEYCTL_JOIN_SESSION_KEYRING)");
	return 0;
}

int set_hostname(const char *name, size_t len, struct step_err *e)
{
	if (sethostname(name, len) < 0)
		return step_fail(e, errno, NULL, "set the host name");
	return 0;
}

/*
 * A fresh network namespace has "lo", down. Bringing it up needs
 * CAP_NET_ADMIN in the namespace's owning user namespace, so EPERM here
 * means a user namespace without capabilities (AppArmor's userns
 * restriction, for one).
 */
int loopback_up(struct step_err *e)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return step_fail(e, errno, NULL, "netns: socket for lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		int err = errno;
		close(s);
		return step_fail(e, err, NULL, "netns: find lo");
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
		int err = errno;
		close(s);
		return step_fail(e, err, NULL, "netns: bring lo up");
	}
	close(s);
	return 0;
}

/*
 * The kernel counts inotify instances and watches, fanotify groups and
 * marks, and namespaces per user, in every user namespace up the chain:
 * what a sandbox takes is charged to its host user too. Each user
 * namespace has its own limits in /proc/sys/user, which its owner may
 * lower, and whose values are those of the writer's user namespace: the
 * init, root in the sandbox's, caps the sandbox's share of its host
 * user's counts before anything else runs there. The host's /proc is
 * still mounted when this runs; a file the kernel lacks is left out.
 */
int set_user_count(const char *path, uint64_t value, struct step_err *e)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return step_fail(e, errno, path, "open");
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", value);
	ssize_t w = write(fd, buf, (size_t)n);
	int err = errno;
	close(fd);
	if (w != n)
		return step_fail(e, w < 0 ? err : EIO, path, "write");
	return 0;
}
