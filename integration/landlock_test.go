//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// TestLandlockEnforced: inside the namespaces Landlock is a second wall
// behind the mounts, so its effect is seen where the mounts allow and
// Landlock does not: writing one's own /proc/self/oom_score_adj (procfs is
// writable there; Landlock grants only reads beneath /). The host reads
// the command's oom_score_adj: unchanged with Landlock, changed without it
// (the control run proves the check can fail).
func TestLandlockEnforced(t *testing.T) {
	abi := landlock.ABI()
	for _, tc := range []struct {
		name     string
		skip     bool
		wantAdj  string
		wantOn   bool
		skipWhen bool
	}{
		{name: "default", wantAdj: "0", wantOn: true, skipWhen: abi < 2},
		{name: "landlock skipped", skip: true, wantAdj: "700"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skipWhen {
				t.Skipf("Landlock ABI %d: the layer is degraded here (TestLandlockDegraded covers it)", abi)
			}
			ws := dir(t, "ws-")
			sb := newSandbox(t, ws, func(p *runtime.Policy) {
				if tc.skip {
					p.SkipLayers = append(p.SkipLayers, runtime.LayerLandlock)
				}
			})
			arg := uniqueSleep()
			ctx, cancel := context.WithCancel(context.Background())
			cmd := sb.Command(ctx, "sh", "-c", "echo 700 > /proc/self/oom_score_adj; exec sleep "+arg)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			found := waitFor(5*time.Second, func() bool { pids = procsWithArg(arg); return len(pids) == 1 })
			var adj []byte
			if found {
				adj, _ = os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pids[0]))
			}
			cancel()
			_ = cmd.Wait()
			if !found {
				t.Fatalf("command not found on the host: %v", pids)
			}
			if got := strings.TrimSpace(string(adj)); got != tc.wantAdj {
				t.Errorf("host: the command's oom_score_adj is %s, want %s", got, tc.wantAdj)
			}
			r := cmd.Result
			if r == nil {
				t.Fatal("no Result")
			}
			on := false
			for _, l := range r.Layers {
				on = on || l == runtime.LayerLandlock
			}
			if on != tc.wantOn {
				t.Errorf("Result.Layers has landlock = %v, want %v (layers %v)", on, tc.wantOn, r.Layers)
			}
			if tc.wantOn && r.LandlockABI != abi {
				t.Errorf("Result.LandlockABI = %d, the kernel's is %d", r.LandlockABI, abi)
			}
			if !tc.wantOn && len(r.Skipped) == 0 {
				t.Errorf("Result.Skipped is empty although landlock was skipped")
			}
		})
	}
}

// TestLandlockDegraded: on a kernel without a usable Landlock the default
// policy runs with the layer reported as skipped, and a policy that does
// not allow degrading it is refused before anything starts.
func TestLandlockDegraded(t *testing.T) {
	abi := landlock.ABI()
	if abi >= 2 {
		t.Skipf("Landlock ABI %d is enforced here (TestLandlockEnforced)", abi)
	}
	ws := dir(t, "ws-")
	sb := newSandbox(t, ws)
	cmd := sb.Command(context.Background(), "true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	skipped := false
	for _, s := range cmd.Result.Skipped {
		skipped = skipped || s.Layer == runtime.LayerLandlock
	}
	if !skipped {
		t.Errorf("Result.Skipped = %v, want landlock in it", cmd.Result.Skipped)
	}
	p := runtime.DefaultPolicy(ws)
	p.AllowDegraded = []runtime.Layer{runtime.LayerCgroup}
	if _, err := runtime.New(p); err == nil || !strings.Contains(err.Error(), "landlock") {
		t.Errorf("New without degrading landlock = %v, want an error naming landlock", err)
	}
}
