//go:build linux && cgo

/*
 * The filesystem view's executor: runs the steps of mounts.h, decided in Go,
 * in the init's fresh mount namespace.
 *
 * The scratch tmpfs becomes the root first, with the host tree at
 * /.oldroot and the new root built at /newroot. Every later lookup starts
 * from an fd (the host tree's or the new root's) and goes through openat2
 * with RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: a
 * component that is or becomes a symlink fails the step instead of
 * redirecting a mount (CVE-2021-30465), and mounts are attached to fds,
 * never to paths. Trees are cloned with open_tree, given their attributes
 * with mount_setattr and attached with move_mount; new filesystems come
 * from fsopen, fsconfig and fsmount. Kernels before 5.12 have no
 * mount_setattr: there each mount of an attached tree is remounted
 * through its path in mountinfo, keeping the flags the kernel locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mounts.h"
#include "wire.h"

/* The new mount API, by value: glibc's declarations depend on its version
 * and clash with the kernel's headers. */
#define K_OPEN_TREE_CLONE 1
#define K_AT_RECURSIVE 0x8000
#define K_MOVE_MOUNT_F_EMPTY_PATH 0x4
#define K_MOVE_MOUNT_T_EMPTY_PATH 0x40
#define K_FSOPEN_CLOEXEC 0x1
#define K_FSCONFIG_SET_STRING 1
#define K_FSCONFIG_CMD_CREATE 6
#define K_FSMOUNT_CLOEXEC 0x1

struct k_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

#define RESOLVE_FLAGS (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

#define SCRATCH_OLDROOT "/.oldroot"
#define SCRATCH_NEWROOT "/newroot"
#define SCRATCH_MASK_FILE "/mask-file"
#define SCRATCH_MASK_DIR "/mask-dir"
/* This process's /proc while the new root is built: the host's. */
#define PROC_SELF SCRATCH_OLDROOT "/proc/self"

#define ALL_FLAGS (MNT_OPTIONAL | MNT_IF_EXISTS | MNT_CREATE | MNT_SRC_ROOT | MNT_RECURSIVE | MNT_SEAL | MNT_DEPENDS)
#define ALL_ATTRS (MNT_ATTR_RDONLY | MNT_ATTR_NOSUID | MNT_ATTR_NODEV | MNT_ATTR_NOEXEC)

