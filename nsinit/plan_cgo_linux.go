//go:build linux && cgo

package nsinit

/*
#include <stdlib.h>
#include "init.h"
*/
import "C"

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// Forwarded are the signals the init passes on to the command's process
// group when it receives them (the host's way of signalling a command it
// cannot name by pid); others would reach the init itself. The list is
// init.c's.
var Forwarded = func() []os.Signal {
	var sigs []os.Signal
	for _, s := range C.init_forwarded {
		sigs = append(sigs, syscall.Signal(s))
	}
	return sigs
}()

// checkPlanC runs the init's own check of a config message (init_check):
// the fuzzer holds it to memory safety.
func checkPlanC(b []byte) error {
	return checkC(b, func(p *C.uint8_t, n C.size_t, why **C.char) C.int { return C.init_check(p, n, why) })
}

// checkC runs a stage's check of a message (0, or -1 and why) on a copy
// of exactly len(b) bytes, so that an -asan build catches a read past the
// message.
func checkC(b []byte, check func(*C.uint8_t, C.size_t, **C.char) C.int) error {
	buf := C.malloc(C.size_t(max(len(b), 1)))
	defer C.free(buf)
	copy(unsafe.Slice((*byte)(buf), len(b)), b)
	var why *C.char
	if check((*C.uint8_t)(buf), C.size_t(len(b)), &why) != 0 {
		return errors.Join(ErrWire, errors.New(C.GoString(why)))
	}
	return nil
}

// The sandbox init (init.c) runs the plan EncodeConfig writes and reports
// events ReadEvent reads; these are the names of that protocol, read from
// init.h so that Go and C cannot disagree.
const (
	initFdBase   = C.INIT_FD_BASE
	initMaxFds   = C.INIT_MAX_FDS
	initMaxFrame = C.INIT_MAX_FRAME

	initLayer       = C.INIT_LAYER
	initSkip        = C.INIT_SKIP
	initPhase       = C.INIT_PHASE
	initSteps       = C.INIT_STEPS
	initMounts      = C.INIT_MOUNTS
	initEgress      = C.INIT_EGRESS
	initWallRoot    = C.INIT_WALL_ROOT
	initWall        = C.INIT_WALL
	initSubreaper   = C.INIT_SUBREAPER
	initChildRlimit = C.INIT_CHILD_RLIMIT
	initUnixWall    = C.INIT_UNIX_WALL
	initIngress     = C.INIT_INGRESS

	initDegradable = C.INIT_DEGRADABLE
	initReport     = C.INIT_REPORT

	cmdExec = C.CMD_EXEC

	evReady    = C.EV_READY
	evStarted  = C.EV_STARTED
	evLayer    = C.EV_LAYER
	evSkipped  = C.EV_SKIPPED
	evPhase    = C.EV_PHASE
	evUnixWall = C.EV_UNIX_WALL
	evExited   = C.EV_EXITED
	evError    = C.EV_ERROR

	evExecInit   = C.EV_EXEC_INIT
	evExecSteps  = C.EV_EXEC_STEPS
	evExecMounts = C.EV_EXEC_MOUNTS
)

// FirstPhase names the init's first phase: its Start is the init's first
// instruction, and it has no duration. The host makes it "spawn", from its
// spawn request to that start.
const FirstPhase = C.INIT_FIRST_PHASE

// The handoff socket (the config frame's last fd when the sandbox has an
// egress or a unix wall) is a SOCK_SEQPACKET socket on which the init
// hands the host, once each, the sandbox-side ends of what the host serves
// for the sandbox: one wire record per message, with its fds.
const (
	// HandoffEgress carries the egress listener (fd).
	HandoffEgress = C.HANDOFF_EGRESS
	// HandoffWallRoot carries one tree of the sandbox's view in which the
	// unix wall lets sockets be reached: its path there (blob) and an
	// O_PATH fd of it. All come before HandoffWall.
	HandoffWallRoot = C.HANDOFF_WALL_ROOT
	// HandoffWall carries the unix wall's seccomp notification listener
	// (fd): from then on the host answers the command's connect(2) calls.
	HandoffWall = C.HANDOFF_WALL
	// HandoffIngress carries a fresh TCP socket of the sandbox's network
	// namespace (fd), the init's answer to each message the host sends
	// on the handoff socket while the command runs (Config.Ingress); no
	// fd when the init could not make one.
	HandoffIngress = C.HANDOFF_INGRESS
)
