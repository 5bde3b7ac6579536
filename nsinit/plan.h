//go:build linux && cgo

/*
 * The init's plan (plan.c): the config message Go wrote (EncodeConfig),
 * whose records (init.h's INIT_*) the init runs in order. init_check,
 * the same check without running anything, is declared in init.h for Go.
 */
#ifndef HUTCH_PLAN_H
#define HUTCH_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "confine.h"

/* plan_run checks the config message msg[0:len] whole, keeps it as the
 * init's plan (msg must live as long as the init: events name layers by
 * pointers into it), ends the "config" phase, and runs its records in
 * order. It returns 0 when the sandbox is built, -1 when the init must
 * end (the error was reported). */
int plan_run(const uint8_t *msg, size_t len);

/* plan_child_rlimits lowers the plan's INIT_CHILD_RLIMITs on the calling
 * process, in order: the command's child calls it just before its exec,
 * so that the command and everything it forks hold them from its first
 * instruction. System calls only (the child borrows the init's memory).
 * It returns 0, or -1 with errno set at the first that failed. */
int plan_child_rlimits(void);

/* plan_ingress_fd is the handoff socket the host asks for ingress sockets
 * on (INIT_INGRESS), or -1 without one. */
int plan_ingress_fd(void);

/* plan_ingress_serve answers the host's pending requests on the ingress
 * socket, each with a new TCP socket of this network namespace, not
 * connected: the host connects it to the published port. It returns 0,
 * or -1 once the host is gone (the socket is then no longer read). */
int plan_ingress_serve(void);

#endif
