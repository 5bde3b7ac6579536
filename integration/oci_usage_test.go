//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

// TestOCIUsage (issue 45): under --backend oci the Result's accounting
// is the command's, read from the cgroup the limits were enforced in:
// 1 GiB asked under --memory 128MiB is an OOM kill, counted and named as
// hutch's own backend names it; a fork bomb under --pids 64 hits the
// limit, counted; the level is the namespaces level the bundle's plan
// is. Under runsc the command's processes are gVisor tasks, not host
// processes: the bomb hits no host limit, and is not asked to.
func TestOCIUsage(t *testing.T) {
	for _, rt := range ociRuntimes {
		t.Run(rt, func(t *testing.T) {
			flags := ociFlags(t, rt)
			ws := dir(t, "ws-")
			r := runCLI(t, ws, append([]string{"--memory", "128MiB"}, flags...), "python3", "-c", "b = bytearray(1 << 30)")
			res := r.result
			if res == nil || res.Usage == nil || res.Usage.OOMKills == 0 || !strings.Contains(res.Reason, "OOM kill") || r.code == 0 {
				t.Errorf("an OOM kill not counted:\n%s\n%+v", r, res)
			} else {
				t.Logf("OOM kills %d, reason %q, exit %d", res.Usage.OOMKills, res.Reason, r.code)
			}
			if res != nil && (res.Level != runtime.LevelNamespaces || res.Cgroup == "") {
				t.Errorf("level %q, cgroup %q", res.Level, res.Cgroup)
			}
			if rt == "runsc" {
				return
			}
			// exec: the shell forks nothing more once the bomb is
			// out, so it lives its 2 s (a fork refused there ended it at
			// once, before hutch's first reading of the runtime's
			// group, every 100 ms: mt21-1).
			r = runCLI(t, ws, append([]string{"--pids", "64"}, flags...), "sh", "-c", "b() { b | b & }; (b) 2>/dev/null; exec sleep 2")
			if res := r.result; res == nil || res.Usage == nil || res.Usage.PidsLimitHits == 0 {
				t.Errorf("a pids limit hit not counted:\n%s\n%+v", r, res)
			} else {
				t.Logf("pids limit hits %d, peak %d", res.Usage.PidsLimitHits, res.Usage.PidsPeak)
			}
		})
	}
}

// TestDoctorOCI (issue 45): hutch doctor --oci runs the default policy's
// OCI form under each installed runtime and says, judged on the host,
// what held: as root every check holds under runc, crun and runsc; as
// another user the rootless form holds under runc, and the runtimes that
// cannot run it here say why, running nothing. Each names the command
// line it needs (runsc's with --oci-seccomp).
func TestDoctorOCI(t *testing.T) {
	r := runCLIArgs(t, "doctor", "--oci", "--json")
	if r.code != 0 {
		t.Fatalf("doctor --oci:\n%s", r)
	}
	var rep struct{ OCI []oci.RuntimeReport }
	must(json.Unmarshal([]byte(r.stdout), &rep))
	if len(rep.OCI) != len(ociRuntimes) {
		t.Fatalf("%d runtimes reported: %s", len(rep.OCI), r.stdout)
	}
	hybrid, _ := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	for _, rt := range rep.OCI {
		if _, err := exec.LookPath(rt.Runtime); err != nil {
			if rt.Unavailable == "" {
				t.Errorf("%s is not installed, and the report says nothing of it: %+v", rt.Runtime, rt)
			}
			continue
		}
		canRun := os.Geteuid() == 0 || rt.Runtime == "runc" || rt.Runtime == "crun" && len(bytes.TrimSpace(hybrid)) == 0
		switch {
		case canRun && !rt.Held():
			t.Errorf("%s: not every check held: %+v", rt.Runtime, rt)
		case !canRun && (rt.Unavailable == "" || len(rt.Checks) > 0):
			t.Errorf("%s cannot run here as uid %d, and the report does not say so: %+v", rt.Runtime, os.Geteuid(), rt)
		}
		if rt.Runtime == "runsc" && !slices.Contains(rt.Command, "--oci-seccomp") {
			t.Errorf("runsc's command line %q lacks --oci-seccomp", rt.Command)
		}
		t.Logf("%s: held %v, unavailable %q, needs %q %q", rt.Runtime, rt.Held(), rt.Unavailable, rt.Command, rt.Needs)
	}
}
