//go:build linux && cgo

package nsinit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
)

// confineChildEnv carries a confineChild job to the re-executed test
// binary.
const confineChildEnv = "HUTCH_CONFINE_TEST_CHILD"

// confineChild is what the re-executed test binary does: apply C steps to
// its main thread in this order, then exec sleep, whose /proc entries the
// test reads. The child reports nothing the test believes.
type confineChild struct {
	// Lower are set first with setrlimit, as the host's limits.
	Lower    []cgroups.Rlimit
	Rlimits  []cgroups.Rlimit
	Keyring  bool
	Hostname string
	Loopback bool
	// Caps is "all", "no-setpcap" or empty (no capability step).
	Caps     string
	Filters  [][]byte
	Listener []byte // loaded last; its fd is passed to sleep as fd 3
}

func runConfineChild(job string) int {
	runtime.LockOSThread() // never unlocked: the steps are this thread's
	var c confineChild
	if err := json.Unmarshal([]byte(job), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, r := range c.Lower {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Soft, Max: r.Hard}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	step := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	if len(c.Rlimits) > 0 {
		step(run(rlimitSteps(0, c.Rlimits)...))
		// The Go runtime raised this process's soft RLIMIT_NOFILE at
		// start and restores the original at exec unless the limit went
		// through package syscall: a setrlimit to the value the C just
		// set tells it so, and changes nothing. (The init has no Go
		// runtime.)
		var cur syscall.Rlimit
		step(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur))
		step(syscall.Setrlimit(syscall.RLIMIT_NOFILE, &cur))
	}
	if c.Keyring {
		step(run(keyringSteps()...))
	}
	if c.Hostname != "" {
		step(run(hostnameSteps(c.Hostname)...))
	}
	if c.Loopback {
		step(run(loopbackSteps()...))
	}
	switch c.Caps {
	case "all":
		step(run(privilegeSteps(true)...))
	case "no-setpcap":
		step(run(privilegeSteps(false)...))
	}
	for _, f := range c.Filters {
		step(run(seccompStep(f)))
	}
	if c.Listener != nil {
		// As the init's INIT_WALL does: without the flag an old kernel
		// lacks, when it says EINVAL.
		first, fallback := listenerSteps(c.Listener)
		fd, err := runSteps(first)
		if errors.Is(err, unix.EINVAL) {
			fd, err = runSteps(fallback)
		}
		step(err)
		step(unix.Dup3(fd, 3, 0)) // without O_CLOEXEC: sleep keeps it
	}
	sleep, err := exec.LookPath("sleep")
	step(err)
	step(unix.Exec(sleep, []string{"sleep", "60"}, os.Environ()))
	return 0
}

// run has the C execute recs on the calling thread.
func run(recs ...Record) error {
	_, err := runSteps(recs...)
	return err
}

// confined runs job in a child (in new namespaces with cloneflags) and
// returns the pid of the sleep it became; the sleep is killed at the
// test's end.
func confined(t *testing.T, job confineChild, cloneflags uintptr) int {
	t.Helper()
	cmd := childCommand(t, confineChildEnv, job)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("child: %v\n%s", err, stderr.String())
		default:
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("child never exec'd sleep\n%s", stderr.String())
	return 0
}

// procStatus reads the fields of /proc/pid/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// allowAll is a one-instruction BPF program: return SECCOMP_RET_ALLOW.
func allowAll() []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint16(b, unix.BPF_RET|unix.BPF_K)
	binary.LittleEndian.PutUint32(b[4:], unix.SECCOMP_RET_ALLOW)
	return b
}

