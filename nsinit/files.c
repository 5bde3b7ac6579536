//go:build linux && cgo

/*
 * The file server (see files.h): a sandbox init that opens, makes and
 * lists what the host asks, in its own view, with its own credentials,
 * and hands back what the kernel answered. No decision is made here: the
 * kernel judges every path, and the host reads the answer.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "wire.h"

/* The open flags a FILE_OPEN may carry; anything else is refused. */
#define OPEN_FLAGS (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_NOFOLLOW | O_DIRECTORY | O_PATH)

/* The largest reply message: a listing takes as many as it needs. */
#define REPLY_MAX (256u << 10)

static const struct wire_shape shapes[] = {
	{FILE_OPEN, 3, 1},
	{FILE_MKDIR, 1, 1},
	{FILE_LIST, 0, 1},
};

/* decode parses one request into *r: exactly one record of a known shape
 * whose path is absolute, shorter than PATH_MAX and holds no NUL. */
static int decode(const uint8_t *msg, size_t len, struct wire_record *r, const char **why)
{
	size_t n;
	if (wire_decode(msg, len, r, 1, &n, why) < 0)
		return -1;
	if (n != 1) {
		*why = "not one record";
		return -1;
	}
	if ((*why = wire_check_shape(r, shapes, sizeof shapes / sizeof shapes[0])) != NULL)
		return -1;
	const char *path = wire_path(r, 0);
	if (path == NULL || path[0] != '/' || r->blobs[0].len >= PATH_MAX) {
		*why = "path: not absolute, holding a NUL, or too long";
		return -1;
	}
	return 0;
}

int files_check(const uint8_t *msg, size_t len, const char **why)
{
	struct wire_record r;
	return decode(msg, len, &r, why);
}

/* read_full reads exactly n bytes. It returns 0, 1 at EOF before the
 * first byte, or -1. recv without a control buffer drops any fd sent. */
static int read_full(int sock, uint8_t *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = recv(sock, p + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && got == 0)
			return 1;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* A reply frame: the length, then the message, written by w. */
static uint8_t reply_buf[4 + REPLY_MAX];
static struct wire_writer w;

static void reply_begin(void) { wire_begin(&w, reply_buf + 4, REPLY_MAX); }

/* reply_send sends the frame begun, with fd attached (-1: none). */
static int reply_send(int sock, int fd)
{
	size_t n = wire_end(&w);
	if (n == 0)
		return -1; /* cannot happen: every writer leaves room for its end */
	for (int i = 0; i < 4; i++)
		reply_buf[i] = (uint8_t)(n >> (8 * i));
	n += 4;
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	size_t sent = 0;
	while (sent < n) {
		struct iovec iov = {reply_buf + sent, n - sent};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fd >= 0 && sent == 0) {
			m.msg_control = &ctl;
			m.msg_controllen = sizeof ctl;
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof fd);
		}
		ssize_t s = sendmsg(sock, &m, MSG_NOSIGNAL);
		if (s < 0 && errno == EINTR)
			continue;
		if (s <= 0)
			return -1;
		sent += (size_t)s;
	}
	return 0;
}

static struct wire_blob text(const char *s) { return (struct wire_blob){(const uint8_t *)s, (uint32_t)strlen(s)}; }

static char where[PATH_MAX + 1];

/* join writes dir "/" name into out (cap bytes), without a doubled slash
 * after "/"; 0, or -1 when it does not fit. */
static int join(char *out, size_t cap, const char *dir, const char *name)
{
	size_t d = strcmp(dir, "/") == 0 ? 0 : strlen(dir), n = strlen(name);
	if (d + 1 + n + 1 > cap)
		return -1;
	memmove(out, dir, d);
	out[d] = '/';
	memcpy(out + d + 1, name, n + 1);
	return 0;
}

/* dir_name names the directory fd in this view by its working-directory
 * path, into out; 0, or -1 when it cannot be named. */
static int dir_name(int fd, char *out, size_t cap)
{
	int ok = fchdir(fd) == 0;
	/* The system call, not libc's: it says "(unreachable)" rather than
	 * failing, and that is not a path. */
	ok = ok && syscall(SYS_getcwd, out, cap) > 0 && out[0] == '/';
	if (chdir("/") < 0)
		ok = 0;
	return ok ? 0 : -1;
}

