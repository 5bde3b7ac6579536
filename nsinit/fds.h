//go:build linux && cgo

/*
 * Fd hygiene of the pre-runtime stage (CVE-2024-21626: no fd reaches a
 * sandbox by mistake).
 */
#ifndef HUTCH_FDS_H
#define HUTCH_FDS_H

/* mark_cloexec sets close-on-exec on every fd from first up. It returns 0
 * or -1 with errno set. */
int mark_cloexec(int first);

/* close_from closes every fd from first up except keep (-1: none). It
 * returns 0 or -1 with errno set. */
int close_from(int first, int keep);

#endif