// TestConfineStatus applies the capability and seccomp steps in a child
// and reads the result from the /proc/<pid>/status of what it exec'd.
func TestConfineStatus(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the capability steps are checked as root, which holds CAP_SETPCAP")
	}
	full := procStatus(t, os.Getpid())["CapBnd"]
	zero := "0000000000000000"
	tests := []struct {
		name string
		job  confineChild
		want map[string]string
	}{
		{"no steps", confineChild{}, map[string]string{"CapBnd": full, "NoNewPrivs": "0", "Seccomp": "0"}},
		{"all capabilities", confineChild{Caps: "all"}, map[string]string{
			"CapBnd": zero, "CapEff": zero, "CapPrm": zero, "CapInh": zero, "CapAmb": zero, "NoNewPrivs": "1", "Seccomp": "0",
		}},
		{"without CAP_SETPCAP's steps", confineChild{Caps: "no-setpcap"}, map[string]string{
			// The bounding set stays; no_new_privs keeps root's exec from
			// regaining what capset cleared.
			"CapBnd": full, "CapEff": zero, "CapPrm": zero, "NoNewPrivs": "1",
		}},
		{"mode wall and profile", confineChild{Caps: "all", Filters: [][]byte{allowAll(), allowAll()}}, map[string]string{
			"CapEff": zero, "NoNewPrivs": "1", "Seccomp": "2", "Seccomp_filters": "2",
		}},
		{"listener", confineChild{Caps: "all", Filters: [][]byte{allowAll()}, Listener: allowAll()}, map[string]string{
			"Seccomp": "2", "Seccomp_filters": "2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid := confined(t, tt.job, 0)
			got := procStatus(t, pid)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("host: /proc/%d/status %s = %q, want %q", pid, k, got[k], v)
				}
			}
			if tt.job.Listener != nil {
				// The filter's listener, passed on as fd 3.
				link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", pid))
				if err != nil || !strings.Contains(link, "seccomp notify") {
					t.Errorf("host: fd 3 of the child is %q (%v), want a seccomp listener", link, err)
				}
			}
		})
	}
}

// procLimit reads one row of /proc/pid/limits as (soft, hard).
func procLimit(t *testing.T, pid int, name string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			f := strings.Fields(l[len(name):])
			return f[0], f[1]
		}
	}
	t.Fatalf("no %q in /proc/%d/limits", name, pid)
	return "", ""
}

// TestRlimits sets the init's own limits in a child and a process's from
// outside, as the init does for its command, and reads /proc/<pid>/limits:
// limits are lowered, never raised.
func TestRlimits(t *testing.T) {
	type row struct{ name, soft, hard string }
	tests := []struct {
		name       string
		lower, set []cgroups.Rlimit
		want       []row
	}{
		{"lowered", nil,
			[]cgroups.Rlimit{{Resource: unix.RLIMIT_CORE}, {Resource: unix.RLIMIT_NOFILE, Soft: 100, Hard: 200}, {Resource: unix.RLIMIT_FSIZE, Soft: 1 << 20, Hard: 2 << 20}},
			[]row{{"Max core file size", "0", "0"}, {"Max open files", "100", "200"}, {"Max file size", "1048576", "2097152"}}},
		{"never raised", []cgroups.Rlimit{{Resource: unix.RLIMIT_NOFILE, Soft: 50, Hard: 80}, {Resource: unix.RLIMIT_FSIZE, Soft: 1000, Hard: unix.RLIM_INFINITY}},
			[]cgroups.Rlimit{{Resource: unix.RLIMIT_NOFILE, Soft: 65536, Hard: 65536}, {Resource: unix.RLIMIT_FSIZE, Soft: 5000, Hard: 5000}},
			[]row{{"Max open files", "50", "80"}, {"Max file size", "1000", "5000"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/own", func(t *testing.T) {
			pid := confined(t, confineChild{Lower: tt.lower, Rlimits: tt.set}, 0)
			for _, r := range tt.want {
				if soft, hard := procLimit(t, pid, r.name); soft != r.soft || hard != r.hard {
					t.Errorf("host: %s = %s/%s, want %s/%s", r.name, soft, hard, r.soft, r.hard)
				}
			}
		})
		t.Run(tt.name+"/of a pid", func(t *testing.T) {
			pid := confined(t, confineChild{Lower: tt.lower}, 0)
			if err := run(rlimitSteps(pid, tt.set)...); err != nil {
				t.Fatal(err)
			}
			for _, r := range tt.want {
				if soft, hard := procLimit(t, pid, r.name); soft != r.soft || hard != r.hard {
					t.Errorf("host: %s = %s/%s, want %s/%s", r.name, soft, hard, r.soft, r.hard)
				}
			}
		})
	}
}

// inNamespace runs f on a thread that has joined the namespace of kind
// (net, uts) of pid; the thread is never given back to the runtime.
func inNamespace(t *testing.T, pid int, kind string, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with it
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, 0)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestIdentity applies the keyring, host name and loopback steps in a
// child in new uts and network namespaces, and looks at them from a
// thread of the test that joins those namespaces.
func TestIdentity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("new uts and network namespaces need root here")
	}
	pid := confined(t, confineChild{Keyring: true, Hostname: "hutch-test", Loopback: true}, unix.CLONE_NEWUTS|unix.CLONE_NEWNET)
	inNamespace(t, pid, "uts", func() {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil || unix.ByteSliceToString(u.Nodename[:]) != "hutch-test" {
			t.Errorf("host: the child's host name is %q (%v), want hutch-test", unix.ByteSliceToString(u.Nodename[:]), err)
		}
	})
	inNamespace(t, pid, "net", func() {
		lo, err := net.InterfaceByName("lo")
		if err != nil || lo.Flags&net.FlagUp == 0 {
			t.Errorf("host: the child's lo is %+v (%v), want up", lo, err)
		}
	})
}

