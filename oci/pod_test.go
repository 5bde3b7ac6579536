//go:build linux

package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// podWorkspace is a workspace holding what the default policy masks and
// guards there: a .env file, an .ssh directory below the top level, a
// git repository; and a directory to keep read-only.
func podWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, d := range []string{"sub/.ssh", ".git", "keep", "apps/a1/data", "apps/a2"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws
}

// hostHome makes HOME a new directory outside /tmp, whose masks are
// the host's: one in /tmp is in the sandbox's private /tmp, hidden
// with it.
func hostHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("/var/tmp", "hutch-pod-test-")
	if err != nil {
		t.Skip("no directory outside /tmp for HOME:", err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	t.Setenv("HOME", home)
	return home
}

// podObjects are m's objects as read back from its YAML, by kind.
type podObjects struct {
	pod       kubePod
	netpol    *kubeNetworkPolicy
	configMap *kubeConfigMap
	docs      []map[string]any
}

// readManifest reads back the manifest Write put in dir, strictly: a
// field the types do not have fails.
func readManifest(t *testing.T, dir string) podObjects {
	t.Helper()
	y, err := os.ReadFile(filepath.Join(dir, PodFile))
	if err != nil {
		t.Fatal(err)
	}
	var o podObjects
	o.docs = yamlDocs(t, y)
	for _, doc := range o.docs {
		js, _ := json.Marshal(doc)
		var dst any
		switch doc["kind"] {
		case "Pod":
			dst = &o.pod
		case "NetworkPolicy":
			o.netpol = new(kubeNetworkPolicy)
			dst = o.netpol
		case "ConfigMap":
			o.configMap = new(kubeConfigMap)
			dst = o.configMap
		default:
			t.Fatalf("unexpected object %v", doc["kind"])
		}
		if err := yaml.UnmarshalStrict(js, dst); err != nil {
			t.Fatalf("%v: %v", doc["kind"], err)
		}
	}
	if o.pod.Kind != "Pod" {
		t.Fatalf("no Pod in %s", y)
	}
	return o
}

// annotationList is the JSON array in annotation key.
func annotationList(t *testing.T, pod kubePod, key string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(pod.Metadata.Annotations[key]), &out); err != nil {
		t.Fatalf("annotation %s %q: %v", key, pod.Metadata.Annotations[key], err)
	}
	return out
}

// mountAt is the container's mount at path.
func mountAt(pod kubePod, path string) (volumeMount, bool) {
	i := slices.IndexFunc(pod.Spec.Containers[0].VolumeMounts, func(m volumeMount) bool { return m.MountPath == path })
	if i < 0 {
		return volumeMount{}, false
	}
	return pod.Spec.Containers[0].VolumeMounts[i], true
}

// volumeNamed is the Pod's volume name.
func volumeNamed(pod kubePod, name string) volume {
	i := slices.IndexFunc(pod.Spec.Volumes, func(v volume) bool { return v.Name == name })
	if i < 0 {
		return volume{}
	}
	return pod.Spec.Volumes[i]
}

