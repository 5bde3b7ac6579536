//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// ociRuntimes are the OCI runtimes the suite runs the oci backend under
// (runsc: gVisor, Debian's package runsc).
var ociRuntimes = []string{"runc", "crun", "runsc"}

// ociFlags are run's flags for the oci backend under rt; the test is
// skipped, saying why, where it cannot run: the runtimes need root to
// make namespaces and cgroups of their own without a user namespace, and
// must be installed.
func ociFlags(t *testing.T, rt string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the oci backend's runtimes run as root here (no rootless configuration)")
	}
	if _, err := exec.LookPath(rt); err != nil {
		t.Skipf("%s is not installed (apt-get install %s)", rt, rt)
	}
	return []string{"--backend", "oci", "--oci-runtime", rt}
}

// TestOCIConfines (issue: OCI export, must show): the same subset of the
// suite hutch's own backend passes, under runc, crun and runsc, judged on
// the host: a write outside the workspace or in a --read-only path in it
// does not reach the host while one in the workspace does, the default
// deny-list's planted key is not read, no host listener (on loopback or
// the host's own address) is reached, and the Result names the backend
// and what it did not enforce.
func TestOCIConfines(t *testing.T) {
	for _, rt := range ociRuntimes {
		t.Run(rt, func(t *testing.T) {
			flags := ociFlags(t, rt)
			ws, outside := dir(t, "ws-"), dir(t, "outside-")
			must(os.Chmod(outside, 0o777))
			port, targets, accepted := hostListener(t)
			var probes strings.Builder
			for _, ip := range targets {
				fmt.Fprintf(&probes, "python3 -c 'import socket; socket.create_connection((\"%s\", %d), 2)' 2>/dev/null\n", ip, port)
			}
			// A read-only carve-out inside the workspace: a bind of its
			// own, as runsc ignores readonlyPaths.
			keep := filepath.Join(ws, "keep")
			must(os.Mkdir(keep, 0o777))
			flags = append(flags, "--read-only", keep)
			script := fmt.Sprintf(`echo in > inside
echo x > keep/written
echo escape > %[1]s/escaped
touch /usr/hutch-oci-escaped
cat %[2]s/.ssh/id_ed25519 > leak-ssh
cat %[2]s/.aws/credentials > leak-aws
cat /etc/shadow > leak-shadow
%[3]s
exit 3`, outside, fakeHome, probes.String())
			r := sh(t, ws, script, flags...)
			if r.code != 3 {
				t.Errorf("want the command's exit status 3:\n%s", r)
			}
			if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
				t.Errorf("host: the workspace write did not happen: %v\n%s", err, r)
			}
			for _, p := range []string{filepath.Join(outside, "escaped"), "/usr/hutch-oci-escaped", filepath.Join(keep, "written")} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					t.Errorf("host: the command wrote %s, where it may not", p)
				}
			}
			shadow, _ := os.ReadFile("/etc/shadow")
			for _, leak := range []string{"leak-ssh", "leak-aws", "leak-shadow"} {
				b, _ := os.ReadFile(filepath.Join(ws, leak))
				if strings.Contains(string(b), sshSecret) || (len(shadow) > 0 && len(b) > 0 && strings.Contains(string(shadow), strings.TrimSpace(string(b)))) {
					t.Errorf("host: %s holds a denied file's content (%d bytes)", leak, len(b))
				}
			}
			time.Sleep(100 * time.Millisecond) // an accept in flight is counted
			if n := accepted.Load(); n != 0 {
				t.Errorf("host: the listener on %v port %d accepted %d connections", targets, port, n)
			}
			res := r.result
			if res == nil {
				t.Fatalf("no result:\n%s", r)
			}
			if res.Backend != runtime.BackendOCI || res.ExitCode != 3 || !slices.Contains(res.Layers, runtime.LayerNetNS) || !slices.ContainsFunc(res.Unenforced, func(s string) bool { return strings.HasPrefix(s, "landlock:") }) {
				t.Errorf("result: %+v", res)
			}
			if !strings.Contains(r.stderr, "not enforced: landlock:") {
				t.Errorf("the CLI does not list what the OCI form leaves out:\n%s", r)
			}
		})
	}
}