/* name_by_walk names, without /proc, the non-directory s describes, which
 * path opened: the parent of path is opened and named, and the name in it
 * kept only if it is the same object (device and inode); a symlink there
 * is followed, as the open did, at most 40 times. "" when no name is
 * found: a name given is always the object's. */
static const char *name_by_walk(const char *path, const struct stat *s)
{
	static char cand[PATH_MAX + 1], dir[PATH_MAX + 1], link[PATH_MAX + 1];
	if (strlen(path) >= sizeof cand)
		return "";
	strcpy(cand, path);
	for (int links = 0; links <= 40; links++) {
		size_t n = strlen(cand);
		while (n > 1 && cand[n - 1] == '/')
			cand[--n] = 0;
		char *slash = strrchr(cand, '/');
		if (slash == NULL)
			return "";
		const char *base = slash + 1;
		if (*base == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
			return ""; /* a directory's name: not what s describes */
		size_t dlen = slash == cand ? 1 : (size_t)(slash - cand);
		memcpy(dir, cand, dlen);
		dir[dlen] = 0;
		int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return "";
		struct stat es;
		int rc = fstatat(dfd, base, &es, AT_SYMLINK_NOFOLLOW);
		if (rc == 0 && es.st_dev == s->st_dev && es.st_ino == s->st_ino && dir_name(dfd, dir, sizeof dir) == 0 &&
		    join(where, sizeof where, dir, base) == 0) {
			close(dfd);
			return where;
		}
		ssize_t k = -1;
		if (rc == 0 && S_ISLNK(es.st_mode))
			k = readlinkat(dfd, base, link, sizeof link - 1);
		if (k <= 0 || (link[0] != '/' && dir_name(dfd, dir, sizeof dir) < 0)) {
			close(dfd);
			return "";
		}
		close(dfd);
		link[k] = 0;
		if (link[0] == '/')
			strcpy(cand, link);
		else if (join(cand, sizeof cand, dir, link) < 0)
			return "";
	}
	return "";
}

/* fd_path names what fd is open on in this view (path opened it): its
 * /proc link, or without /proc (LevelNamespacesNoProc) a directory's
 * working-directory path, or a verified name of a file; "" when none
 * is found. */
static const char *fd_path(int fd, const struct stat *s, const char *path)
{
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, where, sizeof where);
	if (n > 0 && (size_t)n < sizeof where && where[0] == '/') {
		where[n] = 0;
		return where;
	}
	where[0] = 0;
	if (S_ISDIR(s->st_mode))
		return dir_name(fd, where, sizeof where) == 0 ? where : "";
	return name_by_walk(path, s);
}

static void add_result(int err, const struct stat *s, const char *path)
{
	uint64_t v[7] = {(uint64_t)err,
			 s->st_mode,
			 (uint64_t)s->st_size,
			 (uint64_t)s->st_mtim.tv_sec,
			 (uint64_t)s->st_mtim.tv_nsec,
			 s->st_dev,
			 s->st_ino};
	struct wire_blob b = text(path);
	wire_add(&w, FILE_RESULT, v, 7, &b, 1);
}

static int do_open(int sock, const struct wire_record *r)
{
	uint64_t flags = r->ints[0], mode = r->ints[1], want = r->ints[2];
	struct stat s;
	memset(&s, 0, sizeof s);
	const char *path = "";
	int err = 0, fd = -1;
	if ((flags & ~(uint64_t)OPEN_FLAGS) != 0 || (mode & ~(uint64_t)07777) != 0 ||
	    (want & ~(uint64_t)(FILE_SEND | FILE_REGULAR)) != 0) {
		err = EINVAL;
	} else {
		int f = (int)flags | O_CLOEXEC | O_NOCTTY;
		if ((f & O_PATH) == 0)
			f |= O_NONBLOCK; /* a FIFO must not block the server */
		fd = open(wire_path(r, 0), f, (mode_t)mode);
		if (fd < 0)
			err = errno;
		else if (fstat(fd, &s) < 0)
			err = errno;
		else if ((want & FILE_REGULAR) && !S_ISREG(s.st_mode))
			err = S_ISDIR(s.st_mode) ? EISDIR : EINVAL;
		/* A regular file goes back blocking, as the caller asked: its
		 * reader then need not try to poll it. */
		else if (S_ISREG(s.st_mode) && (f & O_NONBLOCK) && ((int)flags & O_NONBLOCK) == 0 &&
			 fcntl(fd, F_SETFL, f & ~O_NONBLOCK) < 0)
			err = errno;
		if (err == 0)
			path = fd_path(fd, &s, wire_path(r, 0));
	}
	if (err != 0 && fd >= 0) {
		close(fd);
		fd = -1;
	}
	reply_begin();
	add_result(err, &s, path);
	int rc = reply_send(sock, (want & FILE_SEND) ? fd : -1);
	if (fd >= 0)
		close(fd);
	return rc;
}

