//go:build linux && cgo

/*
 * The sandbox's end (reap.c): when its command has ended, or the init
 * must end with the command started, nothing of the sandbox outlives the
 * init.
 */
#ifndef HUTCH_REAP_H
#define HUTCH_REAP_H

/* reap_sandbox kills every other process of the sandbox and reaps them
 * all: when it returns, nothing but the init is alive. */
void reap_sandbox(void);

#endif
