//go:build linux && cgo

package nsinit

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall -Wextra -Werror
// Every symbol bound once, when the zygote starts (BIND_NOW): with lazy
// binding each init, a fork of the zygote, bound again in ld.so every
// libc function the zygote had not called yet, faulting in ld.so's text,
// libc's symbol tables and a copy of the GOT, on every spawn.
#cgo LDFLAGS: -Wl,-z,now
#include <stdlib.h>
#include "wire.h"
#include "zygote.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// The pre-runtime stage (zygote.c) is C compiled into every binary that
// links this package: its constructor takes over a process started with
// its role's argv[0] before the Go runtime exists. The names below are its
// protocol, read from its headers so that Go and C cannot disagree.

// ZygoteArg0 is the argv[0] that makes the host binary the zygote.
const ZygoteArg0 = C.ZYGOTE_ARG0

// InitArg0 is the argv[0] that makes the host binary a sandbox init its
// parent started directly, in its namespaces with fds 0 to 4 in place.
const InitArg0 = C.INIT_ARG0

// The zygote's protocol (zygote.h): record kinds, flags and fd counts.
const (
	ZygoteFd      = C.ZYGOTE_FD
	ZygSpawn      = C.ZYG_SPAWN
	ZygKill       = C.ZYG_KILL
	ZygPrepare    = C.ZYG_PREPARE
	ZygStarted    = C.ZYG_STARTED
	ZygFailed     = C.ZYG_FAILED
	ZygExited     = C.ZYG_EXITED
	ZygIntoCgroup = C.ZYG_INTO_CGROUP
	ZygSpawnFds   = C.ZYG_SPAWN_FDS
	ZygMaxMessage = C.ZYG_MAX_MSG
)

// decodeWireC runs the stage's own decoder (wire_decode) on b: the tests
// hold it to DecodeWire, and the fuzzer to memory safety.
func decodeWireC(b []byte, capacity int) ([]Record, error) {
	if capacity < 1 {
		capacity = 1
	}
	// Exactly len(b) bytes, so that an -asan build catches a read past
	// the message (a zero-size allocation gets one byte, never read).
	buf := C.malloc(C.size_t(max(len(b), 1)))
	defer C.free(buf)
	copy(unsafe.Slice((*byte)(buf), len(b)), b)
	recs := (*C.struct_wire_record)(C.calloc(C.size_t(capacity), C.size_t(unsafe.Sizeof(C.struct_wire_record{}))))
	defer C.free(unsafe.Pointer(recs))
	var n C.size_t
	var why *C.char
	if C.wire_decode((*C.uint8_t)(buf), C.size_t(len(b)), recs, C.size_t(capacity), &n, &why) != 0 {
		return nil, errors.Join(ErrWire, errors.New(C.GoString(why)))
	}
	out := make([]Record, 0, int(n))
	for _, r := range unsafe.Slice(recs, int(n)) {
		rec := Record{Kind: uint16(r.kind)}
		for i := 0; i < int(r.nints); i++ {
			rec.Ints = append(rec.Ints, uint64(r.ints[i]))
		}
		for i := 0; i < int(r.nblobs); i++ {
			rec.Blobs = append(rec.Blobs, C.GoBytes(unsafe.Pointer(r.blobs[i].p), C.int(r.blobs[i].len)))
		}
		out = append(out, rec)
	}
	return out, nil
}