// TestPodDefaultPolicy: the Pod form of the default policy, written and
// read back, names every mask of its view, every limit and the seccomp
// profile, whose file is the view's profile; what it mounts hides each
// existing mask, keeps the git directory read-only and the workspace
// writable, and nothing of the node is shared.
func TestPodDefaultPolicy(t *testing.T) {
	home, ws := hostHome(t), podWorkspace(t)
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := runtime.DefaultPolicy(ws)
	p.Memory, p.CPUs, p.TmpSize, p.FileSize = 512<<20, 1.5, 64<<20, 1<<30
	m, err := podOf(p, []string{"make", "test"}, PodOptions{Image: "debian:bookworm"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	o := readManifest(t, dir)
	pod := o.pod
	view, err := compile(mustCheck(t, p))
	if err != nil {
		t.Fatal(err)
	}

	// Every mask of the view is named; the default deny-list is among them.
	masks := annotationList(t, pod, AnnotationMasks)
	var planMasks []string
	for _, mt := range view.Mounts.Mounts {
		if mt.Kind == mounts.Mask {
			planMasks = append(planMasks, mt.Target)
		}
	}
	if !slices.Equal(masks, planMasks) {
		t.Errorf("annotation %s: %q, the view masks %q", AnnotationMasks, masks, planMasks)
	}
	for _, d := range runtime.DefaultDeny() {
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			d = filepath.Join(home, rest)
		} else if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		if !slices.Contains(masks, d) {
			t.Errorf("default deny path %s is not named in %s: %q", d, AnnotationMasks, masks)
		}
	}
	for _, want := range []string{filepath.Join(ws, ".env"), filepath.Join(ws, "sub/.ssh"), filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc")} {
		if !slices.Contains(masks, want) {
			t.Errorf("%s is not named in %s: %q", want, AnnotationMasks, masks)
		}
	}
	// Existing masks are mounted over: a directory by the empty
	// read-only volume, a file by the ConfigMap's mode-0000 file.
	unexpressed := strings.Join(annotationList(t, pod, AnnotationUnexpressed), "\n")
	for _, mk := range masks {
		fi, err := os.Lstat(mk)
		vm, mounted := mountAt(pod, mk)
		switch {
		case err != nil:
			if mounted || !strings.Contains(unexpressed, mk) {
				t.Errorf("missing %s: mounted %v (%+v), named unmounted %v", mk, mounted, vm, strings.Contains(unexpressed, mk))
			}
		case fi.IsDir():
			if v := volumeNamed(pod, vm.Name); !mounted || !vm.ReadOnly || vm.SubPath != "" || v.EmptyDir == nil {
				t.Errorf("directory %s: mount %+v of %+v", mk, vm, v)
			}
		default:
			v := volumeNamed(pod, vm.Name)
			if !mounted || !vm.ReadOnly || v.ConfigMap == nil || vm.SubPath != v.ConfigMap.Items[0].Path || *v.ConfigMap.Items[0].Mode != 0 {
				t.Errorf("file %s: mount %+v of %+v", mk, vm, v)
			}
		}
	}
	if o.configMap == nil || o.configMap.Data[maskKey] != "" || !o.configMap.Immutable || o.configMap.Metadata.Name != volumeNamed(pod, "mask").ConfigMap.Name {
		t.Errorf("ConfigMap of masked files: %+v", o.configMap)
	}

	// The limits: memory and CPU as resources, requested as limited;
	// pids and the file size named; /tmp sized.
	c := pod.Spec.Containers[0]
	for _, q := range []map[string]string{c.Resources.Limits, c.Resources.Requests} {
		if q["memory"] != "512Mi" || q["cpu"] != "1500m" {
			t.Errorf("resources %+v", c.Resources)
		}
	}
	a := pod.Metadata.Annotations
	if a[AnnotationNetwork] != "none" {
		t.Errorf("annotation %s: %q", AnnotationNetwork, a[AnnotationNetwork])
	}
	if a[AnnotationPids] != "4096" || a[AnnotationFileSize] != "1073741824" || !strings.Contains(unexpressed, "pids: ") {
		t.Errorf("pids %q, file size %q", a[AnnotationPids], a[AnnotationFileSize])
	}
	if tmp, ok := mountAt(pod, "/tmp"); !ok || volumeNamed(pod, tmp.Name).EmptyDir == nil || volumeNamed(pod, tmp.Name).EmptyDir.SizeLimit != "64Mi" || volumeNamed(pod, tmp.Name).EmptyDir.Medium != "Memory" {
		t.Errorf("/tmp: %+v", tmp)
	}

	// The seccomp profile: named, and its file the view's.
	sp := c.SecurityContext.SeccompProfile
	if sp.Type != "Localhost" || sp.LocalhostProfile != m.SeccompFile || !strings.HasPrefix(sp.LocalhostProfile, SeccompOperatorDir+"/hutch-default-") || a[AnnotationSeccomp] != seccomp.DefaultName {
		t.Errorf("seccomp profile %+v, annotation %q", sp, a[AnnotationSeccomp])
	}
	want, err := seccomp.Marshal(view.Seccomp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, SeccompDir, sp.LocalhostProfile))
	if err != nil || string(got) != string(want)+"\n" {
		t.Errorf("the profile written is not the view's: %v", err)
	}
	if def, _ := seccomp.Marshal(seccomp.BuiltinDefault.Profile()); string(want) != string(def) {
		t.Errorf("the view's profile is not the default")
	}

	// No privilege, nothing of the node's shared, the workspace writable
	// and the git directory not.
	sc := c.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser != DefaultPodUser || sc.RunAsGroup != DefaultPodUser || sc.AllowPrivilegeEscalation || sc.Privileged ||
		!sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("securityContext %+v", sc)
	}
	s := pod.Spec
	if s.RestartPolicy != "Never" || s.AutomountServiceAccountToken || s.EnableServiceLinks || s.HostNetwork || s.HostPID || s.HostIPC || s.RuntimeClassName != "" {
		t.Errorf("spec %+v", s)
	}
	if c.Image != "debian:bookworm" || !slices.Equal(c.Command, []string{"make", "test"}) || c.WorkingDir != ws {
		t.Errorf("container %s %q in %s", c.Image, c.Command, c.WorkingDir)
	}
	wm, _ := mountAt(pod, ws)
	if v := volumeNamed(pod, wm.Name); wm.ReadOnly || v.HostPath == nil || v.HostPath.Path != ws || v.HostPath.Type != "Directory" {
		t.Errorf("workspace: %+v of %+v", wm, v)
	}
	if gm, ok := mountAt(pod, filepath.Join(ws, ".git")); !ok || !gm.ReadOnly || gm.Name != wm.Name || gm.SubPath != ".git" {
		t.Errorf(".git: %+v", gm)
	}
	if !slices.Contains(annotationList(t, pod, AnnotationReadOnly), filepath.Join(ws, ".git")) {
		t.Errorf("annotation %s: %q", AnnotationReadOnly, a[AnnotationReadOnly])
	}
	if !slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == "HOME" && e.Value == runtime.Home }) {
		t.Errorf("env %+v", c.Env)
	}
	if hm, ok := mountAt(pod, runtime.Home); !ok || volumeNamed(pod, hm.Name).EmptyDir == nil {
		t.Errorf("HOME: %+v", hm)
	}

	// No network: a NetworkPolicy with no rule selects the Pod.
	np := o.netpol
	if np == nil || np.Spec.PodSelector.MatchLabels[LabelSandbox] != pod.Metadata.Labels[LabelSandbox] || !slices.Equal(np.Spec.PolicyTypes, []string{"Ingress", "Egress"}) {
		t.Errorf("NetworkPolicy %+v", np)
	}
	if kinds := []any{o.docs[0]["kind"], o.docs[len(o.docs)-1]["kind"]}; kinds[0] != "ConfigMap" || kinds[1] != "Pod" {
		t.Errorf("objects in the order %v", kinds)
	}
	if !slices.Equal(annotationList(t, pod, AnnotationUnexpressed), m.Unexpressed) {
		t.Errorf("annotation %s is not Unexpressed", AnnotationUnexpressed)
	}
	// The masks of the exporter's home are said to be its paths.
	i := slices.IndexFunc(m.Unexpressed, func(l string) bool { return strings.HasPrefix(l, "masks under the exporter's home ("+home+"): ") })
	if i < 0 || !strings.Contains(m.Unexpressed[i], filepath.Join(home, ".ssh")) || strings.Contains(m.Unexpressed[i], filepath.Join(ws, ".env")) {
		t.Errorf("the exporter's home's masks are not said: %q", m.Unexpressed)
	}
}

