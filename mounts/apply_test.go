//go:build linux

package mounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Apply changes the calling process irreversibly, so each case runs in a
// re-executed test binary inside fresh user and mount namespaces; the
// child checks its view and reports what it found as JSON on stdout.

const childEnv = "HUTCH_MOUNTS_TEST_CHILD"

type childReport struct {
	ApplyErr    string `json:"apply_err"`
	RootWrite   string `json:"root_write"`   // errno of a write to /, "" if it worked
	WsWrite     string `json:"ws_write"`     // errno of a write into the writable bind
	MaskContent string `json:"mask_content"` // what reading the masked file gave
	SubmountRO  string `json:"submount_ro"`  // errno of a write under a host submount (/dev/shm)
	UsedSetattr bool   `json:"used_setattr"` // false when the remount fallback ran
	TmpWritable string `json:"tmp_writable"` // errno of a write to the private /tmp
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
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

func child() int {
	var plan Plan
	if err := json.Unmarshal([]byte(os.Getenv(childEnv+"_PLAN")), &plan); err != nil {
		fmt.Println(`{"apply_err":"bad plan"}`)
		return 0
	}
	noSetattr = os.Getenv(childEnv+"_FALLBACK") != ""
	ws := os.Getenv(childEnv + "_WS")
	var r childReport
	if err := Apply(plan); err != nil {
		r.ApplyErr = err.Error()
	} else {
		r.UsedSetattr = !noSetattr
		write := func(p string) string { return errnoString(os.WriteFile(p, []byte("x"), 0o644)) }
		r.RootWrite = write("/hutch-mounts-test")
		r.WsWrite = write(filepath.Join(ws, "w"))
		r.TmpWritable = write("/tmp/w")
		// The child holds every capability of its namespace, so the mode
		// 0000 does not stop it: what it reads must still not be the file.
		b, _ := os.ReadFile(filepath.Join(ws, "secret"))
		r.MaskContent = string(b)
		r.SubmountRO = write("/sys/fs/hutch-mounts-test")
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// TestApplyInNamespaces builds a view with and without mount_setattr (the
// remount fallback of kernels before 5.12) and checks the same verdicts.
func TestApplyInNamespaces(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, _ = filepath.EvalSymlinks(ws)
	// Should the view ever come out writable, leave the host clean.
	t.Cleanup(func() { os.Remove("/hutch-mounts-test") })
	plan := Build(Spec{Workspace: ws, Deny: []string{filepath.Join(ws, "secret")}, Home: "/tmp/home", HideDirs: []string{"/run"}})
	pj, _ := json.Marshal(plan)
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			cmd := exec.Command("/proc/self/exe", "-test.run", "^$")
			cmd.Env = append(os.Environ(), childEnv+"=1", childEnv+"_PLAN="+string(pj), childEnv+"_WS="+ws)
			if fallback {
				cmd.Env = append(cmd.Env, childEnv+"_FALLBACK=1")
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
				t.Fatalf("Apply: %s", r.ApplyErr)
			}
			if r.UsedSetattr == fallback {
				t.Errorf("used mount_setattr = %v with fallback = %v", r.UsedSetattr, fallback)
			}
			if r.RootWrite != unix.EROFS.Error() {
				t.Errorf("write to /: %q, want EROFS", r.RootWrite)
			}
			if r.SubmountRO != unix.EROFS.Error() {
				t.Errorf("write under a host submount (/sys): %q, want EROFS", r.SubmountRO)
			}
			if r.WsWrite != "" || r.TmpWritable != "" {
				t.Errorf("writes to the workspace (%q) or /tmp (%q) failed", r.WsWrite, r.TmpWritable)
			}
			if _, err := os.Stat(filepath.Join(ws, "w")); err != nil {
				t.Errorf("host: the workspace write did not arrive: %v", err)
			}
			os.Remove(filepath.Join(ws, "w"))
			if r.MaskContent == "s" {
				t.Errorf("the masked file's content was read")
			}
		})
	}
}
