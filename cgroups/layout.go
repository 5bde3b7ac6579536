//go:build linux

package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Layout is how the host's cgroup filesystems are mounted.
type Layout int

const (
	// None: no cgroup filesystem is mounted.
	None Layout = iota
	// V1: only legacy (v1) hierarchies.
	V1
	// V2: a cgroup2 mount and no v1 hierarchy with a controller (a named
	// hierarchy such as name=systemd, left by old container images, does
	// not count: it holds no controller).
	V2
	// Hybrid: v1 controller hierarchies and a cgroup2 mount, usually
	// /sys/fs/cgroup/unified with no controllers (systemd's hybrid mode).
	Hybrid
)

// String implements fmt.Stringer.
func (l Layout) String() string {
	switch l {
	case None:
		return "none"
	case V1:
		return "v1"
	case V2:
		return "v2"
	case Hybrid:
		return "hybrid"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// mountPoint is one cgroup filesystem mount.
type mountPoint struct {
	// Path is where it is mounted.
	Path string
	// Root is the cgroup shown at Path: "/" on a host, a container's own
	// cgroup (e.g. /docker/<id>) when only that subtree is mounted.
	Root string
}

// mountTable holds the cgroup mounts of /proc/self/mountinfo.
type mountTable struct {
	// v1 maps each v1 controller (and "name=X" for named hierarchies) to
	// the hierarchy's mount. Co-mounted controllers ("cpu,cpuacct") map to
	// the same mount.
	v1 map[string]mountPoint
	// v2 is the cgroup2 mount, if any.
	v2 *mountPoint
}

// v1Controllers are the controller names a v1 mount's super options can
// carry; every other option (rw, xattr, noprefix, clone_children,
// release_agent=...) is a mount flag.
var v1Controllers = map[string]bool{
	"cpuset": true, "cpu": true, "cpuacct": true, "blkio": true, "memory": true,
	"devices": true, "freezer": true, "net_cls": true, "perf_event": true,
	"net_prio": true, "hugetlb": true, "pids": true, "rdma": true, "misc": true,
	"debug": true,
}

// layout classifies the table.
func (t mountTable) layout() Layout {
	v1 := false
	for c := range t.v1 {
		if !strings.HasPrefix(c, "name=") {
			v1 = true
			break
		}
	}
	switch {
	case v1 && t.v2 != nil:
		return Hybrid
	case t.v2 != nil:
		return V2
	case v1:
		return V1
	}
	return None
}

// parseMountinfo reads the cgroup and cgroup2 mounts from a mountinfo
// file (proc(5)). The first mount of a hierarchy wins: later ones are bind
// mounts of it or of its subtrees.
func parseMountinfo(r io.Reader) (mountTable, error) {
	t := mountTable{v1: map[string]mountPoint{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Fields: id parent major:minor root mountpoint options
		// [optional fields...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		after := strings.Fields(post)
		if len(after) < 3 || (after[0] != "cgroup" && after[0] != "cgroup2") {
			continue
		}
		before := strings.Fields(pre)
		if len(before) < 5 {
			return t, fmt.Errorf("cgroups: malformed mountinfo line %q", line)
		}
		mp := mountPoint{Path: unescapeMount(before[4]), Root: unescapeMount(before[3])}
		if after[0] == "cgroup2" {
			if t.v2 == nil {
				t.v2 = &mp
			}
			continue
		}
		for _, opt := range strings.Split(after[2], ",") {
			if v1Controllers[opt] || strings.HasPrefix(opt, "name=") {
				if _, seen := t.v1[opt]; !seen {
					t.v1[opt] = mp
				}
			}
		}
	}
	return t, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readMounts parses /proc/self/mountinfo.
func readMounts() (mountTable, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountTable{}, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// Detect reports the host's cgroup layout from /proc/self/mountinfo (the
// mounts this process sees, wherever they are, rather than statfs of the
// conventional /sys/fs/cgroup). It reads one file; call it once.
func Detect() (Layout, error) {
	t, err := readMounts()
	if err != nil {
		return None, err
	}
	return t.layout(), nil
}
