//go:build linux && cgo

package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/mounts"
)

// stepString shows a record as its kind name, its strings and its ints.
func stepString(r Record) string {
	kinds := map[uint16]string{mntPrepare: "prepare", mntRoot: "root", mntBind: "bind", mntNewFS: "newfs",
		mntMkdir: "mkdir", mntSymlink: "symlink", mntMask: "mask", mntRebind: "rebind", mntEnter: "enter", mntEmptyRoot: "empty-root", mntFile: "file"}
	s := kinds[r.Kind]
	for _, b := range r.Blobs {
		s += " " + strconv.Quote(string(b))
	}
	for _, v := range r.Ints {
		s += fmt.Sprintf(" %#x", v)
	}
	return s
}

func rec(kind uint16, ints []uint64, blobs ...string) Record {
	r := Record{Kind: kind, Ints: ints}
	for _, b := range blobs {
		r.Blobs = append(r.Blobs, []byte(b))
	}
	return r
}

// TestExpandPlan: each kind of Mount becomes the primitive steps the
// executor runs, with the flags Go decides (optional, created inside the
// plan's own filesystems, recursive, sealed).
func TestExpandPlan(t *testing.T) {
	root := mounts.Mount{Kind: mounts.HostRoot, Source: "/", Target: "/"}
	head := []Record{rec(mntPrepare, []uint64{0}, "/tmp"), rec(mntRoot, []uint64{attrsRO}, "/")}
	tail := []Record{rec(mntEnter, nil)}
	tests := []struct {
		name string
		m    []mounts.Mount
		want []Record
	}{
		{"host root only", nil, nil},
		{"binds", []mounts.Mount{
			{Kind: mounts.BindRW, Source: "/w", Target: "/w"},
			{Kind: mounts.BindRO, Source: "/r", Target: "/x", Optional: true},
		}, []Record{
			rec(mntBind, []uint64{mntRecursive, attrsRW}, "/w", "/w"),
			rec(mntBind, []uint64{mntOptional | mntRecursive, attrsRO}, "/r", "/x"),
		}},
		{"own tmpfs creates what is mounted in it", []mounts.Mount{
			{Kind: mounts.Tmpfs, Target: "/tmp", Mode: 0o1777, SizeBytes: 1 << 20},
			{Kind: mounts.Dir, Target: "/tmp/h", Mode: 0o700},
			{Kind: mounts.BindRW, Source: "/w", Target: "/tmp/w"},
			{Kind: mounts.Mask, Target: "/tmp/m", Optional: true},
		}, []Record{
			rec(mntNewFS, []uint64{0, attrsRW, 0}, "/tmp", "tmpfs", "mode", "1777", "size", "1048576"),
			rec(mntMkdir, []uint64{0, 0o700}, "/tmp/h"),
			rec(mntBind, []uint64{mntCreate | mntRecursive, attrsRW}, "/w", "/tmp/w"),
			rec(mntMask, []uint64{mntOptional | mntCreate, attrsSealed}, "/tmp/m"),
		}},
		{"empty read-only, pin, read-only", []mounts.Mount{
			{Kind: mounts.EmptyRO, Target: "/run", Optional: true},
			{Kind: mounts.Pin, Target: "/w/a", Optional: true},
			{Kind: mounts.ReadOnly, Target: "/w/a/.git", Optional: true},
		}, []Record{
			rec(mntNewFS, []uint64{mntOptional | mntSeal, attrNosuid | attrNodev | attrNoexec, 0}, "/run", "tmpfs", "mode", "755", "size", "1m"),
			rec(mntRebind, []uint64{mntOptional | mntRecursive, 0}, "/w/a"),
			rec(mntRebind, []uint64{mntOptional | mntRecursive, attrsRO}, "/w/a/.git"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := expandPlan(mounts.Plan{Mounts: append([]mounts.Mount{root}, tt.m...)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]Record{}, head...), tt.want...), tail...)
			var got []Record
			for _, s := range steps {
				got = append(got, s.rec)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Errorf("steps:\n%s\nwant:\n%s", showSteps(got), showSteps(want))
			}
		})
	}
}

