//go:build linux

package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// nsFiles are the /proc/<pid>/ns links of each namespace layer.
var nsFiles = map[runtime.Layer]string{
	runtime.LayerUserNS:   "user",
	runtime.LayerMountNS:  "mnt",
	runtime.LayerPidNS:    "pid",
	runtime.LayerNetNS:    "net",
	runtime.LayerIPCNS:    "ipc",
	runtime.LayerUTSNS:    "uts",
	runtime.LayerCgroupNS: "cgroup",
}

// TestNamespacesAsReported: for each shape of policy, the namespaces a
// Result reports are exactly those in which the running command differs
// from the host, read from the host in /proc/<pid>/ns.
func TestNamespacesAsReported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		simulate string
		set      func(p *runtime.Policy)
		want     []runtime.Layer
	}{
		{"default", "", func(p *runtime.Policy) {}, []runtime.Layer{
			runtime.LayerUserNS, runtime.LayerMountNS, runtime.LayerPidNS, runtime.LayerNetNS,
			runtime.LayerIPCNS, runtime.LayerUTSNS, runtime.LayerCgroupNS}},
		{"host network", "", func(p *runtime.Policy) { p.Network = runtime.NetworkHost }, []runtime.Layer{
			runtime.LayerUserNS, runtime.LayerMountNS, runtime.LayerPidNS,
			runtime.LayerIPCNS, runtime.LayerUTSNS, runtime.LayerCgroupNS}},
		{"level landlock", "no-userns", func(p *runtime.Policy) { p.MinLevel = runtime.LevelLandlock }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.simulate != "" {
				if landlock.ABI() < 1 {
					t.Skip("no Landlock: level landlock is out of reach")
				}
				t.Setenv("HUTCH_SIMULATE", tc.simulate)
			}
			p := runtime.DefaultPolicy(t.TempDir())
			tc.set(&p)
			sb, err := runtime.New(p)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A duration no other process has in its command line.
			token := fmt.Sprintf("3600.%09d", time.Now().UnixNano()%1e9)
			c := sb.Command(ctx, "sleep", token)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pid := findProcess(t, []byte("sleep\x00"+token+"\x00"))
			var differ []runtime.Layer
			for l, f := range nsFiles {
				mine, err1 := os.Readlink("/proc/self/ns/" + f)
				its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, f))
				if err1 != nil || err2 != nil {
					t.Fatalf("ns/%s: %v, %v", f, err1, err2)
				}
				if mine != its {
					differ = append(differ, l)
				}
			}
			cancel()
			_ = c.Wait()
			if c.Result == nil {
				t.Fatal("no Result")
			}
			var reported []runtime.Layer
			for _, l := range c.Result.Layers {
				if _, ok := nsFiles[l]; ok {
					reported = append(reported, l)
				}
			}
			slices.Sort(differ)
			slices.Sort(reported)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(differ, want) || !slices.Equal(reported, want) {
				t.Errorf("the command's own namespaces %v, the Result reports %v, want %v", differ, reported, want)
			}
		})
	}
}

// findProcess waits for the one host process whose command line is
// cmdline (NUL-separated) and returns its pid.
func findProcess(t *testing.T, cmdline []byte) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			if b, err := os.ReadFile(d + "/cmdline"); err == nil && bytes.Equal(b, cmdline) {
				var pid int
				fmt.Sscan(filepath.Base(d), &pid)
				return pid
			}
		}
	}
	t.Fatalf("no process runs %q", cmdline)
	return 0
}
