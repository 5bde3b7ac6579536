//go:build linux

package cgroups

import (
	"os"
	"strings"
	"testing"

	containerd "github.com/containerd/cgroups/v3"
)

// Real mountinfo excerpts (non-cgroup lines kept where they matter).
const (
	mountinfoV1 = `25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
26 25 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
27 26 0:24 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755
28 27 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
31 27 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
32 27 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
33 27 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,pids
34 27 0:31 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,freezer
35 27 0:32 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,net_cls,net_prio
36 27 0:33 / /sys/fs/cgroup/blkio rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,blkio
`
	mountinfoV2 = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
24 23 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	// This machine: v1 controllers each on its own mount, cgroup2 at
	// unified without controllers.
	mountinfoHybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// systemd's hybrid mode on Ubuntu 20.04.
	mountinfoHybridSystemd = `35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
37 35 0:32 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
41 35 0:36 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
42 35 0:37 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
`
	mountinfoNone = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
`
	// A pure v2 host whose container image left a named v1 hierarchy.
	mountinfoV2Named = mountinfoV2 + `50 24 0:40 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,name=systemd
`
	// A container that sees its own subtree of each hierarchy, mounted
	// at a path with a space (escaped as \040).
	mountinfoContainer = `600 590 0:29 /docker/abc /sys/fs/cgroup/mem\040ory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
601 590 0:30 /docker/abc /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
602 590 0:29 /docker/abc/sub /mnt/again rw - cgroup cgroup rw,memory
`
)

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		layout  Layout
		v2      string            // cgroup2 mount point, "" for none
		v1      map[string]string // controller -> mount point
		v1Roots map[string]string // controller -> root, where not "/"
		absent  []string
	}{
		{name: "v1", in: mountinfoV1, layout: V1,
			v1:     map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "freezer": "/sys/fs/cgroup/freezer", "name=systemd": "/sys/fs/cgroup/systemd", "net_prio": "/sys/fs/cgroup/net_cls,net_prio"},
			absent: []string{"rw", "xattr", "release_agent=/usr/lib/systemd/systemd-cgroups-agent", "cpuset"}},
		{name: "v2", in: mountinfoV2, layout: V2, v2: "/sys/fs/cgroup", absent: []string{"memory"}},
		{name: "hybrid (this machine)", in: mountinfoHybrid, layout: Hybrid, v2: "/sys/fs/cgroup/unified",
			v1: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "memory": "/sys/fs/cgroup/memory", "blkio": "/sys/fs/cgroup/blkio", "name=systemd": "/sys/fs/cgroup/systemd"}},
		{name: "hybrid (systemd)", in: mountinfoHybridSystemd, layout: Hybrid, v2: "/sys/fs/cgroup/unified",
			v1: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory"}, absent: []string{"pids"}},
		{name: "none", in: mountinfoNone, layout: None, absent: []string{"memory"}},
		{name: "empty", in: "", layout: None},
		{name: "v2 with a named v1 hierarchy", in: mountinfoV2Named, layout: V2, v2: "/sys/fs/cgroup",
			v1: map[string]string{"name=systemd": "/sys/fs/cgroup/systemd"}},
		{name: "container subtree", in: mountinfoContainer, layout: V1,
			v1:      map[string]string{"memory": "/sys/fs/cgroup/mem ory", "pids": "/sys/fs/cgroup/pids"},
			v1Roots: map[string]string{"memory": "/docker/abc", "pids": "/docker/abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt, err := parseMountinfo(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := mt.layout(); got != tt.layout {
				t.Errorf("layout = %v, want %v", got, tt.layout)
			}
			switch {
			case tt.v2 == "" && mt.v2 != nil:
				t.Errorf("v2 mount %q, want none", mt.v2.Path)
			case tt.v2 != "" && (mt.v2 == nil || mt.v2.Path != tt.v2):
				t.Errorf("v2 mount %+v, want %q", mt.v2, tt.v2)
			}
			for c, p := range tt.v1 {
				if got := mt.v1[c].Path; got != p {
					t.Errorf("v1[%s] = %q, want %q", c, got, p)
				}
				want := "/"
				if r, ok := tt.v1Roots[c]; ok {
					want = r
				}
				if got := mt.v1[c].Root; got != want {
					t.Errorf("v1[%s].Root = %q, want %q", c, got, want)
				}
			}
			for _, c := range tt.absent {
				if mp, ok := mt.v1[c]; ok {
					t.Errorf("v1[%s] = %+v, want absent", c, mp)
				}
			}
		})
	}
}

func TestParseMountinfoMalformed(t *testing.T) {
	if _, err := parseMountinfo(strings.NewReader("1 2 - cgroup cgroup rw,memory\n")); err == nil {
		t.Error("a cgroup line with too few fields was accepted")
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/tab\011x`: "/tab\tx",
		`/back\134`: `/back\`,
		`/plain`:    "/plain",
		`/short\04`: `/short\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCgroupDir(t *testing.T) {
	host := mountPoint{Path: "/sys/fs/cgroup", Root: "/"}
	sub := mountPoint{Path: "/sys/fs/cgroup", Root: "/docker/abc"}
	for _, tt := range []struct {
		mp   mountPoint
		p    string
		want string
	}{
		{host, "/", "/sys/fs/cgroup"},
		{host, "/user.slice/user-1000.slice/session-2.scope", "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"},
		{sub, "/docker/abc", "/sys/fs/cgroup"},
		{sub, "/docker/abc/inner", "/sys/fs/cgroup/inner"},
		{sub, "/docker/abcd", ""},
		{sub, "/other", ""},
		{host, "/../../outside", ""},
		{host, "", ""},
	} {
		if got := cgroupDir(tt.mp, tt.p); got != tt.want {
			t.Errorf("cgroupDir(%+v, %q) = %q, want %q", tt.mp, tt.p, got, tt.want)
		}
	}
}

// TestDetect checks Detect against containerd's own detection (statfs of
// /sys/fs/cgroup and /sys/fs/cgroup/unified), which agrees with mountinfo
// wherever cgroups are mounted at the usual place.
func TestDetect(t *testing.T) {
	got, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layout: %v", got)
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("no /sys/fs/cgroup to compare with")
	}
	want := map[containerd.CGMode]Layout{
		containerd.Unavailable: None, containerd.Legacy: V1, containerd.Hybrid: Hybrid, containerd.Unified: V2,
	}[containerd.Mode()]
	if got != want {
		t.Errorf("Detect() = %v, containerd says %v", got, want)
	}
}
