//go:build linux && cgo

#include <stdlib.h>

#include "wire.h"

#include <string.h>

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

int wire_decode(const uint8_t *buf, size_t len, struct wire_record *records, size_t cap, size_t *nrecords,
		const char **why)
{
	*nrecords = 0;
	if (len < WIRE_HEADER) {
		*why = "shorter than a header";
		return -1;
	}
	if (get32(buf) != WIRE_MAGIC) {
		*why = "bad magic";
		return -1;
	}
	if (get16(buf + 4) != WIRE_VERSION) {
		*why = "unknown version";
		return -1;
	}
	size_t n = get16(buf + 6);
	if (get32(buf + 8) != len || len > WIRE_MAX_MESSAGE) {
		*why = "length does not match the header";
		return -1;
	}
	if (n > cap || n > WIRE_MAX_RECORDS) {
		*why = "too many records";
		return -1;
	}
	size_t off = WIRE_HEADER;
	for (size_t i = 0; i < n; i++) {
		struct wire_record *r = &records[i];
		if (len - off < 8) {
			*why = "truncated record header";
			return -1;
		}
		r->kind = get16(buf + off);
		r->nints = buf[off + 2];
		r->nblobs = buf[off + 3];
		uint32_t body = get32(buf + off + 4);
		off += 8;
		if (r->nints > WIRE_MAX_INTS || r->nblobs > WIRE_MAX_BLOBS) {
			*why = "too many fields in a record";
			return -1;
		}
		if (body > len - off) {
			*why = "record body past the end";
			return -1;
		}
		size_t end = off + body;
		if ((size_t)r->nints * 8 > end - off) {
			*why = "ints past the record's end";
			return -1;
		}
		for (unsigned k = 0; k < r->nints; k++, off += 8)
			r->ints[k] = get64(buf + off);
		for (unsigned k = 0; k < r->nblobs; k++) {
			if (end - off < 4) {
				*why = "blob length past the record's end";
				return -1;
			}
			uint32_t bl = get32(buf + off);
			off += 4;
			/* The blob and its NUL. */
			if (bl >= end - off) {
				*why = "blob past the record's end";
				return -1;
			}
			if (buf[off + bl] != 0) {
				*why = "blob without its NUL";
				return -1;
			}
			r->blobs[k].p = buf + off;
			r->blobs[k].len = bl;
			off += (size_t)bl + 1;
		}
		if (off != end) {
			*why = "record body longer than its fields";
			return -1;
		}
	}
	if (off != len) {
		*why = "bytes after the last record";
		return -1;
	}
	*nrecords = n;
	return 0;
}

struct wire_record *wire_decode_alloc(const uint8_t *buf, size_t len, size_t max, size_t *nrecords, const char **why)
{
	*nrecords = 0;
	/* The header's count sizes the array (wire_decode checks it against
	 * the message); a missing header decodes into one slot and fails. */
	size_t cap = len >= WIRE_HEADER ? get16(buf + 6) : 1;
	if (cap > max) {
		*why = "too many records";
		return NULL;
	}
	struct wire_record *recs = calloc(cap ? cap : 1, sizeof *recs);
	if (recs == NULL) {
		*why = "out of memory";
		return NULL;
	}
	if (wire_decode(buf, len, recs, cap, nrecords, why) < 0) {
		free(recs);
		return NULL;
	}
	return recs;
}

const char *wire_check_shape(const struct wire_record *r, const struct wire_shape *shapes, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (shapes[k].kind == r->kind)
			return r->nints == shapes[k].nints && r->nblobs == shapes[k].nblobs ? NULL
											  : "wrong number of fields";
	return "unknown kind";
}

const char *wire_path(const struct wire_record *r, unsigned i)
{
	if (i >= r->nblobs)
		return NULL;
	const struct wire_blob *b = &r->blobs[i];
	if (memchr(b->p, 0, b->len) != NULL)
		return NULL;
	return (const char *)b->p;
}

static void put(struct wire_writer *w, const void *p, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void put16(struct wire_writer *w, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	put(w, b, 2);
}

static void put32(struct wire_writer *w, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	put(w, b, 4);
}

static void put64(struct wire_writer *w, uint64_t v)
{
	put32(w, (uint32_t)v);
	put32(w, (uint32_t)(v >> 32));
}

void wire_begin(struct wire_writer *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->records = 0;
	w->overflow = 0;
	put32(w, WIRE_MAGIC);
	put16(w, WIRE_VERSION);
	put16(w, 0);
	put32(w, 0);
}

void wire_add(struct wire_writer *w, uint16_t kind, const uint64_t *ints, unsigned nints,
	      const struct wire_blob *blobs, unsigned nblobs)
{
	if (nints > WIRE_MAX_INTS || nblobs > WIRE_MAX_BLOBS || w->records >= WIRE_MAX_RECORDS) {
		w->overflow = 1;
		return;
	}
	size_t body = (size_t)nints * 8;
	for (unsigned k = 0; k < nblobs; k++)
		body += 4 + (size_t)blobs[k].len + 1;
	if (body > UINT32_MAX) {
		w->overflow = 1;
		return;
	}
	put16(w, kind);
	uint8_t counts[2] = {(uint8_t)nints, (uint8_t)nblobs};
	put(w, counts, 2);
	put32(w, (uint32_t)body);
	for (unsigned k = 0; k < nints; k++)
		put64(w, ints[k]);
	for (unsigned k = 0; k < nblobs; k++) {
		put32(w, blobs[k].len);
		put(w, blobs[k].p, blobs[k].len);
		put(w, "", 1);
	}
	w->records++;
}

size_t wire_end(struct wire_writer *w)
{
	if (w->overflow || w->len > WIRE_MAX_MESSAGE)
		return 0;
	w->buf[6] = (uint8_t)w->records;
	w->buf[7] = (uint8_t)(w->records >> 8);
	uint32_t l = (uint32_t)w->len;
	w->buf[8] = (uint8_t)l;
	w->buf[9] = (uint8_t)(l >> 8);
	w->buf[10] = (uint8_t)(l >> 16);
	w->buf[11] = (uint8_t)(l >> 24);
	return w->len;
}
