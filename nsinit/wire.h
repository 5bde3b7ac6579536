//go:build linux && cgo

/*
 * The pre-runtime stage's one message format, shared with Go (wire.go).
 *
 * A message is a header and a list of records, all little-endian:
 *
 *   u32 magic "HTCH" | u16 version | u16 record count | u32 total length
 *   per record: u16 kind | u8 ints | u8 blobs | u32 body length |
 *               ints x u64 | blobs x (u32 length, bytes, one NUL)
 *
 * Go writes every message the stage reads (spawn requests); the stage
 * writes its replies with the encoder below. The decoder trusts nothing:
 * every length is checked against what is left, a record's body length
 * must match its fields exactly, and the message must end where its header
 * says. The NUL after each blob lets a path be used as a C string once
 * wire_path has checked it holds no other NUL.
 */
#ifndef HUTCH_WIRE_H
#define HUTCH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x48435448u /* "HTCH" read as a little-endian u32 */
#define WIRE_VERSION 1
#define WIRE_HEADER 12
#define WIRE_MAX_INTS 8
#define WIRE_MAX_BLOBS 8
#define WIRE_MAX_RECORDS 4096
#define WIRE_MAX_MESSAGE (16u << 20)

struct wire_blob {
	const uint8_t *p; /* followed by a NUL inside the message */
	uint32_t len;
};

struct wire_record {
	uint16_t kind;
	uint8_t nints, nblobs;
	uint64_t ints[WIRE_MAX_INTS];
	struct wire_blob blobs[WIRE_MAX_BLOBS];
};

struct wire_msg {
	size_t nrecords;
	struct wire_record *records; /* caller's array */
};

/*
 * wire_decode parses buf[0:len] into at most cap records. It returns 0, or
 * -1 with *why naming the first problem; on error nothing in out is valid.
 */
int wire_decode(const uint8_t *buf, size_t len, struct wire_record *records, size_t cap, size_t *nrecords,
		const char **why);

/*
 * wire_decode_alloc decodes buf[0:len] into a new array (free it) of as
 * many records as the header says, refusing more than max. It returns the
 * array, or NULL with *why naming the first problem.
 */
struct wire_record *wire_decode_alloc(const uint8_t *buf, size_t len, size_t max, size_t *nrecords,
				      const char **why);

/* The shape of one record kind: how many ints and blobs it carries. */
struct wire_shape {
	uint16_t kind;
	uint8_t nints, nblobs;
};

/* wire_check_shape returns NULL when r's kind is among shapes[0:n] and r
 * carries exactly that kind's ints and blobs, or says why not. */
const char *wire_check_shape(const struct wire_record *r, const struct wire_shape *shapes, size_t n);

/* wire_path returns blob i of r as a C string, or NULL when it is missing
 * or holds a NUL of its own. */
const char *wire_path(const struct wire_record *r, unsigned i);

/* The encoder writes into a fixed buffer and records overflow instead of
 * writing past it. */
struct wire_writer {
	uint8_t *buf;
	size_t cap, len;
	uint16_t records;
	int overflow;
};

void wire_begin(struct wire_writer *w, uint8_t *buf, size_t cap);
/* wire_add appends one record; blobs may be NULL when nblobs is 0. */
void wire_add(struct wire_writer *w, uint16_t kind, const uint64_t *ints, unsigned nints,
	      const struct wire_blob *blobs, unsigned nblobs);
/* wire_end finishes the header; it returns the message length, or 0 when
 * the message did not fit. */
size_t wire_end(struct wire_writer *w);

#endif