// TestOCILimits: a fork bomb stays under --pids, 1 GiB is not allocated
// under --memory 128MiB and --timeout ends the command, under each
// runtime; the bomb's processes are counted on the host, in its own
// process table.
func TestOCILimits(t *testing.T) {
	for _, rt := range ociRuntimes {
		t.Run(rt, func(t *testing.T) {
			flags := ociFlags(t, rt)
			ws := dir(t, "ws-")
			const limit = 64
			args := append([]string{"run", "--workspace", ws, "--pids", fmt.Sprint(limit)}, flags...)
			c := exec.Command(hutchBin, append(args, "--", "sh", "-c", "b() { b | b & }; (b) ; sleep 3")...)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			// Under runsc the bomb's processes are gVisor tasks, not host
			// processes: what the host sees, and the limit holds, are the
			// sandbox kernel's threads. Under runc and crun, processes.
			count, what, slack := func(pid int) int { return len(descendants(pid)) }, "processes", 6
			if rt == "runsc" {
				count, what, slack = hostTasks, "threads", 24
			}
			most := 0
			for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				most = max(most, count(c.Process.Pid))
			}
			_ = c.Wait()
			// hutch's own tree: the runtime and its helpers on top of the bomb.
			if most > limit+slack {
				t.Errorf("host: the bomb reached %d %s, limit %d", most, what, limit)
			}
			if left := descendants(c.Process.Pid); len(left) > 0 {
				t.Errorf("host: bomb processes left: %v", left)
			}
			t.Logf("bomb peaked at %d %s on the host", most, what)
			// The runtime's cgroup, and the group of hutch's it was made
			// in, are gone from every hierarchy.
			left, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/*/hutch/hutch-%d-*", c.Process.Pid))
			more, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/hutch/hutch-%d-*", c.Process.Pid))
			if left = append(left, more...); len(left) > 0 {
				t.Errorf("host: cgroups left behind: %q", left)
			}

			r := runCLI(t, ws, append([]string{"--memory", "128MiB"}, flags...), "python3", "-c", "b = bytearray(1 << 30); open('allocated', 'w').write('x')")
			if _, err := os.Stat(filepath.Join(ws, "allocated")); err == nil || r.code == 0 {
				t.Errorf("host: 1 GiB allocated under a 128 MiB limit:\n%s", r)
			}
			// The Result's usage, read from the runtime's cgroup's parent:
			// 64 MiB touched is at least 64 MiB at the peak, under the
			// limit, and the four children count.
			r = runCLI(t, ws, append([]string{"--memory", "128MiB"}, flags...), "python3", "-c", "import os\nb = bytearray(64 << 20)\nfor _ in range(4):\n    os.fork() or os._exit(0)\nos.wait()")
			if u := r.result; u == nil || u.Usage == nil || u.Usage.PeakMemoryBytes < 64<<20 || u.Usage.PeakMemoryBytes > 128<<20 || u.Usage.PidsPeak < 2 || u.Usage.CPUUser+u.Usage.CPUSystem == 0 {
				t.Errorf("usage of 64 MiB and four children:\n%s\n%+v", r, r.result)
			}

			// --timeout: the command (pid 1, deaf to SIGTERM) is killed
			// --kill-after later, before it writes. The timeout leaves
			// the runtime time to start the container on a loaded host:
			// a kill while runc still starts it makes runc fail with its
			// own status (1, "container process is already dead").
			r = runCLI(t, ws, append([]string{"--timeout", "2s", "--kill-after", "500ms"}, flags...), "sh", "-c", "sleep 5; touch late")
			time.Sleep(3 * time.Second)
			// runsc's pid 1 takes the SIGTERM (143); runc's and crun's
			// needs the SIGKILL (137).
			if _, err := os.Stat(filepath.Join(ws, "late")); err == nil || r.result == nil || r.result.KillReason != runtime.KilledTimeout || (r.code != 137 && r.code != 143) {
				t.Errorf("host: the command outlived --timeout (or was not reported killed):\n%s\n%+v", r, r.result)
			}
		})
	}
}

// TestOCINeedsRoot: as another user than root the oci backend refuses,
// as a missing backend does (exit 127, naming why), and runs nothing.
func TestOCINeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root the oci backend runs (TestOCIConfines)")
	}
	for _, rt := range ociRuntimes {
		t.Run(rt, func(t *testing.T) {
			if _, err := exec.LookPath(rt); err != nil {
				t.Skipf("%s is not installed", rt)
			}
			ws := dir(t, "ws-")
			r := runCLI(t, ws, []string{"--backend", "oci", "--oci-runtime", rt}, "touch", "ran")
			if r.code != 127 || !strings.Contains(r.stderr, "needs root") {
				t.Errorf("want exit 127 naming root:\n%s", r)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Errorf("host: the command ran")
			}
		})
	}
}

// hostTasks counts the threads of pid's descendants in the host's
// process table.
func hostTasks(pid int) int {
	n := 0
	for _, p := range descendants(pid) {
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p)); err == nil {
			n += len(ents)
		}
	}
	return n
}

// TestOCIExport: hutch oci export writes a bundle whose config.json
// masks the default deny-list, holds the limits and the seccomp profile,
// and lists what it cannot express, on stderr and as JSON.
func TestOCIExport(t *testing.T) {
	ws, bundle := dir(t, "ws-"), filepath.Join(dir(t, "bundle-"), "b")
	uj := filepath.Join(t.TempDir(), "unexpressed.json")
	r := runCLIArgs(t, "oci", "export", "--bundle", bundle, "--workspace", ws, "--memory", "256MiB", "--pids", "100", "--net", "allow", "--allow-domain", "example.com", "--unexpressed-json", uj, "--", "true")
	if r.code != 0 {
		t.Fatalf("export:\n%s", r)
	}
	type mount struct {
		Destination, Type, Source string
		Options                   []string
	}
	var cfg struct {
		Root   struct{ Path string }
		Mounts []mount
		Linux  struct {
			Resources struct {
				Memory struct{ Limit int64 }
				Pids   struct{ Limit int64 }
			}
			Seccomp *struct{ DefaultAction string }
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	must(json.Unmarshal(b, &cfg))
	// The planted ~/.ssh, a directory, gets a mode-0000 tmpfs over it.
	sshMasked := slices.ContainsFunc(cfg.Mounts, func(m mount) bool {
		return m.Destination == filepath.Join(fakeHome, ".ssh") && m.Type == "tmpfs" && slices.Contains(m.Options, "mode=000")
	})
	if !sshMasked || cfg.Linux.Resources.Memory.Limit != 256<<20 || cfg.Linux.Resources.Pids.Limit != 100 || cfg.Linux.Seccomp == nil {
		t.Errorf("config.json: %s", b)
	}
	if fi, err := os.Stat(filepath.Join(bundle, cfg.Root.Path)); err != nil || !fi.IsDir() {
		t.Errorf("host: no rootfs directory %q in the bundle: %v", cfg.Root.Path, err)
	}
	var lines []string
	if b, err := os.ReadFile(uj); err != nil || json.Unmarshal(b, &lines) != nil {
		t.Fatalf("--unexpressed-json: %v %s", err, b)
	}
	if !slices.ContainsFunc(lines, func(s string) bool { return strings.HasPrefix(s, "network allow:") }) || !strings.Contains(r.stderr, "not in the OCI form: network allow:") {
		t.Errorf("the egress proxy is not listed as unexpressed: %q\n%s", lines, r)
	}
}