// podCases are policies and options whose Pods the tests check.
var podCases = []struct {
	name string
	mod  func(p *runtime.Policy, ws string)
	o    PodOptions
	// netpol says a NetworkPolicy is made; seccomp the profile's type;
	// unexpressed starts a line of Unexpressed.
	netpol      bool
	seccomp     string
	unexpressed string
}{
	{"default", func(*runtime.Policy, string) {}, PodOptions{}, true, "Localhost", "network none:"},
	{"net host", func(p *runtime.Policy, _ string) { p.Network = runtime.NetworkHost }, PodOptions{}, false, "Localhost", "network host:"},
	{"net allow", func(p *runtime.Policy, _ string) {
		p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	}, PodOptions{}, true, "Localhost", "network allow:"},
	{"no seccomp", func(p *runtime.Policy, _ string) { p.SkipLayers = []runtime.Layer{runtime.LayerSeccomp} }, PodOptions{}, true, "RuntimeDefault", "seccomp: skipped"},
	{"allow a call", func(p *runtime.Policy, _ string) { p.SeccompAllow = []string{"ptrace"} }, PodOptions{}, true, "Localhost", "seccomp mode wall:"},
	{"gvisor, a claim, a namespace", func(p *runtime.Policy, _ string) { p.Timeout = 1500 * time.Millisecond },
		PodOptions{RuntimeClass: "gvisor", WorkspaceClaim: "agent-ws", Namespace: "agents", Name: "agent-7", RunAsUser: 1000, RunAsGroup: 1000},
		true, "Localhost", "timeout: 1.5s is rounded up"},
	{"writable trees, read-only paths, apps, git writes", func(p *runtime.Policy, ws string) {
		p.Writable = []string{mkdir(ws + "-cache")}
		p.Home = mkdir(ws + "-home")
		p.ReadOnly = []string{"keep"}
		p.Apps = &runtime.AppIsolation{Dir: "apps", ID: "a1"}
		p.AllowGitWrite = true
	}, PodOptions{}, true, "Localhost", "hostPath: the node's "},
	{"no limits", func(p *runtime.Policy, _ string) {
		p.Memory, p.Pids, p.CPUs, p.TmpSize = runtime.Unlimited, runtime.Unlimited, runtime.Unlimited, runtime.Unlimited
	}, PodOptions{}, true, "Localhost", "network none:"},
}