/* One run of the executor. */
struct ctx {
	int host, root, mask_file, mask_dir; /* O_PATH fds, -1 until opened */
	int no_setattr;
	int skipped;                        /* the last step without MNT_DEPENDS was skipped */
	int *seal_fd, *seal_index;
	size_t nseal;
	const char *op;                     /* the operation that failed */
	char op_path[512];                  /* its path, when not the step's own */
	struct mnt_result *res;
};

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode)
{
	struct open_how how = {.flags = flags, .mode = mode, .resolve = RESOLVE_FLAGS};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static int sys_open_tree(int fd, unsigned flags)
{
	return (int)syscall(SYS_open_tree, fd, "", flags | K_OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
}

static int sys_move_mount(int from, int to)
{
	return (int)syscall(SYS_move_mount, from, "", to, "", K_MOVE_MOUNT_F_EMPTY_PATH | K_MOVE_MOUNT_T_EMPTY_PATH);
}

static int sys_mount_setattr(int fd, unsigned flags, uint64_t attrs)
{
	struct k_mount_attr a = {.attr_set = attrs};
	return (int)syscall(SYS_mount_setattr, fd, "", flags | AT_EMPTY_PATH, &a, sizeof a);
}

/* open_in opens path beneath dirfd, O_PATH, following no symlink. No
 * O_NOFOLLOW: with O_PATH it would return a trailing symlink itself, which
 * RESOLVE_NO_SYMLINKS refuses (ELOOP). */
static int open_in(int dirfd, const char *path)
{
	const char *rel = path + strspn(path, "/");
	return sys_openat2(dirfd, *rel ? rel : ".", O_PATH | O_CLOEXEC, 0);
}

static int failed(struct ctx *c, const char *op)
{
	c->op = op;
	return -1;
}

static int is_dir(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

/* within says whether p is dir or below it. */
static int within(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return 1;
	return strncmp(p, dir, n) == 0 && (p[n] == 0 || p[n] == '/');
}

/* unescape undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

/* locked_flags are the per-mount flags a mountinfo options field shows. */
static unsigned long locked_flags(char *opts)
{
	static const struct {
		const char *name;
		unsigned long flag;
	} known[] = {
		{"ro", MS_RDONLY},         {"nosuid", MS_NOSUID},         {"nodev", MS_NODEV},
		{"noexec", MS_NOEXEC},     {"noatime", MS_NOATIME},       {"nodiratime", MS_NODIRATIME},
		{"relatime", MS_RELATIME}, {"strictatime", MS_STRICTATIME},
	};
	unsigned long flags = 0;
	char *save = NULL;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
			if (strcmp(o, known[i].name) == 0)
				flags |= known[i].flag;
	return flags;
}

/* remount_attached applies attrs to the mount whose root fd refers to and,
 * if recursive, every mount below it, by remounting each through its path
 * in mountinfo with MS_REMOUNT | MS_BIND and the flags it already has. */
static int remount_attached(struct ctx *c, int fd, uint64_t attrs, int recursive)
{
	char link[64], top[PATH_MAX];
	snprintf(link, sizeof link, PROC_SELF "/fd/%d", fd);
	ssize_t n = readlink(link, top, sizeof top - 1);
	if (n < 0)
		return failed(c, "remount: readlink");
	top[n] = 0;
	FILE *f = fopen(PROC_SELF "/mountinfo", "re");
	if (f == NULL)
		return failed(c, "remount: open mountinfo");
	c->res->fell_back = 1;
	unsigned long add = (attrs & MNT_ATTR_RDONLY ? MS_RDONLY : 0) | (attrs & MNT_ATTR_NOSUID ? MS_NOSUID : 0) |
			    (attrs & MNT_ATTR_NODEV ? MS_NODEV : 0) | (attrs & MNT_ATTR_NOEXEC ? MS_NOEXEC : 0);
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &cap, f) > 0) {
		/* id parent major:minor root point options ... */
		char *field[6], *save = NULL;
		int nf = 0;
		for (char *t = strtok_r(line, " \n", &save); t && nf < 6; t = strtok_r(NULL, " \n", &save))
			field[nf++] = t;
		if (nf < 6)
			continue;
		char *point = field[4];
		unescape(point);
		if (strcmp(point, top) != 0 && !(recursive && within(point, top)))
			continue;
		unsigned long flags = MS_REMOUNT | MS_BIND | locked_flags(field[5]) | add;
		if (mount("", point, "", flags, "") < 0) {
			snprintf(c->op_path, sizeof c->op_path, "%s", point);
			rc = failed(c, "remount");
		}
	}
	int saved = errno;
	free(line);
	fclose(f);
	errno = saved;
	return rc;
}

/* set_attrs gives the tree at fd attrs before it is attached. It returns 1
 * when done, 0 when the caller must remount after attaching instead (no
 * mount_setattr), -1 on error. */
static int set_attrs(struct ctx *c, int fd, uint64_t attrs, int recursive)
{
	if (c->no_setattr)
		return 0;
	if (sys_mount_setattr(fd, recursive ? K_AT_RECURSIVE : 0, attrs) == 0)
		return 1;
	if (errno == ENOSYS) {
		c->no_setattr = 1;
		return 0;
	}
	return failed(c, "mount_setattr");
}

/* bind clones the tree at src (with its submounts if recursive, so that a
 * read-only bind does not reveal what they cover) and attaches it at tgt
 * with attrs added. */
static int bind(struct ctx *c, int src, int tgt, uint64_t attrs, int recursive)
{
	int tree = sys_open_tree(src, recursive ? K_AT_RECURSIVE : 0);
	if (tree < 0)
		return failed(c, "open_tree");
	int done = 1, rc = 0;
	if (attrs != 0)
		done = set_attrs(c, tree, attrs, recursive);
	if (done < 0)
		rc = -1;
	else if (sys_move_mount(tree, tgt) < 0)
		rc = failed(c, "move_mount");
	else if (!done)
		/* Before 5.12 the tree gets its attributes once attached;
		 * nothing runs in the namespace yet. */
		rc = remount_attached(c, tree, attrs, recursive);
	int saved = errno;
	close(tree);
	errno = saved;
	return rc;
}

/* split copies path into buf and cuts it into its parent and last name. */
static int split(const char *path, char *buf, size_t cap, const char **parent, const char **name)
{
	if (snprintf(buf, cap, "%s", path) >= (int)cap) {
		errno = ENAMETOOLONG;
		return -1;
	}
	char *slash = strrchr(buf, '/');
	*name = slash + 1;
	*slash = 0;
	*parent = slash == buf ? "/" : buf;
	return 0;
}

static int mkdir_p(struct ctx *c, const char *path, mode_t mode);

/* make_parent creates path's parent in the new root when it is missing
 * and opens it; *name is then path's last name, in buf. */
static int make_parent(struct ctx *c, const char *path, char *buf, size_t cap, const char **name)
{
	const char *parent;
	if (split(path, buf, cap, &parent, name) < 0)
		return failed(c, "open parent");
	if (**name == 0) {
		errno = ENOENT; /* the root itself is missing */
		return failed(c, "open parent");
	}
	if (mkdir_p(c, parent, 0755) < 0)
		return -1;
	int pfd = open_in(c->root, parent);
	return pfd < 0 ? failed(c, "open parent") : pfd;
}

/* mkdir_p creates path and its missing parents (0755) in the new root;
 * a directory it creates gets mode exactly, whatever the umask. */
static int mkdir_p(struct ctx *c, const char *path, mode_t mode)
{
	int fd = open_in(c->root, path);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != ENOENT)
		return failed(c, "open");
	char buf[PATH_MAX];
	const char *name;
	int pfd = make_parent(c, path, buf, sizeof buf, &name);
	if (pfd < 0)
		return -1;
	int rc = 0;
	if (mkdirat(pfd, name, 0) < 0 && errno != EEXIST) {
		rc = failed(c, "mkdir");
	} else {
		int dfd = sys_openat2(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0);
		if (dfd < 0)
			rc = failed(c, "open");
		else if (fchmod(dfd, mode) < 0)
			rc = failed(c, "chmod");
		if (dfd >= 0)
			close(dfd);
	}
	int saved = errno;
	close(pfd);
	errno = saved;
	if (rc < 0)
		snprintf(c->op_path, sizeof c->op_path, "%s", path);
	return rc;
}

