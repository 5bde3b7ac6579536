//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hutchbox/hutch/oci"
)

// TestOCIExportKubernetes: oci export --kubernetes writes the Pod
// manifest and its seccomp profile, says where the profile goes, and
// lists what the Pod does not express, on stderr and as JSON.
func TestOCIExportKubernetes(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "pod")
	uj := filepath.Join(t.TempDir(), "unexpressed.json")
	var code int
	stderr := captureStderr(t, func() {
		code = execute([]string{"oci", "export", "--kubernetes", "--bundle", dir, "--image", "alpine:3.20", "--runtime-class", "gvisor",
			"--pod-name", "agent-1", "--namespace", "agents", "--workspace", ws, "--memory", "256MiB", "--unexpressed-json", uj, "--", "true"})
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	y, err := os.ReadFile(filepath.Join(dir, oci.PodFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Pod", "name: agent-1", "namespace: agents", "runtimeClassName: gvisor", "image: alpine:3.20", "memory: 256Mi", "kind: NetworkPolicy", "type: Localhost"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("%s has no %q:\n%s", oci.PodFile, want, y)
		}
	}
	profiles, _ := filepath.Glob(filepath.Join(dir, oci.SeccompDir, oci.SeccompOperatorDir, "*.json"))
	if len(profiles) != 1 || !strings.Contains(stderr, oci.KubeletSeccompRoot) || !strings.Contains(stderr, "kubectl apply -f "+filepath.Join(dir, oci.SeccompProfileFile)) {
		t.Errorf("seccomp profiles %q; stderr:\n%s", profiles, stderr)
	}
	if y, err := os.ReadFile(filepath.Join(dir, oci.SeccompProfileFile)); err != nil || !strings.Contains(string(y), "kind: SeccompProfile") {
		t.Errorf("%s: %v\n%s", oci.SeccompProfileFile, err, y)
	}
	var lines []string
	if b, err := os.ReadFile(uj); err != nil || json.Unmarshal(b, &lines) != nil || len(lines) == 0 {
		t.Fatalf("--unexpressed-json: %v %s", err, b)
	}
	if !strings.Contains(stderr, "hutch: not in the Pod: network none:") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestOCIExportKubernetesHostEnv: oci export --kubernetes run with
// host variables set to values found nowhere else puts none of them in
// the Pod: not the exporter's PATH, locale, terminal or user, nor any
// other variable of its; the policy's own (--env) are there.
func TestOCIExportKubernetesHostEnv(t *testing.T) {
	host := map[string]string{
		"PATH": "/host-only/bin", "LANG": "xx_HOST.ONLY", "TERM": "host-only-term", "TZ": "Host/Only",
		"USER": "host-only-user", "LOGNAME": "host-only-login", "HUTCH_TEST_MARKER": "host-only-marker",
	}
	for k, v := range host {
		t.Setenv(k, v)
	}
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "pod")
	var code int
	stderr := captureStderr(t, func() {
		code = execute([]string{"oci", "export", "--kubernetes", "--bundle", dir, "--image", "alpine:3.20", "--workspace", ws,
			"--env", "POLICY_VAR=kept", "--", "true"})
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	y, err := os.ReadFile(filepath.Join(dir, oci.PodFile))
	if err != nil {
		t.Fatal(err)
	}
	var pod struct {
		Kind string
		Spec struct {
			Containers []struct {
				Env []struct{ Name, Value string }
			}
		}
	}
	found := false
	for _, doc := range strings.Split(string(y), "\n---\n") {
		if err := yaml.Unmarshal([]byte(doc), &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Kind != "Pod" {
			continue
		}
		found = true
		kept := false
		for _, e := range pod.Spec.Containers[0].Env {
			for k, v := range host {
				if e.Name == "HUTCH_TEST_MARKER" || strings.Contains(e.Value, v) {
					t.Errorf("the exporter's %s in the Pod: %s=%s", k, e.Name, e.Value)
				}
			}
			kept = kept || e.Name == "POLICY_VAR" && e.Value == "kept"
		}
		if !kept {
			t.Errorf("the policy's POLICY_VAR is not in the Pod: %+v", pod.Spec.Containers[0].Env)
		}
	}
	if !found {
		t.Fatalf("no Pod in %s", y)
	}
}

// TestOCIExportKubernetesFlags: the Pod form's flags are refused in the
// command line's words: the flag, the value as typed, the reason.
func TestOCIExportKubernetesFlags(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubernetes"}, `hutch: --image "": required`},
		{[]string{"--image", "alpine"}, "hutch: --image alpine: only with --kubernetes"},
		{[]string{"--runtime-class", "gvisor"}, "hutch: --runtime-class gvisor: only with --kubernetes"},
		{[]string{"--kubernetes", "--image", "alpine", "--rootfs", dir}, "hutch: --rootfs " + dir + ": not with --kubernetes"},
		{[]string{"--kubernetes", "--image", "alpine", "--rootless"}, "hutch: --rootless true: not with --kubernetes"},
		{[]string{"--kubernetes", "--image", "alpine", "--pod-name", "Agent_1"}, "hutch: --pod-name Agent_1: not a DNS-1123 label"},
		{[]string{"--kubernetes", "--image", "alpine", "--namespace", "a.b"}, "hutch: --namespace a.b: not a DNS-1123 label"},
		{[]string{"--kubernetes", "--image", "alpine", "--runtime-class", "gVisor"}, "hutch: --runtime-class gVisor: not a DNS-1123 subdomain"},
		{[]string{"--kubernetes", "--image", "alpine", "--workspace-claim", "a/b"}, "hutch: --workspace-claim a/b: not a DNS-1123 subdomain"},
		{[]string{"--kubernetes", "--image", "alpine", "--run-as-user", "0"}, "hutch: --run-as-user 0: root"},
		{[]string{"--kubernetes", "--image", "alpine", "--run-as-group", "-2"}, "hutch: --run-as-group -2: not an id"},
		{[]string{"--kubernetes", "--image", "alpine", "--memory", "1k"}, "hutch: --memory 1k: below the minimum"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"oci", "export", "--bundle", dir, "--workspace", ws}, tc.args...)
			var code int
			stderr := captureStderr(t, func() { code = execute(append(args, "--", "true")) })
			if code != exitHutchFailed || !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 125 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestNoKubernetesInBinary: the Pod form's objects are hutch's own
// types: no k8s.io package is linked into the binary (every sandbox's
// start runs it again), only sigs.k8s.io/yaml.
func TestNoKubernetesInBinary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") {
			t.Errorf("hutch links %s", pkg)
		}
	}
}
