package runtime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Pid returns the command's process id in the host's pid namespace, as ps
// on the host shows it, once Start has returned; 0 before that and once
// Wait has seen the command end. Inside the sandbox the command has
// another pid (its init is 1 there). A pid is only a name until the
// process is reaped: signal the command with Signal or Stop, which cannot
// reach a process that reused it.
func (c *Cmd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running || c.ended {
		return 0
	}
	if c.plain != nil {
		return c.plain.cmd.Process.Pid
	}
	if c.hostPid == 0 {
		c.hostPid = hostPid(c.in, c.started.Pid)
	}
	return c.hostPid
}

// hostPid finds the host's pid of the init's child whose pid inside the
// sandbox is nsPid: the init's children are the command and whatever was
// orphaned to it, and the last NSpid field of each says its pid there.
// 0 if it is gone.
func hostPid(in *sandboxInit, nsPid int) int {
	if in.noPidNS {
		return nsPid // the sandbox shares the host's pid namespace
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", in.proc.Pid, in.proc.Pid))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if nsPidOf(pid) == nsPid {
			return pid
		}
	}
	return 0
}

// nsPidOf is pid's pid in its own pid namespace (the last NSpid field of
// /proc/<pid>/status), or 0.
func nsPidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}