/* create_file creates an empty file at path in the new root, parents
 * included; one that exists already will do. */
static int create_file(struct ctx *c, const char *path)
{
	char buf[PATH_MAX];
	const char *name;
	int pfd = make_parent(c, path, buf, sizeof buf, &name);
	if (pfd < 0)
		return -1;
	int fd = openat(pfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	int saved = errno;
	close(pfd);
	if (fd < 0 && saved != EEXIST) {
		errno = saved;
		return failed(c, "create");
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* open_target opens a step's target in the new root. With MNT_CREATE a
 * missing one is created: a directory, or an empty file when the source
 * is not a directory. */
static int open_target(struct ctx *c, const char *path, uint64_t flags, int src)
{
	int fd = open_in(c->root, path);
	if (fd >= 0 || errno != ENOENT || !(flags & MNT_CREATE))
		return fd;
	if (src < 0 || is_dir(src)) {
		if (mkdir_p(c, path, 0755) < 0)
			return -1;
	} else if (create_file(c, path) < 0) {
		return -1;
	}
	return open_in(c->root, path);
}

/* skip says whether a lookup's error skips its step instead of failing it. */
static int skip(uint64_t flags, int err, int is_source)
{
	if (flags & MNT_OPTIONAL)
		return err == ENOENT || (!is_source && err == EACCES);
	return (flags & MNT_IF_EXISTS) && !is_source && err == ENOENT;
}

/* new_fs creates a filesystem from r (fstype, options but the dropped
 * ones) and attaches it at tgt; it returns the mount's fd. */
static int new_fs(struct ctx *c, const struct wire_record *r, int tgt, uint64_t drop)
{
	int fsfd = (int)syscall(SYS_fsopen, wire_path(r, 1), K_FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return failed(c, "fsopen");
	int mfd = -1, rc = 0;
	for (unsigned i = 0; rc == 0 && 2 + 2 * i < r->nblobs; i++) {
		if (drop >> i & 1)
			continue;
		const char *key = wire_path(r, 2 + 2 * i), *value = wire_path(r, 3 + 2 * i);
		if (syscall(SYS_fsconfig, fsfd, K_FSCONFIG_SET_STRING, key, value, 0) < 0) {
			snprintf(c->op_path, sizeof c->op_path, "%s=%s", key, value);
			rc = failed(c, "fsconfig");
		}
	}
	if (rc == 0 && syscall(SYS_fsconfig, fsfd, K_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		rc = failed(c, "fsconfig create");
	if (rc == 0 && (mfd = (int)syscall(SYS_fsmount, fsfd, K_FSMOUNT_CLOEXEC, r->ints[1])) < 0)
		rc = failed(c, "fsmount");
	if (rc == 0 && sys_move_mount(mfd, tgt) < 0)
		rc = failed(c, "move_mount");
	int saved = errno;
	close(fsfd);
	if (rc < 0 && mfd >= 0)
		close(mfd);
	errno = saved;
	return rc < 0 ? -1 : mfd;
}

static int prepare(struct ctx *c, const struct wire_record *r)
{
	const char *scratch = wire_path(r, 0);
	c->no_setattr = (r->ints[0] & MNT_NO_SETATTR) != 0;
	if (mount("", "/", "", MS_REC | MS_PRIVATE, "") < 0)
		return failed(c, "make private");
	if (mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0)
		return failed(c, "mount scratch tmpfs");
	if (chdir(scratch) < 0)
		return failed(c, "chdir");
	if (mkdir("." SCRATCH_OLDROOT, 0700) < 0 || mkdir("." SCRATCH_NEWROOT, 0700) < 0 ||
	    mkdir("." SCRATCH_MASK_DIR, 0700) < 0)
		return failed(c, "mkdir");
	int fd = open("." SCRATCH_MASK_FILE, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return failed(c, "create mask file");
	close(fd);
	if (chmod("." SCRATCH_MASK_FILE, 0) < 0 || chmod("." SCRATCH_MASK_DIR, 0) < 0)
		return failed(c, "chmod");
	if (syscall(SYS_pivot_root, ".", "." SCRATCH_OLDROOT) < 0)
		return failed(c, "pivot_root");
	if (chdir("/") < 0)
		return failed(c, "chdir");
	c->host = open(SCRATCH_OLDROOT, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	c->mask_file = open(SCRATCH_MASK_FILE, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	c->mask_dir = open(SCRATCH_MASK_DIR, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (c->host < 0 || c->mask_file < 0 || c->mask_dir < 0)
		return failed(c, "open scratch");
	return 0;
}

static int root(struct ctx *c, const struct wire_record *r)
{
	int src = open_in(c->host, wire_path(r, 0));
	if (src < 0)
		return failed(c, "open source");
	int nr = open(SCRATCH_NEWROOT, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	int rc = nr < 0 ? failed(c, "open " SCRATCH_NEWROOT) : bind(c, src, nr, r->ints[0], 1);
	int saved = errno;
	close(src);
	if (nr >= 0)
		close(nr);
	errno = saved;
	if (rc < 0)
		return -1;
	c->root = open(SCRATCH_NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return c->root < 0 ? failed(c, "open new root") : 0;
}

/* empty_root mounts an empty tmpfs as the new root, to be sealed
 * read-only at MNT_ENTER: the host shows only where later steps bind it. */
static int empty_root(struct ctx *c, const struct wire_record *r, size_t index)
{
	int fsfd = (int)syscall(SYS_fsopen, "tmpfs", K_FSOPEN_CLOEXEC), mfd = -1, rc = 0;
	if (fsfd < 0)
		return failed(c, "fsopen");
	if (syscall(SYS_fsconfig, fsfd, K_FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
	    syscall(SYS_fsconfig, fsfd, K_FSCONFIG_SET_STRING, "size", "1m", 0) < 0)
		rc = failed(c, "fsconfig");
	else if (syscall(SYS_fsconfig, fsfd, K_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		rc = failed(c, "fsconfig create");
	else if ((mfd = (int)syscall(SYS_fsmount, fsfd, K_FSMOUNT_CLOEXEC, r->ints[0])) < 0)
		rc = failed(c, "fsmount");
	int saved = errno;
	close(fsfd);
	errno = saved;
	if (rc < 0)
		return -1;
	int nr = open(SCRATCH_NEWROOT, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (nr < 0 || sys_move_mount(mfd, nr) < 0) {
		rc = failed(c, nr < 0 ? "open " SCRATCH_NEWROOT : "move_mount");
		saved = errno;
		close(mfd);
		if (nr >= 0)
			close(nr);
		errno = saved;
		return rc;
	}
	close(nr);
	c->seal_fd[c->nseal] = mfd;
	c->seal_index[c->nseal++] = (int)index;
	c->root = open(SCRATCH_NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return c->root < 0 ? failed(c, "open new root") : 0;
}

/* file_source writes a MNT_FILE step's content to a new file of its own
 * in the scratch tmpfs (the cwd's root, detached at MNT_ENTER: only the
 * bind keeps it), mode 0444, and returns it opened O_PATH. */
static int file_source(struct ctx *c, const struct wire_record *r, size_t index)
{
	char name[32];
	snprintf(name, sizeof name, "/file-%zu", index);
	int fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0)
		return failed(c, "create file");
	const uint8_t *p = r->blobs[1].p;
	size_t left = r->blobs[1].len;
	while (left > 0) {
		ssize_t n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int saved = n < 0 ? errno : EIO;
			close(fd);
			errno = saved;
			return failed(c, "write file");
		}
		p += n;
		left -= (size_t)n;
	}
	/* 0444 whatever the umask. */
	if (fchmod(fd, 0444) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return failed(c, "chmod file");
	}
	close(fd);
	fd = open(name, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? failed(c, "open file") : fd;
}

/* target_step runs the steps that work on a target: bind, newfs, mask,
 * rebind, file. It returns 1 when the step was skipped. */
static int target_step(struct ctx *c, const struct wire_record *r, size_t index)
{
	uint64_t flags = r->ints[0], attrs = r->ints[1];
	int recursive = (flags & MNT_RECURSIVE) != 0;
	const char *target = wire_path(r, r->kind == MNT_BIND ? 1 : 0);
	int src = -1, tgt, rc;
	if (r->kind == MNT_BIND) {
		const char *source = wire_path(r, 0);
		src = open_in(flags & MNT_SRC_ROOT ? c->root : c->host, source);
		if (src < 0) {
			if (skip(flags, errno, 1))
				return 1;
			snprintf(c->op_path, sizeof c->op_path, "%s", source);
			return failed(c, "open source");
		}
	} else if (r->kind == MNT_FILE && (src = file_source(c, r, index)) < 0) {
		return -1;
	}
	tgt = open_target(c, target, flags, src);
	if (tgt < 0) {
		int saved = errno;
		if (src >= 0)
			close(src);
		errno = saved;
		if (skip(flags, errno, 0))
			return 1;
		/* An optional target the init cannot reach is one the command,
		 * with the same uid and no capabilities, cannot reach either. */
		c->op_path[0] = 0;
		return failed(c, "open target");
	}
	switch (r->kind) {
	case MNT_BIND:
		rc = bind(c, src, tgt, attrs, recursive);
		break;
	case MNT_REBIND:
		rc = bind(c, tgt, tgt, attrs, recursive);
		break;
	case MNT_MASK:
		rc = bind(c, is_dir(tgt) ? c->mask_dir : c->mask_file, tgt, attrs, 0);
		break;
	case MNT_FILE:
		if (is_dir(tgt)) {
			/* a file goes over a file */
			errno = EISDIR;
			rc = failed(c, "bind file");
			break;
		}
		rc = bind(c, src, tgt, attrs, 0);
		break;
	default: {
		int mfd = new_fs(c, r, tgt, 0);
		if (mfd < 0 && r->ints[2] != 0)
			/* e.g. devpts on kernels that refuse a valueless
			 * "newinstance" through fsconfig's string form */
			mfd = new_fs(c, r, tgt, r->ints[2]);
		rc = mfd < 0 ? -1 : 0;
		if (mfd >= 0 && (flags & MNT_SEAL)) {
			c->seal_fd[c->nseal] = mfd;
			c->seal_index[c->nseal++] = (int)index;
		} else if (mfd >= 0) {
			close(mfd);
		}
	}
	}
	int saved = errno;
	if (src >= 0)
		close(src);
	close(tgt);
	errno = saved;
	return rc;
}

static int symlink_step(struct ctx *c, const struct wire_record *r)
{
	int pfd = open_in(c->root, wire_path(r, 0));
	if (pfd < 0)
		return failed(c, "open");
	int rc = symlinkat(wire_path(r, 2), pfd, wire_path(r, 1)) < 0 ? failed(c, "symlink") : 0;
	int saved = errno;
	close(pfd);
	errno = saved;
	return rc;
}

/* enter makes every sealed filesystem read-only, makes /newroot the root
 * and drops the scratch tree and the host tree with it. */
static int enter(struct ctx *c, size_t *index)
{
	size_t self = *index;
	for (size_t i = 0; i < c->nseal; i++) {
		int done = set_attrs(c, c->seal_fd[i], MNT_ATTR_RDONLY, 0);
		if (done == 0)
			done = remount_attached(c, c->seal_fd[i], MNT_ATTR_RDONLY, 0) < 0 ? -1 : 1;
		if (done < 0) {
			*index = (size_t)c->seal_index[i];
			return failed(c, "seal read-only");
		}
	}
	*index = self;
	int old = open("/", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (old < 0)
		return failed(c, "open old root");
	int rc = 0;
	if (fchdir(c->root) < 0)
		rc = failed(c, "fchdir new root");
	/* pivot_root(".", ".") stacks the old root on the new one; detaching
	 * it leaves only the new root, with no path back to the host. */
	else if (syscall(SYS_pivot_root, ".", ".") < 0)
		rc = failed(c, "pivot_root");
	else if (fchdir(old) < 0)
		rc = failed(c, "fchdir old root");
	else if (umount2(".", MNT_DETACH) < 0)
		rc = failed(c, "detach old root");
	else if (chdir("/") < 0)
		rc = failed(c, "chdir");
	int saved = errno;
	close(old);
	errno = saved;
	return rc;
}

/* clean_abs says whether p is absolute and clean: no empty, "." or ".."
 * component and no trailing slash. */
static int clean_abs(const char *p)
{
	if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX)
		return 0;
	if (p[1] == 0)
		return 1;
	for (const char *c = p; *c; c++) {
		if (*c != '/')
			continue;
		const char *e = c + 1 + strcspn(c + 1, "/");
		size_t n = (size_t)(e - c - 1);
		if (n == 0 || (n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return 0;
	}
	return 1;
}

/* is_root says whether kind makes the new root (the message's second record). */
static int is_root(uint16_t kind)
{
	return kind == MNT_ROOT || kind == MNT_EMPTY_ROOT;
}

/* check_record checks one record's shape: its field counts, its flags and
 * attributes, its paths and names. It returns a reason, or NULL. */
static const char *check_record(const struct wire_record *r, size_t i, size_t n)
{
	static const struct {
		uint8_t ints, blobs, paths; /* paths: the leading blobs that are paths */
	} shape[] = {
		[MNT_PREPARE] = {1, 1, 1}, [MNT_ROOT] = {1, 1, 1},   [MNT_BIND] = {2, 2, 2},
		[MNT_NEWFS] = {3, 0, 1},   [MNT_MKDIR] = {2, 1, 1},  [MNT_SYMLINK] = {1, 3, 1},
		[MNT_MASK] = {2, 1, 1},    [MNT_REBIND] = {2, 1, 1}, [MNT_ENTER] = {0, 0, 0},
		[MNT_EMPTY_ROOT] = {1, 0, 0}, [MNT_FILE] = {2, 2, 1},
	};
	if (r->kind == 0 || r->kind > MNT_FILE)
		return "unknown kind";
	if ((i == 0) != (r->kind == MNT_PREPARE) || (i == 1) != is_root(r->kind) ||
	    (i == n - 1) != (r->kind == MNT_ENTER))
		return "out of order (prepare, root, steps, enter)";
	if (r->nints != shape[r->kind].ints)
		return "wrong number of ints";
	if (r->kind == MNT_NEWFS) {
		if (r->nblobs < 2 || r->nblobs % 2 != 0 || r->nblobs > 2 + 2 * MNT_MAX_OPTIONS)
			return "wrong number of blobs";
	} else if (r->nblobs != shape[r->kind].blobs) {
		return "wrong number of blobs";
	}
	for (unsigned k = 0; k < r->nblobs; k++)
		if (wire_path(r, k) == NULL)
			return "a string holds a NUL";
	for (unsigned k = 0; k < shape[r->kind].paths; k++)
		if (!clean_abs(wire_path(r, k)))
			return "a path is not absolute and clean";
	switch (r->kind) {
	case MNT_PREPARE:
		return r->ints[0] & ~(uint64_t)MNT_NO_SETATTR ? "unknown flags" : NULL;
	case MNT_ROOT:
	case MNT_EMPTY_ROOT:
		return r->ints[0] & ~(uint64_t)ALL_ATTRS ? "unknown attributes" : NULL;
	case MNT_NEWFS:
		if (r->blobs[1].len == 0)
			return "no filesystem type";
		for (unsigned k = 2; k < r->nblobs; k += 2)
			if (r->blobs[k].len == 0)
				return "an option without a name";
		if (r->ints[2] >> (r->nblobs / 2 - 1))
			return "a droppable option that is not there";
		break;
	case MNT_MKDIR:
		if (r->ints[1] & ~(uint64_t)07777)
			return "bad mode";
		break;
	case MNT_SYMLINK:
		if (r->blobs[1].len == 0 || strchr(wire_path(r, 1), '/') || strcmp(wire_path(r, 1), ".") == 0 ||
		    strcmp(wire_path(r, 1), "..") == 0)
			return "bad link name";
		break;
	case MNT_FILE:
		if (strcmp(wire_path(r, 0), "/") == 0)
			return "a file over /";
		if (r->blobs[1].len > MNT_MAX_FILE)
			return "a file over MNT_MAX_FILE bytes";
		break;
	}
	if (r->nints > 0 && (r->ints[0] & ~(uint64_t)ALL_FLAGS))
		return "unknown flags";
	if (r->nints > 1 && r->kind != MNT_MKDIR && (r->ints[1] & ~(uint64_t)ALL_ATTRS))
		return "unknown attributes";
	return NULL;
}

static int refuse(struct mnt_result *res, int index, const char *why)
{
	res->refused = 1;
	res->index = index;
	res->err = EINVAL;
	snprintf(res->op, sizeof res->op, "%s", why);
	return -1;
}

/* decode decodes and checks msg into a new array of records. */
static int decode(const uint8_t *msg, size_t len, struct wire_record **out, size_t *n, struct mnt_result *res)
{
	memset(res, 0, sizeof *res);
	res->index = -1;
	const char *why;
	struct wire_record *recs = wire_decode_alloc(msg, len, WIRE_MAX_RECORDS, n, &why);
	if (recs == NULL)
		return refuse(res, -1, why);
	if (*n < 3) {
		free(recs);
		return refuse(res, -1, "fewer than three records (prepare, root, enter)");
	}
	for (size_t i = 0; i < *n; i++) {
		if ((why = check_record(&recs[i], i, *n)) != NULL) {
			free(recs);
			return refuse(res, (int)i, why);
		}
	}
	*out = recs;
	return 0;
}

int mnt_check(const uint8_t *msg, size_t len, struct mnt_result *res)
{
	struct wire_record *recs;
	size_t n;
	if (decode(msg, len, &recs, &n, res) < 0)
		return -1;
	free(recs);
	return 0;
}

/* step_path is the path a step's error names by default. */
static const char *step_path(const struct wire_record *r)
{
	switch (r->kind) {
	case MNT_PREPARE:
		return wire_path(r, 0);
	case MNT_BIND:
		return wire_path(r, 1);
	case MNT_SYMLINK:
		return wire_path(r, 1);
	case MNT_ENTER:
	case MNT_EMPTY_ROOT:
		return "/";
	default:
		return wire_path(r, 0);
	}
}

int mnt_apply(const uint8_t *msg, size_t len, struct mnt_result *res)
{
	struct wire_record *recs;
	size_t n;
	if (decode(msg, len, &recs, &n, res) < 0)
		return -1;
	struct ctx c = {.host = -1, .root = -1, .mask_file = -1, .mask_dir = -1, .res = res};
	c.seal_fd = calloc(n, sizeof *c.seal_fd);
	c.seal_index = calloc(n, sizeof *c.seal_index);
	int rc = c.seal_fd && c.seal_index ? 0 : failed(&c, "allocate");
	size_t i;
	for (i = 0; rc == 0 && i < n; i++) {
		const struct wire_record *r = &recs[i];
		c.op_path[0] = 0;
		errno = 0;
		if (r->nints > 0 && r->kind != MNT_PREPARE && !is_root(r->kind) && (r->ints[0] & MNT_DEPENDS) &&
		    c.skipped)
			continue;
		int skipped = 0;
		switch (r->kind) {
		case MNT_PREPARE:
			rc = prepare(&c, r);
			break;
		case MNT_ROOT:
			rc = root(&c, r);
			break;
		case MNT_EMPTY_ROOT:
			rc = empty_root(&c, r, i);
			break;
		case MNT_MKDIR:
			rc = mkdir_p(&c, wire_path(r, 0), (mode_t)r->ints[1]);
			break;
		case MNT_SYMLINK:
			rc = symlink_step(&c, r);
			break;
		case MNT_ENTER:
			rc = enter(&c, &i);
			break;
		default:
			rc = target_step(&c, r, i);
			skipped = rc == 1;
			rc = rc < 0 ? -1 : 0;
		}
		if (r->nints > 0 && r->kind != MNT_PREPARE && !is_root(r->kind) && !(r->ints[0] & MNT_DEPENDS))
			c.skipped = skipped;
	}
	if (rc < 0) {
		res->err = errno ? errno : EIO;
		res->index = i > 0 ? (int)(i - 1) : -1;
		snprintf(res->op, sizeof res->op, "%s", c.op ? c.op : "apply");
		snprintf(res->path, sizeof res->path, "%s", c.op_path[0] || i == 0 ? c.op_path : step_path(&recs[i - 1]));
	}
	int fds[] = {c.host, c.root, c.mask_file, c.mask_dir};
	for (size_t k = 0; k < sizeof fds / sizeof fds[0]; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	for (size_t k = 0; k < c.nseal; k++)
		close(c.seal_fd[k]);
	free(c.seal_fd);
	free(c.seal_index);
	free(recs);
	return rc;
}