static int do_mkdir(int sock, const struct wire_record *r)
{
	struct stat s;
	memset(&s, 0, sizeof s);
	int err = 0;
	if ((r->ints[0] & ~(uint64_t)07777) != 0)
		err = EINVAL;
	else if (mkdir(wire_path(r, 0), (mode_t)r->ints[0]) < 0)
		err = errno;
	reply_begin();
	add_result(err, &s, "");
	return reply_send(sock, -1);
}

/* do_list sends the directory's own result, then its entries, each with
 * what lstat says of it, over as many frames as they take. */
static int do_list(int sock, const struct wire_record *r)
{
	struct stat s;
	memset(&s, 0, sizeof s);
	int err = 0;
	const char *path = "";
	int fd = open(wire_path(r, 0), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		err = errno;
	else if (fstat(fd, &s) < 0)
		err = errno;
	else
		path = fd_path(fd, &s, wire_path(r, 0));
	DIR *d = NULL;
	if (err == 0 && (d = fdopendir(fd)) == NULL)
		err = errno;
	if (d == NULL && fd >= 0)
		close(fd);
	reply_begin();
	add_result(err, &s, path);
	if (d == NULL) {
		uint64_t e = (uint64_t)err;
		wire_add(&w, FILE_END, &e, 1, NULL, 0);
		return reply_send(sock, -1);
	}
	int end = 0;
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (e == NULL) {
			end = errno;
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		/* Room for this entry and the listing's end, or a new frame. */
		if (w.records + 2 >= WIRE_MAX_RECORDS || w.len + NAME_MAX + 256 > w.cap) {
			if (reply_send(sock, -1) < 0) {
				closedir(d);
				return -1;
			}
			reply_begin();
		}
		struct stat es;
		memset(&es, 0, sizeof es);
		uint64_t v[5] = {0};
		if (fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0)
			v[0] = (uint64_t)errno;
		else {
			v[1] = es.st_mode;
			v[2] = (uint64_t)es.st_size;
			v[3] = (uint64_t)es.st_mtim.tv_sec;
			v[4] = (uint64_t)es.st_mtim.tv_nsec;
		}
		struct wire_blob b = text(e->d_name);
		wire_add(&w, FILE_ENTRY, v, 5, &b, 1);
	}
	closedir(d);
	uint64_t e = (uint64_t)end;
	wire_add(&w, FILE_END, &e, 1, NULL, 0);
	return reply_send(sock, -1);
}

int files_serve(int sock)
{
	static uint8_t req[FILE_MAX_REQUEST];
	for (;;) {
		uint8_t hdr[4];
		int rc = read_full(sock, hdr, sizeof hdr);
		if (rc != 0)
			return rc > 0 ? 0 : 1;
		size_t len = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
		if (len < WIRE_HEADER || len > sizeof req || read_full(sock, req, len) != 0)
			return 1; /* out of step with the host: nothing more can be read */
		struct wire_record r;
		const char *why;
		if (decode(req, len, &r, &why) < 0)
			return 1;
		switch (r.kind) {
		case FILE_OPEN:
			rc = do_open(sock, &r);
			break;
		case FILE_MKDIR:
			rc = do_mkdir(sock, &r);
			break;
		default:
			rc = do_list(sock, &r);
			break;
		}
		if (rc < 0)
			return 1;
	}
}