// mkdir makes dir and returns it; the tests' cases make their trees
// beside the workspace, removed with it.
func mkdir(dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	return dir
}

// TestPodSchema: every object of the Pod form of each case validates
// against the pinned Kubernetes release's OpenAPI schema, strictly.
func TestPodSchema(t *testing.T) {
	k := loadKubeSchema(t)
	t.Setenv("HOME", t.TempDir())
	for _, tc := range podCases {
		t.Run(tc.name, func(t *testing.T) {
			ws := podWorkspace(t)
			t.Cleanup(func() { os.RemoveAll(ws + "-cache"); os.RemoveAll(ws + "-home") })
			p := runtime.DefaultPolicy(ws)
			tc.mod(&p, ws)
			o := tc.o
			o.Image = "registry.example/agent@sha256:" + strings.Repeat("0", 64)
			m, err := podOf(p, []string{"sh", "-c", "make"}, o)
			if err != nil {
				t.Fatal(err)
			}
			y, err := m.YAML()
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range yamlDocs(t, y) {
				if err := k.validate(doc); err != nil {
					t.Errorf("%v %v: not valid in Kubernetes %s: %v", doc["kind"], doc["metadata"].(map[string]any)["name"], k.Kubernetes, err)
				}
			}
			dir := t.TempDir()
			if err := m.Write(dir); err != nil {
				t.Fatal(err)
			}
			obj := readManifest(t, dir)
			if (obj.netpol != nil) != tc.netpol {
				t.Errorf("NetworkPolicy %+v", obj.netpol)
			}
			sp := obj.pod.Spec.Containers[0].SecurityContext.SeccompProfile
			if sp.Type != tc.seccomp || (sp.LocalhostProfile != "") != (m.Seccomp != nil) {
				t.Errorf("seccompProfile %+v", sp)
			}
			if !slices.ContainsFunc(m.Unexpressed, func(s string) bool { return strings.HasPrefix(s, tc.unexpressed) }) {
				t.Errorf("no %q in %q", tc.unexpressed, m.Unexpressed)
			}
			if rc := obj.pod.Spec.RuntimeClassName; rc != tc.o.RuntimeClass {
				t.Errorf("runtimeClassName %q", rc)
			}
			for _, o := range obj.docs {
				if ns, _ := o["metadata"].(map[string]any)["namespace"].(string); ns != tc.o.Namespace {
					t.Errorf("%v in namespace %q", o["kind"], ns)
				}
			}
		})
	}
}

