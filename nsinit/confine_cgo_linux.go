//go:build linux && cgo

package nsinit

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall -Wextra -Werror
#include <stdlib.h>
#include "confine.h"
*/
import "C"

import "syscall"

// The init's identity and confinement steps are C (identity.c,
// confine.c), run from wire records whose kinds are these (confine.h).
// Go decides every value; the C only executes.
const (
	stepKeyring     = C.STEP_KEYRING
	stepHostname    = C.STEP_HOSTNAME
	stepLoopback    = C.STEP_LOOPBACK
	stepUserCount   = C.STEP_USER_COUNT
	stepRlimit      = C.STEP_RLIMIT
	stepCgroupJoin  = C.STEP_CGROUP_JOIN
	stepCaps        = C.STEP_CAPS
	stepLLRuleset   = C.STEP_LL_RULESET
	stepLLPath      = C.STEP_LL_PATH
	stepLLPort      = C.STEP_LL_PORT
	stepLLRestrict  = C.STEP_LL_RESTRICT
	stepLLRulesetFd = C.STEP_LL_RULESET_FD
	stepSeccomp     = C.STEP_SECCOMP
	stepCapsNoPcap  = C.STEP_CAPS_NO_SETPCAP
	stepCapsAll     = C.STEP_CAPS_ALL
	stepMaxRecords  = C.STEP_MAX_RECORDS
)

// StepError is a C step that failed: the operation, the path it was
// about if any, and the errno, which it wraps.
type StepError struct {
	Op, Path string
	Errno    syscall.Errno
}

// Error implements error.
func (e *StepError) Error() string {
	if e.Path != "" {
		return e.Op + " " + e.Path + ": " + e.Errno.Error()
	}
	return e.Op + ": " + e.Errno.Error()
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *StepError) Unwrap() error { return e.Errno }

// runSteps has the C execute recs, in order, on the calling thread, as
// the init's INIT_STEPS records do (the tests use it). The thread must be
// locked to its goroutine for the per-thread steps (capabilities,
// no_new_privs, Landlock, seccomp) to mean anything. A malformed message
// is refused whole, before anything is applied. listener is the fd of a
// seccomp filter loaded with a listener, or -1.
func runSteps(recs ...Record) (listener int, err error) {
	msg, err := EncodeWire(recs...)
	if err != nil {
		return -1, err
	}
	return runStepMessage(msg)
}

// runStepMessage runs an encoded message; tests give it malformed ones.
func runStepMessage(msg []byte) (int, error) {
	buf := C.CBytes(msg)
	defer C.free(buf)
	var e C.struct_step_err
	var fd C.int
	if C.step_run((*C.uint8_t)(buf), C.size_t(len(msg)), &e, &fd) != 0 {
		return -1, &StepError{
			Op:    C.GoString(&e.op[0]),
			Path:  C.GoString(&e.path[0]),
			Errno: syscall.Errno(e.err),
		}
	}
	return int(fd), nil
}
