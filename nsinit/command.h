//go:build linux && cgo

/*
 * The sandbox's command (command.c): what the init does between the
 * command frame (init.h's CMD_EXEC) and the command's exec.
 */
#ifndef HUTCH_COMMAND_H
#define HUTCH_COMMAND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* command_start starts the command the CMD_EXEC message msg[0:len] names,
 * with stdio[0:3] as its stdin, stdout and stderr: it enters the
 * command's working directory, looks the command up in its PATH, and
 * forks and execs it; once the command's child exists, the init keeps no
 * copy of stdio. It returns the command's pid once its exec succeeded, or
 * -1 when the init must end (the error was reported). */
pid_t command_start(const uint8_t *msg, size_t len, const int *stdio);

#endif
