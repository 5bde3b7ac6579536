package nsinit

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// KillDescendants SIGKILLs every live descendant of pid and repeats until
// none is left. It is how a sandbox without a pid namespace (LevelLandlock)
// ends: there, no kernel object holds the command's processes together
// but their parentage, which holds because the init is a child subreaper
// (orphans are re-parented to it, not to the host's init). A process that
// forks while the kill goes out cannot escape: fork fails for a parent
// with a fatal signal pending, and the next round finds what was forked
// before.
func KillDescendants(pid int) {
	for range 1000 {
		kids := descendants(pid)
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = unix.Kill(k, unix.SIGKILL)
		}
	}
}

// descendants lists the live (not zombie) processes below root, from the
// parent links in /proc/*/stat.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	zombie := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		zombie[pid] = string(f[0]) == "Z" || string(f[0]) == "X"
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			queue = append(queue, c)
			if !zombie[c] {
				out = append(out, c)
			}
		}
	}
	return out
}
