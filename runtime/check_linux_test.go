//go:build linux

package runtime_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// checkHelperEnv makes TestCheckHelper run: "check WS" or "new WS".
const checkHelperEnv = "HUTCH_RUNTIME_CHECK_HELPER"

// TestCheckStartsNothing (issue 42): Check decides and does nothing,
// judged from outside the process that calls it: while it resolves
// policies that make New start a spawn server, clone a spare and create a
// cgroup (limits, an allow-list, git guards), no child process appears and
// no cgroup is named for it. The same observer sees New do all of that, so
// the watch cannot pass by looking in the wrong place. As root, it runs
// again as an unprivileged uid.
func TestCheckStartsNothing(t *testing.T) {
	uids := []int{os.Getuid()}
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err == nil {
			uids = append(uids, 65534)
		}
	}
	for _, uid := range uids {
		t.Run(fmt.Sprint("uid ", uid), func(t *testing.T) {
			// Reachable by the unprivileged uid: not t.TempDir under
			// root's private temporary directory.
			base, err := os.MkdirTemp("/var/tmp", "hutch-check-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			ws := filepath.Join(base, "ws")
			mkdirs(t, ws, ".git/objects", ".git/refs")
			for _, d := range []string{base, ws} {
				os.Chmod(d, 0o777)
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(base, "runtime.test")
			b, err := os.ReadFile(exe)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, b, 0o755); err != nil {
				t.Fatal(err)
			}
			children, groups := watchHelper(t, uid, bin, "check "+ws)
			if len(children) != 0 || len(groups) != 0 {
				t.Errorf("Check started %v and made the cgroups %v, want nothing", children, groups)
			}
			children, groups = watchHelper(t, uid, bin, "new "+ws)
			if len(children) == 0 {
				t.Errorf("New started no process: the watch cannot see one")
			}
			if uid == 0 && len(groups) == 0 {
				t.Errorf("New made no cgroup: the watch cannot see one")
			}
		})
	}
}

// watchHelper runs TestCheckHelper (as uid) with arg, and returns the
// argv[0] of every child it had while it worked, and the cgroups named for
// it (hutch-<pid>-...) once it is done but still alive.
func watchHelper(t *testing.T, uid int, bin, arg string) (children, groups []string) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestCheckHelper$", "-test.count=1", "-test.timeout=2m")
	if uid != os.Getuid() {
		cmd = exec.Command("setpriv", append([]string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", bin}, cmd.Args[1:]...)...)
	}
	cmd.Env = append(os.Environ(), checkHelperEnv+"="+arg, "HOME=/nonexistent")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	// setpriv execs the test binary: the pid is the helper's.
	pid := cmd.Process.Pid
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("helper said %q", line)
		}
		ready <- err
	}()
	seen := map[string]bool{}
	for done := false; !done; {
		select {
		case err := <-ready:
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, stderr.String())
			}
			done = true
		case <-time.After(time.Millisecond):
		}
		for _, c := range childrenOf(pid) {
			seen[c] = true
		}
	}
	for c := range seen {
		children = append(children, c)
	}
	prefix := fmt.Sprintf("hutch-%d-", pid)
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			groups = append(groups, p)
		}
		return nil
	})
	return children, groups
}

// childrenOf lists the argv[0] of pid's children, read from /proc.
func childrenOf(pid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		// The fields after the command's name, which may hold spaces.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
		out = append(out, strings.SplitN(string(argv), "\x00", 2)[0])
	}
	return out
}

// TestCheckHelper is TestCheckStartsNothing's process: it checks (or,
// with "new", makes Sandboxes of) policies whose New starts a spawn
// server and makes a cgroup, says "ready", and waits for stdin to close.
func TestCheckHelper(t *testing.T) {
	mode, ws, ok := strings.Cut(os.Getenv(checkHelperEnv), " ")
	if !ok {
		t.Skip("run by TestCheckStartsNothing")
	}
	limits := runtime.DefaultPolicy(ws)
	limits.Memory, limits.Pids = 256<<20, 64
	limits.AllowDegraded = []runtime.Layer{runtime.LayerCgroup}
	allow := runtime.DefaultPolicy(ws)
	allow.Network, allow.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	git := runtime.DefaultPolicy(ws)
	git.AllowGitWrite = true
	var sandboxes []*runtime.Sandbox
	for _, p := range []runtime.Policy{limits, allow, git} {
		if mode == "new" {
			sb, err := runtime.New(p)
			if err != nil {
				t.Fatal(err)
			}
			sandboxes = append(sandboxes, sb)
			continue
		}
		if _, err := runtime.Check(p); err != nil {
			t.Fatal(err)
		}
	}
	if mode == "new" {
		// New starts its spawn server beside the decision: the watch is
		// to see it.
		for deadline := time.Now().Add(time.Minute); spawn.Default().ServerPid() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no spawn server after New")
			}
		}
	}
	fmt.Println("ready")
	var b [1]byte
	os.Stdin.Read(b[:])
	for _, sb := range sandboxes {
		sb.Close()
	}
}