// TestPodMounts: what the plan's trees become: the workspace a claim
// when one is named, the writable trees and Home the node's directories,
// git's code read-only with the git directory pinned (a mount point), a
// --read-only path mounted read-only, and another app's directory hidden;
// for an app agent the workspace is an empty read-only directory with its
// app's directory alone shown from the claim.
func TestPodMounts(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ws := podWorkspace(t)
	cache, home := mkdir(ws+"-cache"), mkdir(ws+"-home")
	t.Cleanup(func() { os.RemoveAll(cache); os.RemoveAll(home) })
	type want struct {
		path     string
		source   func(volume) bool
		subPath  string
		readOnly bool
	}
	claim := func(v volume) bool {
		return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "ws-claim"
	}
	node := func(path string) func(volume) bool {
		return func(v volume) bool {
			return v.HostPath != nil && v.HostPath.Path == path && v.HostPath.Type == "Directory"
		}
	}
	empty := func(v volume) bool { return v.EmptyDir != nil }
	trees := []want{{cache, node(cache), "", false}, {home, node(home), "", false}}
	for _, tc := range []struct {
		app       string
		want      []want
		unmounted []string
	}{
		{"", append(trees,
			want{ws, claim, "", false},
			want{filepath.Join(ws, "apps"), empty, "", true},
			want{filepath.Join(ws, ".git"), claim, ".git", false},
			want{filepath.Join(ws, ".git/hooks"), claim, ".git/hooks", true},
			want{filepath.Join(ws, "keep"), claim, "keep", true},
			want{filepath.Join(ws, "sub"), claim, "sub", false},
			want{filepath.Join(ws, "sub/.ssh"), empty, "", true},
		), []string{"apps/a1", "apps/a2"}},
		{"a1", append(trees,
			want{ws, empty, "", true},
			want{filepath.Join(ws, "apps/a1"), claim, "apps/a1", true},
			want{filepath.Join(ws, "apps/a1/data"), claim, "apps/a1/data", false},
		), []string{"apps", "apps/a2", ".git", "keep", "sub", "sub/.ssh"}},
	} {
		p := runtime.DefaultPolicy(ws)
		p.Writable, p.Home, p.ReadOnly, p.AllowGitWrite = []string{cache}, home, []string{"keep"}, true
		p.Apps = &runtime.AppIsolation{Dir: "apps", ID: tc.app}
		m, err := podOf(p, []string{"true"}, PodOptions{Image: "alpine", WorkspaceClaim: "ws-claim"})
		if err != nil {
			t.Fatal(err)
		}
		pod := m.Objects[len(m.Objects)-1].(*kubePod)
		for _, w := range tc.want {
			vm, ok := mountAt(*pod, w.path)
			if !ok || !w.source(volumeNamed(*pod, vm.Name)) || vm.SubPath != w.subPath || vm.ReadOnly != w.readOnly {
				t.Errorf("app %q: %s: mount %+v of %+v", tc.app, w.path, vm, volumeNamed(*pod, vm.Name))
			}
		}
		for _, u := range tc.unmounted {
			if vm, ok := mountAt(*pod, filepath.Join(ws, u)); ok {
				t.Errorf("app %q: %s is mounted: %+v", tc.app, u, vm)
			}
		}
		if _, ok := mountAt(*pod, runtime.Home); ok {
			t.Errorf("app %q: HOME is a node's directory, yet mounted in /tmp too", tc.app)
		}
	}
}

