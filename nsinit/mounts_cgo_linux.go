//go:build linux && cgo

package nsinit

/*
#include <stdlib.h>
#include "mounts.h"
*/
import "C"

import (
	"syscall"
	"unsafe"
)

// The filesystem view's executor (mounts.c): record kinds, step flags and
// mount attributes, read from mounts.h so that Go and C cannot disagree.
const (
	mntPrepare = C.MNT_PREPARE
	mntRoot    = C.MNT_ROOT
	mntBind    = C.MNT_BIND
	mntNewFS   = C.MNT_NEWFS
	mntMkdir   = C.MNT_MKDIR
	mntSymlink = C.MNT_SYMLINK
	mntMask    = C.MNT_MASK
	mntRebind  = C.MNT_REBIND
	mntEnter   = C.MNT_ENTER

	mntEmptyRoot = C.MNT_EMPTY_ROOT
	mntFile      = C.MNT_FILE
	mntMaxFile   = C.MNT_MAX_FILE

	mntOptional  = C.MNT_OPTIONAL
	mntIfExists  = C.MNT_IF_EXISTS
	mntCreate    = C.MNT_CREATE
	mntSrcRoot   = C.MNT_SRC_ROOT
	mntRecursive = C.MNT_RECURSIVE
	mntSeal      = C.MNT_SEAL
	mntDepends   = C.MNT_DEPENDS

	mntNoSetattr = C.MNT_NO_SETATTR

	attrRdonly = C.MNT_ATTR_RDONLY
	attrNosuid = C.MNT_ATTR_NOSUID
	attrNodev  = C.MNT_ATTR_NODEV
	attrNoexec = C.MNT_ATTR_NOEXEC

	mntMaxOptions = C.MNT_MAX_OPTIONS
)

// mountOutcome is what the executor reports: the failed record's index,
// operation, path and errno, or the reason a message was refused unrun.
type mountOutcome struct {
	failed   bool
	refused  bool
	index    int
	op, path string
	errno    syscall.Errno
	fellBack bool // attributes were set by remounting (no mount_setattr)
}

// runMountSteps has mounts.c check msg and, unless checkOnly, run it. Run,
// it changes the calling process's mount namespace and root for good.
func runMountSteps(msg []byte, checkOnly bool) mountOutcome {
	var res C.struct_mnt_result
	var p *C.uint8_t
	if len(msg) > 0 {
		p = (*C.uint8_t)(unsafe.Pointer(&msg[0]))
	}
	var rc C.int
	if checkOnly {
		rc = C.mnt_check(p, C.size_t(len(msg)), &res)
	} else {
		rc = C.mnt_apply(p, C.size_t(len(msg)), &res)
	}
	return mountOutcome{
		failed:   rc != 0,
		refused:  res.refused != 0,
		index:    int(res.index),
		op:       C.GoString(&res.op[0]),
		path:     C.GoString(&res.path[0]),
		errno:    syscall.Errno(res.err),
		fellBack: res.fell_back != 0,
	}
}