// TestExpandListed: an empty root's plan makes the root a sealed tmpfs,
// creates what it mounts in it (links, binds, /dev), but never in a host
// tree bound there (a mask below a listed tree is looked for, not made).
func TestExpandListed(t *testing.T) {
	plan := mounts.Plan{Mounts: []mounts.Mount{
		{Kind: mounts.EmptyRoot, Target: "/"},
		{Kind: mounts.Symlink, Target: "/bin", Link: "usr/bin"},
		{Kind: mounts.BindRO, Source: "/usr", Target: "/usr", Optional: true},
		{Kind: mounts.BindRW, Source: "/w", Target: "/home/u/w"},
		{Kind: mounts.Mask, Target: "/usr/secret", Optional: true},
		{Kind: mounts.Mask, Target: "/home/u/w/.env", Optional: true},
	}}
	steps, err := expandPlan(plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		rec(mntPrepare, []uint64{0}, "/tmp"),
		rec(mntEmptyRoot, []uint64{attrNosuid | attrNodev}),
		rec(mntSymlink, []uint64{0}, "/", "bin", "usr/bin"),
		rec(mntBind, []uint64{mntOptional | mntCreate | mntRecursive, attrsRO}, "/usr", "/usr"),
		rec(mntBind, []uint64{mntCreate | mntRecursive, attrsRW}, "/w", "/home/u/w"),
		rec(mntMask, []uint64{mntOptional, attrsSealed}, "/usr/secret"),
		rec(mntMask, []uint64{mntOptional, attrsSealed}, "/home/u/w/.env"),
		rec(mntEnter, nil),
	}
	var got []Record
	for _, s := range steps {
		got = append(got, s.rec)
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Errorf("steps:\n%s\nwant:\n%s", showSteps(got), showSteps(want))
	}
}

func showSteps(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString("\t" + stepString(r) + "\n")
	}
	return b.String()
}

// TestExpandDevProc: /dev and /proc are whole lists of steps, all decided
// here, that depend on their filesystem (skipped with it).
func TestExpandDevProc(t *testing.T) {
	plan := mounts.Build(mounts.Spec{Workspace: "/w"})
	steps, err := expandPlan(plan, mntNoSetattr)
	if err != nil {
		t.Fatal(err)
	}
	if f := steps[0].rec.Int(0); f != mntNoSetattr {
		t.Errorf("prepare flags %#x, want the fallback flag", f)
	}
	var dev, proc []string
	for _, s := range steps {
		switch s.from.Kind {
		case mounts.Dev:
			dev = append(dev, stepString(s.rec))
		case mounts.Proc:
			proc = append(proc, stepString(s.rec))
		default:
			continue
		}
		if s.rec.Int(0)&mntDepends == 0 && s.rec.Kind != mntNewFS {
			t.Errorf("%s does not depend on its filesystem", stepString(s.rec))
		}
	}
	has := func(list []string, want string) {
		t.Helper()
		for _, s := range list {
			if s == want {
				return
			}
		}
		t.Errorf("no step %s in\n%s", want, strings.Join(list, "\n"))
	}
	has(dev, stepString(rec(mntNewFS, []uint64{mntSeal, attrNosuid | attrNoexec, 0}, "/dev", "tmpfs", "mode", "755", "size", "64k")))
	for _, n := range devNodes {
		has(dev, stepString(rec(mntBind, []uint64{mntDepends | mntCreate | mntRecursive, attrNosuid | attrNoexec}, "/dev/"+n, "/dev/"+n)))
	}
	has(dev, stepString(rec(mntMkdir, []uint64{mntDepends, 0o755}, "/dev/pts")))
	has(dev, stepString(rec(mntNewFS, []uint64{mntDepends, attrNosuid | attrNoexec, 1}, "/dev/pts", "devpts", "newinstance", "", "ptmxmode", "0666", "mode", "0620")))
	has(dev, stepString(rec(mntSymlink, []uint64{mntDepends}, "/dev", "ptmx", "pts/ptmx")))
	has(proc, stepString(rec(mntRebind, []uint64{mntDepends | mntIfExists | mntRecursive, attrsSealed}, "/proc/sys")))
	has(proc, stepString(rec(mntMask, []uint64{mntDepends | mntIfExists, attrsSealed}, "/proc/kcore")))
	if len(dev) != 1+len(devNodes)+2+2+len(devLinks) || len(proc) != 1+len(ProcReadOnly)+len(ProcMasked) {
		t.Errorf("%d /dev steps and %d /proc steps", len(dev), len(proc))
	}
	msg, err := encodeSteps(steps)
	if err != nil {
		t.Fatal(err)
	}
	if out := runMountSteps(msg, true); out.failed {
		t.Errorf("the executor refuses Build's plan: %+v", out)
	}
}

