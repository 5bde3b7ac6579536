//go:build linux && cgo

package nsinit

import (
	"fmt"
	"path"
	"strconv"

	"github.com/hutchbox/hutch/mounts"
)

// The filesystem view is decided here and performed by the stage's C
// executor (mounts.c): a mounts.Plan is expanded into primitive steps
// (mounts.h), one wire record each, which C runs in order without any
// policy of its own. What a sandbox's /dev and /proc hold is decided below.

// devNodes are bound from the host's /dev; a sandbox needs no other device.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the symlinks of a sandbox's /dev: name and content.
var devLinks = [][2]string{{"ptmx", "pts/ptmx"}, {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}}

// scratchDir is where the executor mounts its scratch tmpfs before the
// first pivot_root. Its host contents are not hidden for long: after the
// pivot the host tree (including the real /tmp) is reachable under
// /.oldroot until the view is entered.
const scratchDir = "/tmp"

// Attributes of the view's mounts.
const (
	attrsRW     = attrNosuid | attrNodev
	attrsRO     = attrRdonly | attrNosuid | attrNodev
	attrsSealed = attrRdonly | attrNosuid | attrNodev | attrNoexec
)

// mountStep is one record for the executor and the plan's Mount it comes
// from, which the step's errors name.
type mountStep struct {
	rec  Record
	from mounts.Mount
}

// fsOption is one fsconfig option of a new filesystem; a droppable one is
// left out when the filesystem is retried after a failure.
type fsOption struct {
	key, value string
	droppable  bool
}

// expander builds the steps of one plan.
type expander struct {
	steps []mountStep
	// layers are the plan's mounts expanded so far that change what a
	// path below them is (a filesystem of the plan's, a host tree): not
	// its masks, pins, rebinds, directories and links, which may number
	// a thousand in a plan and change nothing inOwn asks.
	layers []mounts.Mount
	cur    mounts.Mount
}

func (e *expander) add(kind uint16, ints []uint64, blobs ...string) {
	r := Record{Kind: kind, Ints: ints}
	for _, b := range blobs {
		r.Blobs = append(r.Blobs, []byte(b))
	}
	e.steps = append(e.steps, mountStep{rec: r, from: e.cur})
}

// newFS adds a new filesystem of fstype at target.
func (e *expander) newFS(flags, attrs uint64, target, fstype string, opts ...fsOption) {
	var droppable uint64
	blobs := []string{target, fstype}
	for i, o := range opts {
		blobs = append(blobs, o.key, o.value)
		if o.droppable {
			droppable |= 1 << i
		}
	}
	e.add(mntNewFS, []uint64{flags, attrs, droppable}, blobs...)
}

// inOwn says whether p lies strictly below one of the plan's own
// filesystems (a tmpfs, /dev, /proc, an empty root) and no host tree bound
// in it since: there a missing target may be created; in a host tree,
// read-only or the user's, it may not.
func (e *expander) inOwn(p string) bool {
	own := false
	for _, m := range e.layers {
		if mounts.Within(p, m.Target) {
			own = ownKind(m.Kind) && p != m.Target
		}
	}
	return own
}

// ownKind says whether a mount of kind k is a filesystem of the plan's
// own, where a missing target may be made.
func ownKind(k mounts.Kind) bool {
	switch k {
	case mounts.Tmpfs, mounts.EmptyRO, mounts.Dev, mounts.Proc, mounts.EmptyRoot:
		return true
	}
	return false
}

// expandPlan turns a plan into the executor's steps. prepareFlags go to
// the first step (mntNoSetattr forces the remount fallback).
func expandPlan(p mounts.Plan, prepareFlags uint64) ([]mountStep, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := &expander{cur: p.Mounts[0]}
	e.add(mntPrepare, []uint64{prepareFlags}, scratchDir)
	for _, m := range p.Mounts {
		e.cur = m
		if err := e.mount(m); err != nil {
			return nil, err
		}
		switch {
		case ownKind(m.Kind), m.Kind == mounts.HostRoot, m.Kind == mounts.BindRO, m.Kind == mounts.BindRW:
			e.layers = append(e.layers, m)
		}
	}
	e.cur = mounts.Mount{Kind: mounts.HostRoot, Target: "/"}
	e.add(mntEnter, nil)
	return e.steps, nil
}

