//go:build linux && cgo

/*
 * The file server (files.c): a ready init given CMD_FILES instead of a
 * command serves the host's file operations from inside its sandbox. It
 * is a sandbox init like any other, built from the same plan as a
 * command's: the same mounts, the same credentials without capabilities,
 * Landlock and seccomp. So every path it opens is resolved by the kernel
 * in the command's view and judged with the command's rights; the host
 * never resolves a path of its own, it only reads, writes and fstats the
 * regular files the server opened and sent it.
 *
 * The server decides nothing: it opens, makes a directory or lists one,
 * exactly as asked, and says what the kernel answered.
 *
 * Requests, host to server, on the control socket: frames (a u32
 * little-endian length and a wire message of that length) of one record
 * each, with no fds (any sent are dropped by the read). Replies, server to
 * host: frames of FILE_RESULT (and, for a listing, FILE_ENTRY records,
 * over as many frames as it takes, the last ending with FILE_END); an fd
 * the host asked for travels with its reply frame.
 */
#ifndef HUTCH_FILES_H
#define HUTCH_FILES_H

#include <stddef.h>
#include <stdint.h>

/* Requests. */
#define FILE_OPEN 0x50  /* ints: open flags, mode, FILE_* wants; blobs: path */
#define FILE_MKDIR 0x51 /* ints: mode; blobs: path */
#define FILE_LIST 0x52  /* blobs: path; the directory, every symlink followed */

/* Replies. */
#define FILE_RESULT 0x58 /* ints: errno, mode, size, mtime s, mtime ns, dev, ino;
			  * blobs: the path of what was opened in the view ("" unknown) */
#define FILE_ENTRY 0x59  /* ints: errno of its lstat, mode, size, mtime s, mtime ns; blobs: name */
#define FILE_END 0x5a    /* ints: errno that ended the listing (0: its end) */

/* FILE_OPEN wants. */
#define FILE_SEND 0x1    /* send the opened fd with the reply */
#define FILE_REGULAR 0x2 /* refuse anything but a regular file: EISDIR, or EINVAL */

/* The largest request: a path of PATH_MAX and its record. */
#define FILE_MAX_REQUEST 8192

/* files_serve answers requests on sock until the host closes it (0) or
 * the socket fails (1). */
int files_serve(int sock);

/* files_check decodes a request and checks its shape, running nothing
 * (for the fuzzer); it returns 0, or -1 with *why set. */
int files_check(const uint8_t *msg, size_t len, const char **why);

#endif