func TestExpandPlanRefused(t *testing.T) {
	for _, p := range []mounts.Plan{
		{},
		{Mounts: []mounts.Mount{{Kind: mounts.Tmpfs, Target: "/tmp"}}},
		{Mounts: []mounts.Mount{{Kind: mounts.HostRoot, Target: "/"}, {Kind: mounts.HostRoot, Target: "/"}}},
		{Mounts: []mounts.Mount{{Kind: mounts.HostRoot, Target: "/"}, {Kind: "bogus", Target: "/x"}}},
		{Mounts: []mounts.Mount{{Kind: mounts.HostRoot, Target: "/"}, {Kind: mounts.EmptyRoot, Target: "/"}}},
	} {
		if _, err := expandPlan(p, 0); err == nil {
			t.Errorf("expandPlan(%v) = nil error", p)
		}
	}
}

// TestMountStepsMalformed: the executor refuses, before running anything,
// a message whose records do not have their kind's shape.
func TestMountStepsMalformed(t *testing.T) {
	prep := rec(mntPrepare, []uint64{0}, "/tmp")
	root := rec(mntRoot, []uint64{attrsRO}, "/")
	enter := rec(mntEnter, nil)
	mk := func(mid ...Record) []Record { return append(append([]Record{prep, root}, mid...), enter) }
	tests := []struct {
		name string
		recs []Record
		why  string
	}{
		{"valid", mk(rec(mntMkdir, []uint64{0, 0o755}, "/a")), ""},
		{"too few records", []Record{prep, enter}, "fewer than three"},
		{"no prepare first", []Record{root, prep, enter}, "out of order"},
		{"nothing after enter", append(mk(), rec(mntMkdir, []uint64{0, 0o755}, "/a")), "out of order"},
		{"unknown kind", mk(rec(99, []uint64{0, 0}, "/a")), "unknown kind"},
		{"kind zero", mk(rec(0, nil)), "unknown kind"},
		{"too few ints", mk(rec(mntBind, []uint64{0}, "/a", "/b")), "wrong number of ints"},
		{"too many ints", mk(rec(mntMask, []uint64{0, 0, 0}, "/a")), "wrong number of ints"},
		{"too few blobs", mk(rec(mntBind, []uint64{0, 0}, "/a")), "wrong number of blobs"},
		{"odd fs options", mk(rec(mntNewFS, []uint64{0, 0, 0}, "/a", "tmpfs", "mode")), "wrong number of blobs"},
		{"too many fs options", mk(rec(mntNewFS, []uint64{0, 0, 0}, "/a", "tmpfs", "a", "", "b", "", "c", "", "d", "")), "too many fields"},
		{"interior NUL", mk(rec(mntMask, []uint64{0, 0}, "/a\x00/etc")), "holds a NUL"},
		{"NUL in a name", mk(rec(mntSymlink, []uint64{0}, "/dev", "fd\x00", "x")), "holds a NUL"},
		{"relative path", mk(rec(mntRebind, []uint64{0, 0}, "a/b")), "absolute and clean"},
		{"dot-dot", mk(rec(mntRebind, []uint64{0, 0}, "/a/../b")), "absolute and clean"},
		{"trailing slash", mk(rec(mntRebind, []uint64{0, 0}, "/a/")), "absolute and clean"},
		{"unknown flag", mk(rec(mntMask, []uint64{1 << 20, 0}, "/a")), "unknown flags"},
		{"unknown attribute", mk(rec(mntMask, []uint64{0, 1 << 20}, "/a")), "unknown attributes"},
		{"bad mode", mk(rec(mntMkdir, []uint64{0, 0o10000}, "/a")), "bad mode"},
		{"link name with a slash", mk(rec(mntSymlink, []uint64{0}, "/dev", "a/b", "x")), "bad link name"},
		{"droppable option missing", mk(rec(mntNewFS, []uint64{0, 0, 2}, "/a", "tmpfs", "mode", "1")), "droppable"},
		{"no fstype", mk(rec(mntNewFS, []uint64{0, 0, 0}, "/a", "")), "no filesystem type"},
		{"empty root", []Record{prep, rec(mntEmptyRoot, []uint64{attrNosuid}), enter}, ""},
		{"empty root with a source", []Record{prep, rec(mntEmptyRoot, []uint64{0}, "/"), enter}, "wrong number of blobs"},
		{"empty root with an unknown attribute", []Record{prep, rec(mntEmptyRoot, []uint64{1 << 20}), enter}, "unknown attributes"},
		{"empty root as a step", mk(rec(mntEmptyRoot, []uint64{0})), "out of order"},
		{"two roots", []Record{prep, root, rec(mntEmptyRoot, []uint64{0}), enter}, "out of order"},
		{"file", mk(rec(mntFile, []uint64{0, attrRdonly}, "/etc/hosts", "127.0.1.1 hutch\n")), ""},
		{"empty file", mk(rec(mntFile, []uint64{0, attrRdonly}, "/etc/hosts", "")), ""},
		{"file over /", mk(rec(mntFile, []uint64{0, 0}, "/", "x")), "a file over /"},
		{"file too big", mk(rec(mntFile, []uint64{0, 0}, "/etc/hosts", strings.Repeat("x", mntMaxFile+1))), "over MNT_MAX_FILE"},
		{"file holding a NUL", mk(rec(mntFile, []uint64{0, 0}, "/etc/hosts", "a\x00b")), "holds a NUL"},
		{"file without content", mk(rec(mntFile, []uint64{0, 0}, "/etc/hosts")), "wrong number of blobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msg []byte
			if tt.why == "too many fields" {
				// EncodeWire itself refuses 10 blobs; write the header by hand.
				msg = tooManyBlobs(t)
			} else {
				var err error
				if msg, err = EncodeWire(tt.recs...); err != nil {
					t.Fatal(err)
				}
			}
			out := runMountSteps(msg, true)
			if tt.why == "" {
				if out.failed {
					t.Fatalf("refused: %+v", out)
				}
				return
			}
			if !out.failed || !out.refused || !strings.Contains(out.op, tt.why) {
				t.Fatalf("outcome %+v, want refused for %q", out, tt.why)
			}
			if err := out.err(nil); !errors.Is(err, ErrWire) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %v, want ErrWire and %q", err, tt.why)
			}
		})
	}
	if out := runMountSteps([]byte("HTCH"), true); !out.refused {
		t.Errorf("a truncated message: %+v", out)
	}
}