// mount adds the steps of one Mount.
func (e *expander) mount(m mounts.Mount) error {
	var flags uint64
	if m.Optional {
		flags |= mntOptional
	}
	if e.inOwn(m.Target) {
		flags |= mntCreate
	}
	switch m.Kind {
	case mounts.HostRoot:
		// The host's whole tree, submounts included.
		e.add(mntRoot, []uint64{attrsRO}, "/")
	case mounts.EmptyRoot:
		// Sealed read-only at the end, as an EmptyRO is.
		e.add(mntEmptyRoot, []uint64{attrNosuid | attrNodev})
	case mounts.Symlink:
		e.add(mntSymlink, []uint64{0}, path.Dir(m.Target), path.Base(m.Target), m.Link)
	case mounts.BindRW:
		e.add(mntBind, []uint64{flags | mntRecursive, attrsRW}, m.Source, m.Target)
	case mounts.BindRO:
		e.add(mntBind, []uint64{flags | mntRecursive, attrsRO}, m.Source, m.Target)
	case mounts.ReadOnly:
		// A rebind changes a path that is there; creating a missing
		// one in the private /tmp would create it in the host tree
		// bound there (a directory named .git/commondir breaks the
		// repository).
		e.add(mntRebind, []uint64{flags&^mntCreate | mntRecursive, attrsRO}, m.Target)
	case mounts.Pin:
		e.add(mntRebind, []uint64{flags&^mntCreate | mntRecursive, 0}, m.Target)
	case mounts.Mask:
		e.add(mntMask, []uint64{flags, attrsSealed}, m.Target)
	case mounts.File:
		// The executor's bound and the plan's are one.
		if len(m.Content) > mntMaxFile || mounts.MaxFileContent != mntMaxFile {
			return fmt.Errorf("mounts: a file of %d bytes at %s, over the executor's %d", len(m.Content), m.Target, mntMaxFile)
		}
		e.add(mntFile, []uint64{flags, attrsSealed}, m.Target, m.Content)
	case mounts.Dir:
		e.add(mntMkdir, []uint64{0, uint64(m.Mode)}, m.Target)
	case mounts.Tmpfs:
		opts := []fsOption{{key: "mode", value: strconv.FormatUint(uint64(m.Mode), 8)}}
		if m.SizeBytes > 0 {
			opts = append(opts, fsOption{key: "size", value: strconv.FormatInt(m.SizeBytes, 10)})
		}
		e.newFS(flags, attrsRW, m.Target, "tmpfs", opts...)
	case mounts.EmptyRO:
		e.newFS(flags|mntSeal, attrNosuid|attrNodev|attrNoexec, m.Target, "tmpfs",
			fsOption{key: "mode", value: "755"}, fsOption{key: "size", value: "1m"})
	case mounts.Dev:
		e.dev(flags, m.Target)
	case mounts.Proc:
		e.proc(flags, m.Target)
	default:
		return fmt.Errorf("mounts: unknown kind %q", m.Kind)
	}
	return nil
}

// dev builds a minimal /dev at target: a small tmpfs, sealed read-only at
// the end, with the host's devNodes bound in, a private devpts, a shm and
// devLinks. Its steps are skipped with the tmpfs.
func (e *expander) dev(flags uint64, target string) {
	e.newFS(flags|mntSeal, attrNosuid|attrNoexec, target, "tmpfs",
		fsOption{key: "mode", value: "755"}, fsOption{key: "size", value: "64k"})
	for _, n := range devNodes {
		e.add(mntBind, []uint64{mntDepends | mntCreate | mntRecursive, attrNosuid | attrNoexec}, "/dev/"+n, target+"/"+n)
	}
	e.add(mntMkdir, []uint64{mntDepends, 0o755}, target+"/pts")
	e.add(mntMkdir, []uint64{mntDepends, 0o755}, target+"/shm")
	// Older kernels reject the valueless "newinstance" through
	// fsconfig's string form; devpts is then retried without it.
	e.newFS(mntDepends, attrNosuid|attrNoexec, target+"/pts", "devpts",
		fsOption{key: "newinstance", droppable: true}, fsOption{key: "ptmxmode", value: "0666"}, fsOption{key: "mode", value: "0620"})
	e.newFS(mntDepends, attrNosuid|attrNodev, target+"/shm", "tmpfs", fsOption{key: "mode", value: "1777"})
	for _, l := range devLinks {
		e.add(mntSymlink, []uint64{mntDepends}, target, l[0], l[1])
	}
}

// proc mounts a fresh procfs at target with ProcReadOnly made read-only
// and ProcMasked masked, those the kernel has.
func (e *expander) proc(flags uint64, target string) {
	e.newFS(flags, attrNosuid|attrNodev|attrNoexec, target, "proc")
	for _, p := range ProcReadOnly {
		e.add(mntRebind, []uint64{mntDepends | mntIfExists | mntRecursive, attrsSealed}, target+"/"+p)
	}
	for _, p := range ProcMasked {
		e.add(mntMask, []uint64{mntDepends | mntIfExists, attrsSealed}, target+"/"+p)
	}
}

// encodeSteps writes steps as one message for the executor.
func encodeSteps(steps []mountStep) ([]byte, error) {
	recs := make([]Record, len(steps))
	for i, s := range steps {
		recs[i] = s.rec
	}
	return EncodeWire(recs...)
}

// applyPlan builds plan's view with the executor and makes it the calling
// process's root, as the init's filesystem step does (the tests use it).
// It must run in a fresh mount namespace, which it owns from then on; on
// error the namespace is in an undefined state and the caller must not
// exec anything. It reports whether attributes were set by the remount
// fallback of kernels before 5.12.
func applyPlan(plan mounts.Plan, prepareFlags uint64) (fellBack bool, err error) {
	steps, err := expandPlan(plan, prepareFlags)
	if err != nil {
		return false, err
	}
	msg, err := encodeSteps(steps)
	if err != nil {
		return false, err
	}
	out := runMountSteps(msg, false)
	return out.fellBack, out.err(steps)
}

// err is the outcome as an error: a *mounts.Error naming the plan's step
// that failed, or ErrWire for a message the executor refused. The init's
// error events are read back through it too (ReadEvent).
func (o mountOutcome) err(steps []mountStep) error {
	switch {
	case !o.failed:
		return nil
	case o.refused:
		return fmt.Errorf("%w: mount step %d: %s", ErrWire, o.index, o.op)
	}
	from := mounts.Mount{Kind: mounts.HostRoot, Target: "/"}
	if o.index >= 0 && o.index < len(steps) {
		from = steps[o.index].from
	}
	return &mounts.Error{Step: from, Op: o.op, Path: o.path, Err: o.errno}
}
