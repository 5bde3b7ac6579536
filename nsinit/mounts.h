//go:build linux && cgo

/*
 * The filesystem view's executor (mounts.c): a list of primitive steps, as
 * wire records, that the init performs in a fresh mount namespace. Go
 * decides every step (package nsinit expands a mounts.Plan into them, see
 * mounts_linux.go); C only performs them, looking up every path with
 * openat2 inside its tree and without following symlinks.
 *
 * Paths are absolute. A target is a path in the new root; a source is a
 * path in the host tree, or in the new root with MNT_SRC_ROOT. The message
 * starts with MNT_PREPARE and MNT_ROOT (or MNT_EMPTY_ROOT) and ends with
 * MNT_ENTER; errors name
 * a step by its record's index.
 */
#ifndef HUTCH_MOUNTS_H
#define HUTCH_MOUNTS_H

#include <stddef.h>
#include <stdint.h>

/* Record kinds. */
#define MNT_PREPARE 1 /* ints: flags (MNT_NO_SETATTR); blobs: scratch dir
		       * make / private, mount a scratch tmpfs there, pivot into it (host at
		       * /.oldroot), create the mask file and the mask dir */
#define MNT_ROOT 2    /* ints: attrs; blobs: host source
		       * bind the host source recursively as the new root */
#define MNT_BIND 3    /* ints: flags, attrs; blobs: source, target
		       * bind source's tree at target */
#define MNT_NEWFS 4   /* ints: flags, attrs, droppable; blobs: target, fstype, then
		       * key, value pairs (MNT_MAX_OPTIONS); mount a new filesystem at target
		       * with those options, retried once without the options whose bit is set
		       * in droppable when it fails */
#define MNT_MKDIR 5   /* ints: flags, mode; blobs: path
		       * create path and its missing parents (0755); path gets mode exactly */
#define MNT_SYMLINK 6 /* ints: flags; blobs: parent dir, name, content */
#define MNT_MASK 7    /* ints: flags, attrs; blobs: target
		       * bind the mask file or the mask dir (by target's type) over target */
#define MNT_REBIND 8  /* ints: flags, attrs; blobs: target
		       * bind target's tree onto itself with attrs added */
#define MNT_ENTER 9   /* no fields
		       * seal, pivot into the new root, detach the host and the scratch */
#define MNT_EMPTY_ROOT 10 /* ints: attrs; no blobs; in MNT_ROOT's place
			   * mount an empty tmpfs (mode 0755) as the new root, with attrs;
			   * sealed read-only at MNT_ENTER */
#define MNT_FILE 11 /* ints: flags, attrs; blobs: target, content (at most
		     * MNT_MAX_FILE bytes); write content to a new mode-0444 file
		     * in the scratch tmpfs and bind it over target with attrs */

#define MNT_MAX_FILE (64 << 10)

/* Step flags. */
#define MNT_OPTIONAL 0x1   /* skip when the target is missing or denied, or the source missing */
#define MNT_IF_EXISTS 0x2  /* skip when the target is missing */
#define MNT_CREATE 0x4     /* create a missing target: a dir, or a file for a non-dir source */
#define MNT_SRC_ROOT 0x8   /* the source is in the new root, not the host tree */
#define MNT_RECURSIVE 0x10 /* clone and set attrs on the whole tree, submounts included */
#define MNT_SEAL 0x20      /* make the new filesystem read-only at MNT_ENTER */
#define MNT_DEPENDS 0x40   /* skip when the last step without this flag was skipped */

/* MNT_PREPARE flags. */
#define MNT_NO_SETATTR 0x1 /* act as a kernel before 5.12: remount through mountinfo */

/* Mount attributes, as mount_setattr(2)'s MOUNT_ATTR_*. */
#define MNT_ATTR_RDONLY 0x1
#define MNT_ATTR_NOSUID 0x2
#define MNT_ATTR_NODEV 0x4
#define MNT_ATTR_NOEXEC 0x8

#define MNT_MAX_OPTIONS 3

/* The outcome of mnt_apply. On failure, index is the failed record's
 * index, op the failed operation, path the path it worked on and err its
 * errno; refused is set when the message was malformed and nothing ran
 * (index is then -1 for the message as a whole, op says what is wrong). */
struct mnt_result {
	int index;
	int err;
	int refused;
	int fell_back; /* attributes were set by remounting (no mount_setattr) */
	char op[64];
	char path[512];
};

/* mnt_check decodes msg and checks every record's shape, running nothing;
 * mnt_apply checks, then runs the steps. Both return 0 or -1. */
int mnt_check(const uint8_t *msg, size_t len, struct mnt_result *res);
int mnt_apply(const uint8_t *msg, size_t len, struct mnt_result *res);

#endif