// TestCgroupJoin writes the join to a pipe in place of a tasks file (the
// write is the whole step) and to an fd that cannot take it.
func TestCgroupJoin(t *testing.T) {
	r, w := pipe(t)
	if err := run(cgroupSteps([]int{w, w})...); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, _ := unix.Read(r, buf); string(buf[:n]) != "00" {
		t.Errorf("the step wrote %q, want one 0 per tasks file", buf[:n])
	}
	err := run(cgroupSteps([]int{r})...)
	var se *StepError
	if !errors.As(err, &se) || se.Op != "cgroups: join thread" || se.Errno != unix.EBADF {
		t.Errorf("joining through a read end: %v, want cgroups: join thread: EBADF", err)
	}
}

// TestStepRefused gives the C malformed messages, each after a step that
// would show if it ran (a join written to a pipe): every one is refused
// whole, with a clear error, and nothing is applied.
func TestStepRefused(t *testing.T) {
	r, w := pipe(t)
	join := Record{Kind: stepCgroupJoin, Ints: []uint64{uint64(w)}}
	ruleset := Record{Kind: stepLLRuleset, Ints: []uint64{1, 0, 0, 8, 1}}
	tests := []struct {
		name string
		rec  []Record
		want string
	}{
		{"unknown kind", []Record{{Kind: 999}}, "unknown kind"},
		{"too few ints", []Record{{Kind: stepRlimit, Ints: []uint64{0, 1, 2}}}, "wrong number of fields"},
		{"too many blobs", []Record{{Kind: stepKeyring, Blobs: [][]byte{[]byte("x")}}}, "wrong number of fields"},
		{"interior NUL in a path", []Record{ruleset, {Kind: stepLLPath, Ints: []uint64{1, 1}, Blobs: [][]byte{[]byte("/tmp\x00/etc")}}}, "bad path"},
		{"empty path", []Record{ruleset, {Kind: stepLLPath, Ints: []uint64{1, 1}, Blobs: [][]byte{{}}}}, "bad path"},
		{"path rule without a ruleset", []Record{{Kind: stepLLPath, Ints: []uint64{1, 1}, Blobs: [][]byte{[]byte("/tmp")}}}, "without a ruleset"},
		{"two rulesets", []Record{ruleset, ruleset}, "second ruleset"},
		{"a ruleset and the host's", []Record{ruleset, {Kind: stepLLRulesetFd, Ints: []uint64{10}}}, "second ruleset"},
		{"the host's ruleset and another", []Record{{Kind: stepLLRulesetFd, Ints: []uint64{10}}, ruleset}, "second ruleset"},
		{"the host's ruleset at a bad fd", []Record{{Kind: stepLLRulesetFd, Ints: []uint64{1 << 40}}}, "bad fd"},
		{"restrict without a ruleset", []Record{{Kind: stepLLRestrict}}, "without a ruleset"},
		{"port out of range", []Record{ruleset, {Kind: stepLLPort, Ints: []uint64{2, 70000}}}, "bad port"},
		{"interior NUL in a host name", []Record{{Kind: stepHostname, Blobs: [][]byte{[]byte("a\x00b")}}}, "bad host name"},
		{"host name too long", []Record{{Kind: stepHostname, Blobs: [][]byte{[]byte(strings.Repeat("h", 65))}}}, "bad host name"},
		{"resource out of range", []Record{{Kind: stepRlimit, Ints: []uint64{0, 99, 0, 0}}}, "bad pid or resource"},
		{"caps mode unknown", []Record{{Kind: stepCaps, Ints: []uint64{7, 0}}}, "bad mode"},
		{"a user count elsewhere", []Record{{Kind: stepUserCount, Ints: []uint64{1}, Blobs: [][]byte{[]byte("/etc/passwd")}}}, "not a /proc/sys/user file"},
		{"a user count deeper", []Record{{Kind: stepUserCount, Ints: []uint64{1}, Blobs: [][]byte{[]byte("/proc/sys/user/../fs/x")}}}, "not a /proc/sys/user file"},
		{"a user count too large", []Record{{Kind: stepUserCount, Ints: []uint64{1 << 40}, Blobs: [][]byte{[]byte("/proc/sys/user/max_inotify_watches")}}}, "bad value"},
		{"BPF of 7 bytes", []Record{{Kind: stepSeccomp, Ints: []uint64{0}, Blobs: [][]byte{make([]byte, 7)}}}, "not a BPF program"},
		{"empty BPF", []Record{{Kind: stepSeccomp, Ints: []uint64{0}, Blobs: [][]byte{{}}}}, "not a BPF program"},
		{"seccomp flag not allowed", []Record{{Kind: stepSeccomp, Ints: []uint64{1}, Blobs: [][]byte{allowAll()}}}, "bad seccomp flags"},
		{"two listeners", []Record{
			{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}, Blobs: [][]byte{allowAll()}},
			{Kind: stepSeccomp, Ints: []uint64{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}, Blobs: [][]byte{allowAll()}},
		}, "a second listener"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runSteps(append([]Record{join}, tt.rec...)...)
			var se *StepError
			if !errors.As(err, &se) || se.Errno != unix.EINVAL || !strings.Contains(se.Op, tt.want) {
				t.Errorf("err = %v, want EINVAL naming %q", err, tt.want)
			}
			if n, _ := unix.Read(r, make([]byte, 8)); n > 0 {
				t.Errorf("the join before the malformed record ran")
			}
		})
	}
	// Not a message at all, or one cut short.
	msg, err := EncodeWire(join)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]byte{nil, msg[:len(msg)-1], append([]byte("XXXX"), msg[4:]...)} {
		if _, err := runStepMessage(m); err == nil || !strings.Contains(err.Error(), "refuse step message") {
			t.Errorf("%q: err = %v, want a refused message", m, err)
		}
	}
	if n, _ := unix.Read(r, make([]byte, 8)); n > 0 {
		t.Errorf("a join of a malformed message ran")
	}
}

// TestHostRulesetNotARuleset: an fd passed as the host's ruleset that is
// no ruleset fails the first rule added to it (EBADFD), before anything
// is restricted: it never stands for a ruleset that grants.
func TestHostRulesetNotARuleset(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runSteps(
		Record{Kind: stepLLRulesetFd, Ints: []uint64{uint64(fd)}},
		Record{Kind: stepLLPath, Ints: []uint64{1, 1}, Blobs: [][]byte{[]byte("/")}},
		Record{Kind: stepLLRestrict},
	)
	var se *StepError
	if !errors.As(err, &se) || se.Errno != unix.EBADFD || se.Path != "/" {
		t.Errorf("err = %v, want EBADFD adding the rule on /", err)
	}
	// Taken over: the steps closed it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the fd passed as the ruleset is still open (%v)", err)
	}
}