// tooManyBlobs is a message whose one record claims 9 blobs.
func tooManyBlobs(t *testing.T) []byte {
	msg, err := EncodeWire(rec(mntNewFS, []uint64{0, 0, 0}, "/a", "tmpfs"))
	if err != nil {
		t.Fatal(err)
	}
	msg[wireHeader+3] = wireMaxBlobs + 1
	return msg
}

// Applying a plan changes the calling process for good, so each case runs
// in a re-executed test binary inside fresh user, mount and pid
// namespaces; the child checks its view and reports it as JSON on stdout.

const mountsChildEnv = "HUTCH_MOUNTS_TEST_CHILD"

type childReport struct {
	ApplyErr    string            `json:"apply_err"`
	FellBack    bool              `json:"fell_back"`
	Errnos      map[string]string `json:"errnos"` // check -> errno, "" for success
	MaskContent string            `json:"mask_content"`
	DevFd       string            `json:"dev_fd"`
	ProcSysRO   bool              `json:"proc_sys_ro"`
	KcoreMode   uint32            `json:"kcore_mode"`
	RunEntries  int               `json:"run_entries"`
	HomeMode    uint32            `json:"home_mode"`
	// FileContent and FileMode are the view's /etc/hosts (a File step).
	FileContent string `json:"file_content"`
	FileMode    uint32 `json:"file_mode"`
}

