//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/spawn"
)

// TestFileCommandsStartNoZygote: hutch read, write, ls and stat start no
// spawn server and keep no spare: the CLI starts its file server itself,
// and it is the only process below the CLI. hutch policy check and show
// start nothing at all. Seen from the host, by polling /proc while each
// command runs; the file server seen as the CLI's child is the control
// that the polling is fast enough to see anything.
func TestFileCommandsStartNoZygote(t *testing.T) {
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("written on the host\n"), 0o644))
	file := filepath.Join(dir(t, "pol-"), "policy.toml")
	must(os.WriteFile(file, []byte("version = 1\n[sandbox]\nallow_git_write = false\n"), 0o644))
	for _, c := range []struct {
		args   []string
		server bool // a file operation: its file server must be seen
	}{
		{[]string{"read", "--workspace", ws, "a.txt"}, true},
		{[]string{"write", "--workspace", ws, "--content", "new\n", filepath.Join(ws, "b.txt")}, true},
		{[]string{"ls", "--workspace", ws}, true},
		{[]string{"stat", "--workspace", ws, "a.txt"}, true},
		{[]string{"policy", "check", file}, false},
		{[]string{"policy", "show", "--workspace", ws}, false},
	} {
		name := c.args[0]
		if name == "policy" {
			name += " " + c.args[1]
		}
		// A poller starved of the CPU on a loaded host can miss the
		// file server: a few tries, each held to the same rules, and
		// one of them must see it.
		var stdout string
		var seen []watchedProc
		for try := 0; try < 5; try++ {
			var pid int
			stdout, seen, pid = runWatched(t, c.args...)
			server := false
			bad := map[int]bool{} // each process reported once
			for _, p := range seen {
				switch {
				case bad[p.pid]:
				case p.argv0 == spawn.ServerArg0 || p.comm == "hutch-spare":
					t.Errorf("hutch %s: started %s", name, p)
					bad[p.pid] = true
				case !c.server:
					t.Errorf("hutch %s started a process: %s", name, p)
					bad[p.pid] = true
				}
				// Its argv[0], or once it exited, the name the init
				// gives itself (init.c): either way the CLI's own child.
				if (p.argv0 == spawn.InitArg0 || p.comm == "hutch-init") && p.ppid == pid {
					server = true
				}
			}
			if server || !c.server {
				break
			}
			if try == 4 {
				t.Errorf("hutch %s: no %s seen as the CLI's child in 5 runs (the last saw: %v)", name, spawn.InitArg0, seen)
			}
		}
		if c.args[0] == "read" {
			var got struct{ Content string }
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Content != "written on the host\n" {
				t.Errorf("hutch read: %q (%v)", stdout, err)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "b.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("the host's b.txt after hutch write: %q, %v", b, err)
	}
}

// watchedProc is a process seen below the CLI: its pid and parent, and
// its argv[0] and comm when it was seen.
type watchedProc struct {
	pid, ppid   int
	argv0, comm string
}

func (p watchedProc) String() string {
	return fmt.Sprintf("pid %d (parent %d) argv[0] %q comm %q", p.pid, p.ppid, p.argv0, p.comm)
}

// runWatched runs hutch with args and polls /proc about every millisecond
// while it runs, for every process whose parent is the CLI or one seen
// below it. It fails the test unless the CLI exits 0, and returns its
// stdout, each distinct process state seen, and the CLI's pid.
func runWatched(t *testing.T, args ...string) (string, []watchedProc, int) {
	t.Helper()
	cmd := exec.Command(hutchBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_, err := os.Stat("/proc/thread-self/children")
	children := err == nil
	stop := make(chan struct{})
	result := make(chan []watchedProc)
	go func() {
		var seen []watchedProc
		have := map[watchedProc]bool{}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			for _, p := range watchBelow(pid, children) {
				if !have[p] {
					have[p] = true
					seen = append(seen, p)
				}
			}
			select {
			case <-stop:
				result <- seen
				return
			case <-tick.C:
			}
		}
	}()
	err = cmd.Wait()
	close(stop)
	seen := <-result
	if err != nil {
		t.Fatalf("hutch %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), seen, pid
}

// watchBelow lists the processes below root as they are now. With
// children, it walks down from root through each thread's children file:
// a few reads, so that a poll keeps up on a loaded host, where a scan of
// every process's parent in /proc takes milliseconds. Without those files
// (CONFIG_PROC_CHILDREN) it reads the parent of each process newer than
// root.
func watchBelow(root int, children bool) []watchedProc {
	parent := map[int]int{}
	if children {
		for next := []int{root}; len(next) > 0; {
			pid := next[0]
			next = next[1:]
			tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			for _, task := range tasks {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
				for _, f := range strings.Fields(string(b)) {
					if c, err := strconv.Atoi(f); err == nil {
						parent[c] = pid
						next = append(next, c)
					}
				}
			}
		}
	} else {
		// Only the processes started after root: pids grow (a wrap while
		// the CLI runs would hide its children, and fail the control).
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid > root {
				parent[pid] = parentOf(pid)
			}
		}
		for grew := true; grew; {
			grew = false
			for pid, ppid := range parent {
				if _, below := parent[ppid]; ppid != root && !below {
					delete(parent, pid)
					grew = true
				}
			}
		}
	}
	var out []watchedProc
	for pid, ppid := range parent {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		out = append(out, watchedProc{pid: pid, ppid: ppid, argv0: string(argv0), comm: strings.TrimSpace(string(comm))})
	}
	return out
}
