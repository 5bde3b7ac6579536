//go:build linux && cgo

/*
 * The init's reports to the host (see report.h): every event it writes on
 * the status pipe, whole, and the bookkeeping its started event is made
 * of: the phases timed from the init's first instruction, the layers the
 * plan reported enforced or skipped, how the unix wall is enforced. The
 * texts it keeps point into the plan, which lives as long as the init, or
 * are the init's own (phase names, skip reasons), kept as long.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "init.h"
#include "report.h"
#include "wire.h"

#define STATUS_FD 4

/* What a started event can list. */
#define MAX_LAYERS 32
#define MAX_SKIPPED 32
#define MAX_PHASES 16

struct text {
	const char *p;
	uint32_t len;
};

struct phase {
	const char *name;
	int64_t start, ns;
};

/* What the started event will list. */
static struct {
	struct text layers[MAX_LAYERS];
	size_t nlayers;
	struct text skipped[MAX_SKIPPED][2]; /* layer, reason */
	size_t nskipped;
	struct phase phases[MAX_PHASES];
	size_t nphases;
	int64_t last;
	struct text unix_wall;
} st;

static int64_t monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void report_begin(void)
{
	st.last = monotonic();
	st.phases[st.nphases++] = (struct phase){INIT_FIRST_PHASE, st.last, 0};
}

void report_phase(const char *name)
{
	int64_t now = monotonic();
	if (st.nphases < MAX_PHASES)
		st.phases[st.nphases++] = (struct phase){name, st.last, now - st.last};
	st.last = now;
}

static struct text text(const char *s) { return (struct text){s, (uint32_t)strlen(s)}; }

static struct text blob_text(const struct wire_record *r, unsigned i)
{
	return (struct text){(const char *)r->blobs[i].p, r->blobs[i].len};
}

static struct wire_blob blob(struct text t) { return (struct wire_blob){(const uint8_t *)t.p, t.len}; }

static void add_layer(struct text layer)
{
	if (st.nlayers < MAX_LAYERS)
		st.layers[st.nlayers++] = layer;
}

static void add_skipped(struct text layer, struct text reason)
{
	if (st.nskipped == MAX_SKIPPED)
		return;
	st.skipped[st.nskipped][0] = layer;
	st.skipped[st.nskipped++][1] = reason;
}

/* reported says whether layer was reported enforced. */
static int reported(struct text layer)
{
	for (size_t i = 0; i < st.nlayers; i++)
		if (st.layers[i].len == layer.len && memcmp(st.layers[i].p, layer.p, layer.len) == 0)
			return 1;
	return 0;
}

void report_layer(const struct wire_record *r) { add_layer(blob_text(r, 0)); }

void report_skipped(const struct wire_record *r) { add_skipped(blob_text(r, 0), blob_text(r, 1)); }

void report_unix_wall(const struct wire_record *r)
{
	if (reported(blob_text(r, 0)))
		st.unix_wall = blob_text(r, 1);
}

/* write_all writes one whole event; the host reads every event, so a
 * failure means it is gone and there is no one left to tell. */
static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static uint8_t event_buf[64 << 10];

static void send_event(struct wire_writer *w)
{
	size_t n = wire_end(w);
	if (n > 0)
		write_all(STATUS_FD, event_buf, n);
}

void report_event(uint16_t kind, const uint64_t *ints, unsigned nints)
{
	struct wire_writer w;
	wire_begin(&w, event_buf, sizeof event_buf);
	wire_add(&w, kind, ints, nints, NULL, 0);
	send_event(&w);
}

/* send_error reports a failed step: the init ends after it. */
static void send_error(struct text layer, struct text op, int err, int executor, uint64_t index, int refused,
		       const char *step_op, const char *path)
{
	struct wire_writer w;
	uint64_t ints[4] = {(uint64_t)err, (uint64_t)executor, index, refused != 0};
	struct wire_blob b[4] = {blob(layer), blob(op), blob(text(step_op ? step_op : "")), blob(text(path ? path : ""))};
	wire_begin(&w, event_buf, sizeof event_buf);
	wire_add(&w, EV_ERROR, ints, 4, b, 4);
	send_event(&w);
}

void report_error(const char *op, int err, int executor, const char *step_op, const char *path)
{
	send_error(text(""), text(op), err, executor, 0, 0, step_op, path);
}

void report_init_error(const char *op, int err, const char *detail, const char *path)
{
	send_error(text(""), text(op), err, EV_EXEC_INIT, 0, 0, detail, path);
}

void report_started(pid_t pid)
{
	struct wire_writer w;
	wire_begin(&w, event_buf, sizeof event_buf);
	uint64_t p = (uint64_t)pid;
	wire_add(&w, EV_STARTED, &p, 1, NULL, 0);
	for (size_t i = 0; i < st.nlayers; i++) {
		struct wire_blob b = blob(st.layers[i]);
		wire_add(&w, EV_LAYER, NULL, 0, &b, 1);
	}
	for (size_t i = 0; i < st.nskipped; i++) {
		struct wire_blob b[2] = {blob(st.skipped[i][0]), blob(st.skipped[i][1])};
		wire_add(&w, EV_SKIPPED, NULL, 0, b, 2);
	}
	for (size_t i = 0; i < st.nphases; i++) {
		uint64_t ints[2] = {(uint64_t)st.phases[i].start, (uint64_t)st.phases[i].ns};
		struct wire_blob b = blob(text(st.phases[i].name));
		wire_add(&w, EV_PHASE, ints, 2, &b, 1);
	}
	if (st.unix_wall.len > 0) {
		struct wire_blob b = blob(st.unix_wall);
		wire_add(&w, EV_UNIX_WALL, NULL, 0, &b, 1);
	}
	send_event(&w);
}

int report_step_failed(const struct wire_record *r, int executor, uint64_t index, int refused, int err,
		       const char *step_op, const char *path)
{
	struct text layer = blob_text(r, 0), op = blob_text(r, 1);
	if (r->ints[0] & INIT_DEGRADABLE) {
		/* The reason lives as long as the init, like the plan. */
		char *reason = NULL;
		if (asprintf(&reason, "%.*s: %s%s%s: %s", (int)op.len, op.p, step_op ? step_op : "",
			     path && *path ? " " : "", path ? path : "", strerror(err)) < 0)
			reason = NULL;
		add_skipped(layer, reason ? text(reason) : op);
		return 0;
	}
	send_error(layer, op, err, executor, index, refused, step_op, path);
	return -1;
}

void report_step_done(const struct wire_record *r)
{
	if (r->ints[0] & INIT_REPORT)
		add_layer(blob_text(r, 0));
}