func errnoString(err error) string {
	if err == nil {
		return ""
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

func mountsChild() int {
	var plan mounts.Plan
	if err := json.Unmarshal([]byte(os.Getenv(mountsChildEnv+"_PLAN")), &plan); err != nil {
		fmt.Println(`{"apply_err":"bad plan"}`)
		return 0
	}
	var flags uint64
	if os.Getenv(mountsChildEnv+"_FALLBACK") != "" {
		flags = mntNoSetattr
	}
	ws := os.Getenv(mountsChildEnv + "_WS")
	r := childReport{Errnos: map[string]string{}}
	fellBack, err := applyPlan(plan, flags)
	r.FellBack = fellBack
	if err != nil {
		r.ApplyErr = err.Error()
	} else {
		write := func(p string) string { return errnoString(os.WriteFile(p, []byte("x"), 0o644)) }
		r.Errnos["root"] = write("/hutch-mounts-test")
		r.Errnos["workspace"] = write(filepath.Join(ws, "w"))
		r.Errnos["tmp"] = write("/tmp/w")
		r.Errnos["submount"] = write("/sys/fs/hutch-mounts-test")
		r.Errnos["read-only"] = write(filepath.Join(ws, "ro", "w"))
		r.Errnos["dev-null"] = write("/dev/null")
		r.Errnos["dev-shm"] = write("/dev/shm/w")
		r.Errnos["dev"] = write("/dev/w")
		r.Errnos["pin"] = errnoString(os.Rename(filepath.Join(ws, "pinned"), filepath.Join(ws, "moved")))
		// The child holds every capability of its namespace, so the mode
		// 0000 does not stop it: what it reads must still not be the file.
		b, _ := os.ReadFile(filepath.Join(ws, "secret"))
		r.MaskContent = string(b)
		r.DevFd, _ = os.Readlink("/dev/fd")
		var sfs unix.Statfs_t
		r.ProcSysRO = unix.Statfs("/proc/sys", &sfs) == nil && sfs.Flags&unix.ST_RDONLY != 0
		var st unix.Stat_t
		if unix.Stat("/proc/kcore", &st) == nil {
			r.KcoreMode = st.Mode & 0o7777
		}
		ents, _ := os.ReadDir("/run")
		r.RunEntries = len(ents)
		if unix.Stat("/tmp/home", &st) == nil {
			r.HomeMode = st.Mode & 0o7777
		}
		b, _ = os.ReadFile("/etc/hosts")
		r.FileContent = string(b)
		if unix.Stat("/etc/hosts", &st) == nil {
			r.FileMode = st.Mode & 0o7777
		}
		r.Errnos["file"] = write("/etc/hosts")
		for _, p := range filepath.SplitList(os.Getenv(mountsChildEnv + "_STAT")) {
			r.Errnos["stat "+p] = errnoString(unix.Stat(p, &st))
		}
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// TestApplyInNamespaces builds a view with and without mount_setattr (the
// remount fallback of kernels before 5.12, forced) and checks the same
// verdicts. Its plan has every primitive step of the executor.
func TestApplyInNamespaces(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ro", "pinned"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws, _ = filepath.EvalSymlinks(ws)
	// Should the view ever come out writable, leave the host clean.
	t.Cleanup(func() { os.Remove("/hutch-mounts-test") })
	hosts := "127.0.0.1 localhost\n127.0.1.1 hutch\n"
	plan := mounts.Build(mounts.Spec{
		Workspace: ws, Deny: []string{filepath.Join(ws, "secret")}, ReadOnly: []string{filepath.Join(ws, "ro")},
		Pins: []string{filepath.Join(ws, "pinned")}, Home: "/tmp/home", HideDirs: []string{"/run"},
		Files: []mounts.FileContent{{Path: "/etc/hosts", Content: hosts}},
	})
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			r := applyInChild(t, plan, ws, fallback)
			if r.FellBack != fallback {
				t.Errorf("remount fallback used = %v with fallback forced = %v", r.FellBack, fallback)
			}
			want := map[string]string{
				"root": unix.EROFS.Error(), "submount": unix.EROFS.Error(), "read-only": unix.EROFS.Error(),
				"dev": unix.EROFS.Error(), "pin": unix.EBUSY.Error(), "file": unix.EROFS.Error(),
				"workspace": "", "tmp": "", "dev-null": "", "dev-shm": "",
			}
			r.check(t, ws, want)
			if r.FileContent != hosts || r.FileMode != 0o444 {
				t.Errorf("/etc/hosts: %q, mode %o; want %q, 0444", r.FileContent, r.FileMode, hosts)
			}
			if r.DevFd != "/proc/self/fd" || !r.ProcSysRO || r.KcoreMode != 0 || r.RunEntries != 0 || r.HomeMode != 0o700 {
				t.Errorf("/dev/fd -> %q, /proc/sys read-only %v, /proc/kcore mode %o, %d entries in /run, /tmp/home mode %o",
					r.DevFd, r.ProcSysRO, r.KcoreMode, r.RunEntries, r.HomeMode)
			}
		})
	}
}

// applyInChild applies plan in a child in fresh user, mount and pid
// namespaces (with the remount fallback if fallback) and returns what the
// child found, statting stat too; it skips where namespaces cannot be made.
func applyInChild(t *testing.T, plan mounts.Plan, ws string, fallback bool, stat ...string) childReport {
	t.Helper()
	pj, _ := json.Marshal(plan)
	cmd := exec.Command("/proc/self/exe", "-test.run", "^$")
	cmd.Env = append(os.Environ(), mountsChildEnv+"=1", mountsChildEnv+"_PLAN="+string(pj), mountsChildEnv+"_WS="+ws,
		mountsChildEnv+"_STAT="+strings.Join(stat, string(filepath.ListSeparator)))
	if fallback {
		cmd.Env = append(cmd.Env, mountsChildEnv+"_FALLBACK=1")
	}
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	}
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("cannot create namespaces here: %v", err)
	}
	var r childReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if r.ApplyErr != "" {
		t.Fatalf("apply: %s", r.ApplyErr)
	}
	return r
}

