//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/doctor"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// TestDoctorJSON checks `hutch doctor --json` against what the host
// itself says in /proc and /sys.
func TestDoctorJSON(t *testing.T) {
	r := runCLIArgs(t, "doctor", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(r.stdout), &raw)
	for _, k := range []string{"kernel", "arch", "uid", "userns", "proc_mount", "landlock", "seccomp", "cgroup", "syscalls", "level", "run"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	if b, _ := os.ReadFile("/proc/sys/kernel/osrelease"); rep.Kernel != strings.TrimSpace(string(b)) {
		t.Errorf("kernel %q, /proc says %q", rep.Kernel, b)
	}
	if rep.UID != os.Getuid() {
		t.Errorf("uid %d, want %d", rep.UID, os.Getuid())
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if rep.UserNS.MaxUserNamespaces == nil || *rep.UserNS.MaxUserNamespaces != n {
			t.Errorf("max_user_namespaces %v, /proc says %d", rep.UserNS.MaxUserNamespaces, n)
		}
	}
	if rep.Landlock.ABI != landlock.ABI() {
		t.Errorf("landlock ABI %d, the kernel answers %d", rep.Landlock.ABI, landlock.ABI())
	}
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		listed := strings.Contains(","+strings.TrimSpace(string(b))+",", ",landlock,")
		if rep.Landlock.LSM == nil || *rep.Landlock.LSM != listed || (rep.Landlock.ABI > 0) != listed {
			t.Errorf("landlock ABI %d, in_lsm_list %v; /sys/kernel/security/lsm = %q", rep.Landlock.ABI, rep.Landlock.LSM, b)
		}
	}
	// The cgroup layout from the mount table.
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	v1, v2 := false, false
	for _, l := range strings.Split(string(mi), "\n") {
		_, after, ok := strings.Cut(l, " - ")
		if !ok {
			continue
		}
		switch strings.Fields(after)[0] {
		case "cgroup":
			v1 = true
		case "cgroup2":
			v2 = true
		}
	}
	want := map[[2]bool]string{{true, true}: "hybrid", {true, false}: "v1", {false, true}: "v2", {false, false}: "none"}[[2]bool{v1, v2}]
	if rep.Cgroup.Layout != want {
		t.Errorf("cgroup layout %q, the mount table says %q", rep.Cgroup.Layout, want)
	}
	if os.Getuid() == 0 && want != "none" && !rep.Cgroup.Writable {
		t.Errorf("root cannot make cgroups? %+v", rep.Cgroup)
	}
	if !rep.Syscalls["openat2"] || !rep.Syscalls["pidfd_open"] {
		t.Errorf("syscalls %v: openat2 and pidfd_open exist on every kernel hutch runs on", rep.Syscalls)
	}
	if rep.Level == "" || rep.Run == nil || !rep.Run.OK {
		t.Errorf("level %q, run %+v: want a level and a successful run", rep.Level, rep.Run)
	}
	if rep.UserNS.Available && rep.Proc.Available && rep.Level != runtime.LevelNamespaces {
		t.Errorf("user namespaces and /proc available, but level %q", rep.Level)
	}
}

// TestDoctorSimulatedLevel: the doctor's level follows the host's
// features (here, user namespaces taken away) and names the reason.
func TestDoctorSimulatedLevel(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("no Landlock: without user namespaces nothing is left")
	}
	t.Setenv("HUTCH_SIMULATE", "no-userns")
	r := runCLIArgs(t, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "hutch run will use level: landlock") || !strings.Contains(r.stdout, "missing user namespaces") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDoctorAppArmorProfile: the profile names this binary's resolved
// path, quoted; a path AppArmor cannot hold safely is refused.
func TestDoctorAppArmorProfile(t *testing.T) {
	for _, tc := range []struct {
		dir string
		ok  bool
	}{{"with space", true}, {"glob*[x]", true}, {`quote"d`, false}, {"new\nline", false}} {
		d := filepath.Join(dir(t, "aa-"), tc.dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(d, "hutch")
		b, err := os.ReadFile(hutchBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "doctor", "--apparmor-profile").CombinedOutput()
		if !tc.ok {
			if err == nil {
				t.Errorf("%q: accepted:\n%s", tc.dir, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.dir, err, out)
		}
		escaped := strings.NewReplacer("*", `\*`, "[", `\[`, "]", `\]`).Replace(bin)
		if !strings.Contains(string(out), `profile hutch "`+escaped+`" flags=(unconfined) {`) || !strings.Contains(string(out), "userns,") {
			t.Errorf("%q: profile does not name %q:\n%s", tc.dir, escaped, out)
		}
	}
}
