//go:build linux && cgo

/*
 * The init's reports to the host (report.c): the events it writes on the
 * status pipe (init.h's EV_*), and what its started event lists, gathered
 * while the plan runs: the layers enforced, the layers skipped and why,
 * the phases' timings, how the unix wall is enforced. Which layer a step
 * belongs to and whether it may degrade come from the plan's records;
 * nothing here decides either.
 */
#ifndef HUTCH_REPORT_H
#define HUTCH_REPORT_H

#include <stdint.h>
#include <sys/types.h>

#include "wire.h"

/* report_begin starts the first phase (INIT_FIRST_PHASE) now: the init
 * calls it first thing. */
void report_begin(void);

/* report_phase ends a phase called name here (EV_PHASE); name lives as
 * long as the init. */
void report_phase(const char *name);

/* Plan records (init.h), which live as long as the init, as the started
 * event will list them: report_layer lists r's layer (blob 0) enforced;
 * report_skipped lists an INIT_SKIP's layer skipped for its reason (blobs
 * 0 and 1); report_unix_wall keeps how an INIT_UNIX_WALL's layer is
 * enforced (blob 1) when that layer (blob 0) was reported enforced by
 * now. */
void report_layer(const struct wire_record *r);
void report_skipped(const struct wire_record *r);
void report_unix_wall(const struct wire_record *r);

/* report_step_failed handles a failed plan step r (blobs: layer, op; ints:
 * INIT_* flags first): a degradable one is reported skipped ("op: what
 * failed") and the plan goes on (0); any other is reported as an EV_ERROR
 * and ends the init (-1). */
int report_step_failed(const struct wire_record *r, int executor, uint64_t index, int refused, int err,
		       const char *step_op, const char *path);

/* report_step_done lists plan step r's layer enforced if r asks for it
 * (INIT_REPORT). */
void report_step_done(const struct wire_record *r);

/* report_error reports a failed step (EV_ERROR, no index, not refused):
 * the init ends after it. report_init_error is a failed step of the
 * init's own (EV_EXEC_INIT). Both name the operation only: the host says
 * which layer it belongs to (nsinit's initOpLayers). */
void report_error(const char *op, int err, int executor, const char *step_op, const char *path);
void report_init_error(const char *op, int err, const char *detail, const char *path);

/* report_event sends an event of one record with ints and no blobs. */
void report_event(uint16_t kind, const uint64_t *ints, unsigned nints);

/* report_started sends EV_STARTED for the command pid, followed by
 * everything gathered. */
void report_started(pid_t pid);

#endif