// TestApplyListed builds a listed view (an empty root holding a link and
// two host trees) with and without mount_setattr: the listed trees and the
// link are there, read-only; nothing else of the host is, not even as an
// empty directory; the root itself is read-only; the workspace, /tmp and
// the masks work as in the host's view.
func TestApplyListed(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, _ = filepath.EvalSymlinks(ws)
	t.Cleanup(func() { os.Remove("/hutch-mounts-test") })
	plan := mounts.Build(mounts.Spec{
		Workspace: ws, Deny: []string{filepath.Join(ws, "secret"), "/root/.ssh", "/etc/hutch-no-such"},
		Home: "/tmp/home", HideDirs: []string{"/run"},
		Listed: &mounts.Listed{Trees: []string{"/usr", "/etc"}, Links: []mounts.Link{{Path: "/hutch-link", Target: "usr/bin"}}},
	})
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			r := applyInChild(t, plan, ws, fallback,
				"/usr/bin/env", "/hutch-link/env", "/etc/passwd", "/root", "/var", "/home", "/run", "/root/.ssh")
			want := map[string]string{
				"root": unix.EROFS.Error(), "workspace": "", "tmp": "", "dev-null": "", "dev": unix.EROFS.Error(),
				"stat /usr/bin/env": "", "stat /hutch-link/env": "", "stat /etc/passwd": "",
				"stat /root": unix.ENOENT.Error(), "stat /var": unix.ENOENT.Error(), "stat /home": unix.ENOENT.Error(),
				"stat /run": unix.ENOENT.Error(), "stat /root/.ssh": unix.ENOENT.Error(),
			}
			r.check(t, ws, want)
			if r.DevFd != "/proc/self/fd" || r.HomeMode != 0o700 {
				t.Errorf("/dev/fd -> %q, /tmp/home mode %o", r.DevFd, r.HomeMode)
			}
		})
	}
}

// check compares the child's verdicts with want, checks on the host that
// its workspace write arrived (and removes it) and that the masked file's
// content was not read.
func (r childReport) check(t *testing.T, ws string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if r.Errnos[k] != v {
			t.Errorf("%s: %q, want %q", k, r.Errnos[k], v)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "w")); err != nil {
		t.Errorf("host: the workspace write did not arrive: %v", err)
	}
	os.Remove(filepath.Join(ws, "w"))
	if r.MaskContent == "s" {
		t.Errorf("the masked file's content was read")
	}
}
