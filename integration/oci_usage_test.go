//go:build linux

package integration

import (
	"strings"
	"testing"

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
			r = runCLI(t, ws, append([]string{"--pids", "64"}, flags...), "sh", "-c", "b() { b | b & }; (b) 2>/dev/null; sleep 2")
			if res := r.result; res == nil || res.Usage == nil || res.Usage.PidsLimitHits == 0 {
				t.Errorf("a pids limit hit not counted:\n%s\n%+v", r, res)
			} else {
				t.Logf("pids limit hits %d, peak %d", res.Usage.PidsLimitHits, res.Usage.PidsPeak)
			}
		})
	}
}
