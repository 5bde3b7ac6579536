//go:build linux

package spawn

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/nsinit"
)

// TestDirect starts real inits (init.c) with Direct, with the namespaces
// of a command, without a pid namespace, and with none (LevelLandlock's),
// and checks from the host's side: the init is this process's child, the
// binary re-exec'd as InitArg0 and taken over before the Go runtime
// started (one thread), holding capabilities in its user namespace
// whatever the uid; it survives Go's parent-death check (in a pid
// namespace of its own, a SIGKILL from itself); it holds fds 0 to 4,
// close-on-exec, and none of the fds this process left open across the
// exec (checked as root: the init makes itself not dumpable); it waits
// for its config, fails once the host closes the control socket and says
// so on its status pipe, and is reaped; another is ended by Signal.
func TestDirect(t *testing.T) {
	// Not close-on-exec: the exec passes it on, and the init must close it.
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	leak := p[0]
	leaked := fdTarget(os.Getpid(), leak)
	for _, tt := range []struct {
		name  string
		flags uintptr
	}{
		{"namespaces", unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP},
		{"no pid namespace", unix.CLONE_NEWUSER | unix.CLONE_NEWNS},
		{"none", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.flags&unix.CLONE_NEWUSER != 0 && !userNamespaces() {
				t.Skip("no user namespaces here")
			}
			in, hostCtl, status := direct(t, tt.flags)
			if ppid := parentOf(in.Pid); ppid != os.Getpid() {
				t.Errorf("init %d has parent %d, not this process %d", in.Pid, ppid, os.Getpid())
			}
			proc := "/proc/" + strconv.Itoa(in.Pid)
			// Polled: Go's fork is a vfork, which lets this process go on
			// once the exec has replaced the child's memory but before the
			// kernel has set out its arguments; cmdline reads empty then.
			var cmdline []byte
			var err error
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if cmdline, err = os.ReadFile(proc + "/cmdline"); err != nil || len(cmdline) > 0 {
					break
				}
			}
			if err != nil || string(cmdline) != InitArg0+"\x00" {
				t.Errorf("init's cmdline %q (%v), want %s", cmdline, err, InitArg0)
			}
			// Named by init_main's first steps: the stage ran.
			var comm []byte
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if comm, _ = os.ReadFile(proc + "/comm"); string(comm) == "hutch-init\n" {
					break
				}
			}
			if string(comm) != "hutch-init\n" {
				t.Fatalf("init's comm is %q, want hutch-init", comm)
			}
			// Alive after Go's own check, and waiting for its config.
			time.Sleep(20 * time.Millisecond)
			select {
			case <-in.Done():
				ws, _ := in.Wait()
				t.Fatalf("init ended before its config: %v", ws)
			default:
			}
			st, err := os.ReadFile(proc + "/status")
			if err != nil || !bytes.Contains(st, []byte("\nThreads:\t1\n")) {
				t.Errorf("init is not single-threaded (%v):\n%s", err, st)
			}
			// As a zygote's clone: every capability in its user
			// namespace, whatever the uid, none inheritable or ambient.
			if tt.flags&unix.CLONE_NEWUSER != 0 {
				for _, want := range []string{"CapInh:\t0000000000000000", "CapAmb:\t0000000000000000"} {
					if !bytes.Contains(st, []byte("\n"+want+"\n")) {
						t.Errorf("init's status lacks %q:\n%s", want, st)
					}
				}
				if bytes.Contains(st, []byte("\nCapEff:\t0000000000000000\n")) {
					t.Errorf("init holds no capability in its user namespace:\n%s", st)
				}
			}
			// The init is not dumpable: only root reads its fds.
			fds, err := os.ReadDir(proc + "/fd")
			if err != nil && !(os.IsPermission(err) && os.Getuid() != 0) {
				t.Fatal(err)
			}
			for _, e := range fds {
				fd, _ := strconv.Atoi(e.Name())
				if fd <= 4 && !cloexec(in.Pid, fd) {
					t.Errorf("init's fd %d is not close-on-exec", fd)
				}
				if target := fdTarget(in.Pid, fd); target == leaked {
					t.Errorf("init holds the host's fd %d as %d (%s)", leak, fd, target)
				}
			}

			hostCtl.Close()
			ev, err := nsinit.ReadEvent(status, nil)
			if err != nil || ev.Kind != nsinit.EventError || ev.Error == nil || ev.Error.Op != "read config" {
				t.Errorf("init's status pipe: %+v (%v), want its config error", ev, err)
			}
			ws, err := in.Wait()
			if err != nil || !ws.Exited() || ws.ExitStatus() != 1 {
				t.Errorf("Wait = %v, %v; want exit status 1", ws, err)
			}
			if err := in.Signal(unix.SIGKILL); err != nil {
				t.Errorf("Signal after the end: %v", err)
			}

			in, _, _ = direct(t, tt.flags)
			if err := in.Signal(unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case <-in.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("init not reaped 10 s after SIGKILL")
			}
			if ws, err := in.Wait(); err != nil || !ws.Signaled() || ws.Signal() != unix.SIGKILL {
				t.Errorf("Wait after SIGKILL = %v, %v", ws, err)
			}
		})
	}
}

// direct starts an init with Direct (see startWaiting), killed and
// reaped when the test ends.
func direct(t *testing.T, flags uintptr) (*Init, *os.File, *os.File) {
	t.Helper()
	in, control, status := startWaiting(t, Direct, flags, nil)
	t.Cleanup(func() {
		_ = in.Signal(unix.SIGKILL)
		_, _ = in.Wait()
		control.Close()
		status.Close()
	})
	return in, control, status
}

// fdTarget is what fd of process pid refers to, as /proc shows it.
func fdTarget(pid, fd int) string {
	s, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	return s
}

// cloexec reports whether fd of process pid is close-on-exec.
func cloexec(pid, fd int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_CLOEXEC != 0
		}
	}
	return false
}

// userNamespaces reports whether this process may make a user namespace.
func userNamespaces() bool {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
	if err != nil {
		return false
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
	return true
}