// TestPodRefuses: options Kubernetes would refuse are refused by field,
// before the policy; the policy's errors are runtime.New's.
func TestPodRefuses(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name  string
		p     runtime.Policy
		args  []string
		o     PodOptions
		field string // the PodOptionError's, or "" for another error naming want
		want  string
	}{
		{"no image", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{}, "Image", "required"},
		{"spaced image", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: " alpine"}, "Image", "space"},
		{"bad name", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", Name: "Agent_1"}, "Name", "DNS-1123 label"},
		{"long name", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", Name: strings.Repeat("a", 64)}, "Name", "DNS-1123 label"},
		{"bad namespace", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", Namespace: "a.b"}, "Namespace", "DNS-1123 label"},
		{"bad runtime class", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", RuntimeClass: "gVisor"}, "RuntimeClass", "DNS-1123 subdomain"},
		{"bad claim", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", WorkspaceClaim: "ws/1"}, "WorkspaceClaim", "DNS-1123 subdomain"},
		{"negative uid", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", RunAsUser: -1}, "RunAsUser", "not an id"},
		{"huge gid", runtime.DefaultPolicy(ws), []string{"true"}, PodOptions{Image: "alpine", RunAsGroup: 1 << 31}, "RunAsGroup", "not an id"},
		{"no command", runtime.DefaultPolicy(ws), nil, PodOptions{Image: "alpine"}, "", "no command"},
		{"no workspace", runtime.DefaultPolicy(""), []string{"true"}, PodOptions{Image: "alpine"}, "", "Workspace"},
		{"disabled", runtime.Policy{Workspace: ws, Backend: runtime.BackendNone}, []string{"true"}, PodOptions{Image: "alpine"}, "", "disabled mode"},
		{"listed reads", runtime.Policy{Workspace: ws, Reads: runtime.ReadsListed}, []string{"true"}, PodOptions{Image: "alpine"}, "", "no Pod form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := podOf(tc.p, tc.args, tc.o)
			pe, isOption := err.(*PodOptionError)
			if err == nil || !strings.Contains(err.Error(), tc.want) || isOption != (tc.field != "") || (isOption && pe.Field != tc.field) {
				t.Errorf("error %v, want one of field %q naming %q", err, tc.field, tc.want)
			}
		})
	}
}

// TestPodSchemaRejects: the validation can fail: a misspelled field, a
// value of the wrong type, a missing required field and an unknown kind
// in an otherwise valid Pod form are each refused, naming the field.
func TestPodSchemaRejects(t *testing.T) {
	k := loadKubeSchema(t)
	t.Setenv("HOME", t.TempDir())
	m, err := podOf(runtime.DefaultPolicy(t.TempDir()), []string{"true"}, PodOptions{Image: "alpine"})
	if err != nil {
		t.Fatal(err)
	}
	y, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	container := func(doc map[string]any) map[string]any {
		return doc["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	}
	for _, tc := range []struct {
		name string
		kind string
		mod  func(doc map[string]any)
		want string
	}{
		{"misspelled field", "Pod", func(doc map[string]any) {
			sc := container(doc)["securityContext"].(map[string]any)
			sc["runAsNonRot"] = sc["runAsNonRoot"]
			delete(sc, "runAsNonRoot")
		}, "runAsNonRot"},
		{"wrong type", "Pod", func(doc map[string]any) {
			container(doc)["securityContext"].(map[string]any)["runAsUser"] = "nobody"
		}, "runAsUser"},
		{"wrong type of a quantity", "Pod", func(doc map[string]any) {
			container(doc)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = 512
		}, "memory"},
		{"missing required field", "Pod", func(doc map[string]any) { delete(container(doc), "name") }, "name"},
		{"misspelled spec field", "NetworkPolicy", func(doc map[string]any) {
			doc["spec"].(map[string]any)["policyType"] = []any{"Egress"}
		}, "policyType"},
		{"unknown kind", "ConfigMap", func(doc map[string]any) { doc["kind"] = "ConfigMaps" }, "no such kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := yamlDocs(t, y)
			i := slices.IndexFunc(docs, func(d map[string]any) bool { return d["kind"] == tc.kind })
			if i < 0 {
				t.Fatalf("no %s in %s", tc.kind, y)
			}
			if err := k.validate(docs[i]); err != nil {
				t.Fatalf("valid before the change: %v", err)
			}
			tc.mod(docs[i])
			if err := k.validate(docs[i]); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestQuantities: limits as Kubernetes quantities, never below the
// policy's.
func TestQuantities(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{512 << 20, "512Mi"}, {3 << 29, "1536Mi"}, {1 << 30, "1Gi"}, {4097, "4097"}, {4096, "4Ki"}, {1, "1"}} {
		if got := bytesQuantity(tc.n); got != tc.want {
			t.Errorf("bytesQuantity(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cores float64
		want  string
	}{{1.5, "1500m"}, {2, "2"}, {0.1, "100m"}, {0.01, "10m"}, {0.0015, "2m"}, {1.0001, "1001m"}} {
		if got := cpuQuantity(tc.cores); got != tc.want {
			t.Errorf("cpuQuantity(%v) = %s, want %s", tc.cores, got, tc.want)
		}
	}
}

// TestPodRestricted: with the workspace a claim and no other tree of
// the node's, the Pod has only the volume types the restricted Pod
// Security level allows, besides its securityContext.
func TestPodRestricted(t *testing.T) {
	hostHome(t)
	m, err := podOf(runtime.DefaultPolicy(podWorkspace(t)), []string{"true"}, PodOptions{Image: "alpine", WorkspaceClaim: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	pod := m.Objects[len(m.Objects)-1].(*kubePod)
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil || v.EmptyDir == nil && v.ConfigMap == nil && v.PersistentVolumeClaim == nil {
			t.Errorf("volume %+v is not one the restricted level allows", v)
		}
	}
	if slices.ContainsFunc(m.Unexpressed, func(s string) bool { return strings.HasPrefix(s, "hostPath:") }) {
		t.Errorf("unexpressed: %q", m.Unexpressed)
	}
}

// TestPodEnvironment: a Pod's environment is the policy's, never the
// exporter's: host variables set to values found nowhere else (a PATH,
// the locale, the terminal, the user, a rustup home, a variable of
// hutch's tests) appear in no variable of the Pod read back; the
// policy's own Env, PATH included, does, as do HOME and the caches in
// it. With Tools, PATH is Tools before a fixed system PATH, not the
// host's, and that is said.
func TestPodEnvironment(t *testing.T) {
	host := map[string]string{
		"PATH": "/host-only/bin", "LANG": "xx_HOST.ONLY", "LC_ALL": "xx_HOST.ALL", "TERM": "host-only-term",
		"TZ": "Host/Only", "USER": "host-only-user", "LOGNAME": "host-only-login", "RUSTUP_HOME": "/host-only/rustup",
		"HUTCH_TEST_MARKER": "host-only-marker",
	}
	for k, v := range host {
		t.Setenv(k, v)
	}
	hostValue := func(env []envVar) []string {
		var leaked []string
		for _, e := range env {
			for k, v := range host {
				if e.Name == k && k == "HUTCH_TEST_MARKER" || strings.Contains(e.Value, v) {
					leaked = append(leaked, e.Name+"="+e.Value)
				}
			}
		}
		return leaked
	}
	ws := podWorkspace(t)
	tools := mkdir(ws + "-tools")
	for _, tc := range []struct {
		name string
		mod  func(p *runtime.Policy)
		// path is the Pod's PATH ("" none: the image's).
		path        string
		unexpressed string
	}{
		{"default", func(*runtime.Policy) {}, "", ""},
		{"the policy's own", func(p *runtime.Policy) {
			p.Env = []string{"PATH=/opt/policy/bin:/usr/bin", "LANG=C.UTF-8", "POLICY_VAR=kept"}
		}, "/opt/policy/bin:/usr/bin", ""},
		{"tools", func(p *runtime.Policy) { p.Tools = tools }, tools + ":" + podSystemPath, "PATH: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runtime.DefaultPolicy(ws)
			tc.mod(&p)
			m, err := podOf(p, []string{"true"}, PodOptions{Image: "alpine:3.20"})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := m.Write(dir); err != nil {
				t.Fatal(err)
			}
			env := readManifest(t, dir).pod.Spec.Containers[0].Env
			if leaked := hostValue(env); len(leaked) > 0 {
				t.Errorf("host variables in the Pod: %q", leaked)
			}
			got := map[string]string{}
			for _, e := range env {
				got[e.Name] = e.Value
			}
			if got["PATH"] != tc.path || got["HOME"] != runtime.Home || got["XDG_CACHE_HOME"] != runtime.Home+"/.cache" {
				t.Errorf("PATH %q (want %q), HOME %q, XDG_CACHE_HOME %q", got["PATH"], tc.path, got["HOME"], got["XDG_CACHE_HOME"])
			}
			for _, kv := range p.Env {
				k, v, _ := strings.Cut(kv, "=")
				if got[k] != v {
					t.Errorf("the policy's %s: %q in the Pod", kv, got[k])
				}
			}
			if tc.unexpressed != "" && !slices.ContainsFunc(m.Unexpressed, func(l string) bool { return strings.HasPrefix(l, tc.unexpressed) }) {
				t.Errorf("no line %q in %q", tc.unexpressed, m.Unexpressed)
			}
		})
	}
}
