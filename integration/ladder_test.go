//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/runtime"
)

// The fallback ladder, each rung forced on this machine with
// HUTCH_SIMULATE (which only takes features away). Verdicts come from the
// host: its files, its listeners, its process table.

// TestLevelRefusedBelowMinimum: a host that cannot give the policy's
// minimum level starts nothing.
func TestLevelRefusedBelowMinimum(t *testing.T) {
	for _, tc := range []struct{ simulate, minLevel string }{
		{"no-userns", ""},
		{"no-userns", "namespaces-no-proc"},
		{"no-proc", ""},
	} {
		t.Run(tc.simulate+"/"+tc.minLevel, func(t *testing.T) {
			t.Setenv("HUTCH_SIMULATE", tc.simulate)
			ws := dir(t, "ws-")
			var flags []string
			if tc.minLevel != "" {
				flags = []string{"--min-level", tc.minLevel}
			}
			r := sh(t, ws, "touch "+filepath.Join(ws, "ran"), flags...)
			if r.code != 125 || !strings.Contains(r.stderr, "isolation level") {
				t.Errorf("exit %d, stderr %q; want 125 and a refusal naming the level", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Error("host: the command ran although the level was refused")
			}
		})
	}
	t.Run("unknown level", func(t *testing.T) {
		ws := dir(t, "ws-")
		r := sh(t, ws, "touch "+filepath.Join(ws, "ran"), "--min-level", "chroot")
		if r.code != 125 || !strings.Contains(r.stderr, "--min-level chroot: ") {
			t.Errorf("exit %d, stderr %q; want 125 naming --min-level chroot", r.code, r.stderr)
		}
	})
}

// TestLevelNamespacesNoProc: without a mountable procfs the namespaces
// still hold, /proc is empty, and the Result says so.
func TestLevelNamespacesNoProc(t *testing.T) {
	t.Setenv("HUTCH_SIMULATE", "no-proc")
	ws := dir(t, "ws-")
	outside := dir(t, "outside-")
	r := sh(t, ws, "ls -A /proc > "+filepath.Join(ws, "proc-listing")+"; echo x > "+filepath.Join(outside, "escaped")+"; echo ok > "+filepath.Join(ws, "ok"),
		"--min-level", "namespaces-no-proc")
	if r.result == nil {
		t.Fatalf("no result: exit %d, %s", r.code, r.stderr)
	}
	if r.result.Level != runtime.LevelNamespacesNoProc || len(r.result.Unenforced) == 0 {
		t.Errorf("Result level %q unenforced %q", r.result.Level, r.result.Unenforced)
	}
	if !slices.Contains(r.result.Layers, runtime.LayerPidNS) || !slices.Contains(r.result.Layers, runtime.LayerMountNS) {
		t.Errorf("layers %v lack the namespaces", r.result.Layers)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "proc-listing")); err != nil || len(strings.TrimSpace(string(b))) != 0 {
		t.Errorf("host: the command's /proc listing is %q (%v), want empty", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("host: a file was written outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(ws, "ok")); err != nil {
		t.Errorf("host: the workspace write did not happen: %v", err)
	}
}

// TestLevelLandlock: without user namespaces, Landlock and seccomp still
// refuse writes outside the workspace, reads of denied paths, and the
// network, and nothing the command started outlives it.
func TestLevelLandlock(t *testing.T) {
	if landlock.ABI() < 1 {
		t.Skip("no Landlock on this kernel: the landlock level is out of reach (TestLevelRefusedBelowMinimum covers the refusal)")
	}
	t.Setenv("HUTCH_SIMULATE", "no-userns")
	ws := dir(t, "ws-")
	outside := dir(t, "outside-")

	// A host loopback service the command must not reach.
	port, accepted := loopbackListener(t)
	daemon := uniqueSleep()
	script := strings.Join([]string{
		"echo written > " + filepath.Join(ws, "in-workspace"),
		"echo x > " + filepath.Join(outside, "escaped"),
		"cat " + filepath.Join(fakeHome, ".ssh", "id_ed25519") + " > " + filepath.Join(ws, "stolen-ssh"),
		"cat " + filepath.Join(fakeHome, ".aws", "credentials") + " > " + filepath.Join(ws, "stolen-aws"),
		"echo tmp > $TMPDIR/t && cp $TMPDIR/t " + filepath.Join(ws, "tmp-works"),
		"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", " + strconv.Itoa(port) + "), 2)' 2>/dev/null",
		"(setsid sleep " + daemon + " &)",
		"true",
	}, "; ")
	r := sh(t, ws, script, "--min-level", "landlock")
	if r.result == nil {
		t.Fatalf("no result: exit %d, %s", r.code, r.stderr)
	}
	res := r.result
	if res.Level != runtime.LevelLandlock || !strings.Contains(r.stderr, "isolation level landlock") {
		t.Errorf("level %q, stderr %q: want landlock, said loudly", res.Level, r.stderr)
	}
	for _, want := range []runtime.Layer{runtime.LayerLandlock, runtime.LayerSeccomp, runtime.LayerNoNewPrivs, runtime.LayerCapabilities} {
		if !slices.Contains(res.Layers, want) {
			t.Errorf("layers %v lack %s", res.Layers, want)
		}
	}
	if slices.Contains(res.Layers, runtime.LayerUserNS) || res.LandlockABI != landlock.ABI() {
		t.Errorf("layers %v, Landlock ABI %d (kernel %d)", res.Layers, res.LandlockABI, landlock.ABI())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "in-workspace")); err != nil || string(b) != "written\n" {
		t.Errorf("host: workspace write: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "tmp-works")); err != nil {
		t.Errorf("host: the private TMPDIR was not usable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("host: a file was written outside the workspace")
	}
	for _, f := range []string{"stolen-ssh", "stolen-aws"} {
		if b, _ := os.ReadFile(filepath.Join(ws, f)); strings.Contains(string(b), sshSecret) {
			t.Errorf("host: %s holds the secret: the denied path was readable", f)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host: the loopback listener accepted %d connections from the sandbox", n)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWithArg(daemon)) == 0 }) {
		t.Errorf("host: the daemonized sleep %s outlived the command: %v", daemon, procsWithArg(daemon))
	}
}

// TestBackendAuto (issue 20, must show 4): --backend auto takes the
// strongest rung this host has, and with HUTCH_SIMULATE taking features
// away each next one in order, reporting it in the result; every rung
// really confines (a write outside the workspace does not reach the
// host); with nothing left it refuses with exit 127 and runs nothing.
// A backend this platform lacks, or one not built, is refused the same way.
func TestBackendAuto(t *testing.T) {
	for _, tc := range []struct {
		simulate string
		level    runtime.Level
		backend  runtime.Backend
	}{
		{"", runtime.LevelNamespaces, runtime.BackendNamespaces},
		{"no-proc", runtime.LevelNamespacesNoProc, runtime.BackendNamespaces},
		{"no-userns", runtime.LevelLandlock, runtime.BackendLandlock},
		{"no-userns,no-landlock", "", ""},
	} {
		t.Run("simulate="+tc.simulate, func(t *testing.T) {
			if tc.level == runtime.LevelLandlock && landlock.ABI() < 1 {
				t.Skip("no Landlock on this kernel")
			}
			t.Setenv("HUTCH_SIMULATE", tc.simulate)
			ws, outside := dir(t, "ws-"), dir(t, "outside-")
			must(os.Chmod(outside, 0o777))
			r := sh(t, ws, "touch ran; touch "+filepath.Join(outside, "escaped"), "--backend", "auto")
			_, ran := os.Stat(filepath.Join(ws, "ran"))
			if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
				t.Errorf("host: rung %q let the command write outside the workspace", tc.level)
			}
			if tc.level == "" {
				if r.code != 127 || !strings.Contains(r.stderr, "isolation level none") || ran == nil {
					t.Errorf("nothing available: want exit 127, a refusal and nothing run:\n%s", r)
				}
				return
			}
			if ran != nil || r.result == nil || r.result.Level != tc.level || r.result.Backend != tc.backend {
				t.Errorf("want level %s by %s:\n%s\n%+v", tc.level, tc.backend, r, r.result)
			}
		})
	}
	for _, b := range []string{"oci", "seatbelt"} {
		ws := dir(t, "ws-")
		r := sh(t, ws, "touch ran", "--backend", b)
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil || r.code != 127 || !strings.Contains(r.stderr, "--backend "+b+": ") {
			t.Errorf("--backend %s: want exit 127 naming it, nothing run:\n%s", b, r)
		}
	}
}

// TestBackendLandlockChosen (issue 20): --backend landlock runs at level
// landlock on a host that has namespaces too, and confines there.
func TestBackendLandlockChosen(t *testing.T) {
	if landlock.ABI() < 1 {
		t.Skip("no Landlock on this kernel")
	}
	ws, outside := dir(t, "ws-"), dir(t, "outside-")
	must(os.Chmod(outside, 0o777))
	r := sh(t, ws, "touch ran; touch "+filepath.Join(outside, "escaped"), "--backend", "landlock")
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("host: the command wrote outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil || r.result == nil || r.result.Level != runtime.LevelLandlock || r.result.Backend != runtime.BackendLandlock {
		t.Errorf("want level landlock:\n%s\n%+v", r, r.result)
	}
}
