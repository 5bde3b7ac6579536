//go:build linux

package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// spoSchemaFile holds the OpenAPI schema of the Security Profiles
// Operator's SeccompProfile, as gen_sposchema.go took it from the
// operator's CRD. Its Go module, which holds the type, is not on the
// module proxy: the CRD's schema, generated from that type, is what the
// API server validates an object against, and what the test does too.
const spoSchemaFile = "testdata/spo-seccompprofile.json"

// spoSchema is the SeccompProfile's schema made strict as expand makes
// Kubernetes': an object with properties takes no others. The CRD's
// metadata is any object; the test validates it against Kubernetes'
// ObjectMeta instead, as the API server does.
type spoSchema struct {
	Operator, Source, SHA256, APIVersion, Kind, Scope string
	schema                                            *spec.Schema
}

func readSPOSchema(t *testing.T) *spoSchema {
	t.Helper()
	b, err := os.ReadFile(spoSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Operator, Source, SHA256, APIVersion, Kind, Scope string
		Schema                                            map[string]any
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", spoSchemaFile, err)
	}
	strict, err := expandValue(nil, doc.Schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(strict)
	s := new(spec.Schema)
	if err := json.Unmarshal(js, s); err != nil {
		t.Fatalf("%s: %v", spoSchemaFile, err)
	}
	return &spoSchema{doc.Operator, doc.Source, doc.SHA256, doc.APIVersion, doc.Kind, doc.Scope, s}
}

// validate checks obj, as JSON decodes it, against the schema, and its
// metadata against Kubernetes' ObjectMeta; and what the schema's list
// types say that the validator does not check: a set's items are unique.
func (s *spoSchema) validate(k *kubeSchema, obj map[string]any) error {
	if key := fmt.Sprint(obj["apiVersion"], " ", obj["kind"]); key != s.APIVersion+" "+s.Kind {
		return fmt.Errorf("%s, not %s %s", key, s.APIVersion, s.Kind)
	}
	if err := validate.AgainstSchema(s.schema, obj, strfmt.Default); err != nil {
		return err
	}
	meta, err := expand(k.defs, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", nil)
	if err != nil {
		return err
	}
	js, _ := json.Marshal(meta)
	ms := new(spec.Schema)
	if err := json.Unmarshal(js, ms); err != nil {
		return err
	}
	if err := validate.AgainstSchema(ms, obj["metadata"], strfmt.Default); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	spec, _ := obj["spec"].(map[string]any)
	sets := [][]any{asList(spec["architectures"]), asList(spec["flags"])}
	for _, c := range asList(spec["syscalls"]) {
		c, _ := c.(map[string]any)
		sets = append(sets, asList(c["names"]))
	}
	for _, set := range sets {
		seen := map[string]bool{}
		for _, e := range set {
			if seen[fmt.Sprint(e)] {
				return fmt.Errorf("%v: a set (x-kubernetes-list-type) with %v twice", set, e)
			}
			seen[fmt.Sprint(e)] = true
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestPodSeccompProfile: the Pod form's seccomp profile is delivered as
// the Security Profiles Operator's SeccompProfile, written beside the
// Pod: it validates, strictly, against the operator's published schema
// (its metadata against Kubernetes' ObjectMeta), decodes strictly into
// hutch's type, holds the view's profile rule for rule (all but the
// default errno, which Unexpressed says), and the Pod's
// localhostProfile is where the operator installs it on each node; the
// profile file beside it, for nodes without the operator, is at the
// same path.
func TestPodSeccompProfile(t *testing.T) {
	k, spo := loadKubeSchema(t), readSPOSchema(t)
	if spo.Scope != "Cluster" || spo.APIVersion != SeccompProfileAPIVersion || len(spo.SHA256) != 64 {
		t.Fatalf("%s: %+v", spoSchemaFile, spo)
	}
	t.Logf("Security Profiles Operator %s (%s, sha256 %s)", spo.Operator, spo.Source, spo.SHA256)
	for _, tc := range podCases {
		t.Run(tc.name, func(t *testing.T) {
			ws := podWorkspace(t)
			p := runtime.DefaultPolicy(ws)
			tc.mod(&p, ws)
			o := tc.o
			o.Image = "alpine:3.20"
			m, err := podOf(p, []string{"true"}, o)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := m.Write(dir); err != nil {
				t.Fatal(err)
			}
			y, err := os.ReadFile(filepath.Join(dir, SeccompProfileFile))
			if tc.seccomp != "Localhost" {
				if err == nil || m.SeccompProfile != nil {
					t.Errorf("a SeccompProfile for a Pod of profile %s", tc.seccomp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			docs := yamlDocs(t, y)
			if len(docs) != 1 {
				t.Fatalf("%d objects in %s", len(docs), SeccompProfileFile)
			}
			if err := spo.validate(k, docs[0]); err != nil {
				t.Fatalf("%s does not validate against the operator's schema: %v\n%s", SeccompProfileFile, err, y)
			}
			var obj kubeSeccompProfile
			if err := yaml.UnmarshalStrict(y, &obj); err != nil {
				t.Fatal(err)
			}
			if obj.Metadata.Namespace != "" || !isDNS1123Subdomain(obj.Metadata.Name) {
				t.Errorf("metadata %+v", obj.Metadata)
			}
			pod := readManifest(t, dir).pod
			if lp := pod.Spec.Containers[0].SecurityContext.SeccompProfile.LocalhostProfile; lp != SeccompOperatorDir+"/"+obj.Metadata.Name+".json" || lp != m.SeccompFile {
				t.Errorf("localhostProfile %q for the SeccompProfile %q", lp, obj.Metadata.Name)
			}
			if _, err := os.Stat(filepath.Join(dir, SeccompDir, m.SeccompFile)); err != nil {
				t.Error(err)
			}
			view, err := compile(mustCheck(t, p))
			if err != nil {
				t.Fatal(err)
			}
			want := *view.Seccomp
			def := want.DefaultErrnoRet
			want.DefaultErrnoRet = nil
			wantJS, _ := seccomp.Marshal(&want)
			got, _ := json.Marshal(obj.Spec)
			var a, b any
			json.Unmarshal(wantJS, &a)
			json.Unmarshal(got, &b)
			if ja, jb := fmt.Sprint(a), fmt.Sprint(b); ja != jb {
				t.Errorf("the SeccompProfile's spec is not the view's profile:\n%s\n%s", wantJS, got)
			}
			// Under gVisor the profile is runsc's to apply, which it does
			// only when told: said for any runtime class.
			if tc.o.RuntimeClass != "" && !slices.ContainsFunc(m.Unexpressed, func(l string) bool {
				return strings.HasPrefix(l, "runtime class "+tc.o.RuntimeClass+": where its handler is gVisor (runsc), the Pod's seccomp profile holds only with oci-seccomp")
			}) {
				t.Errorf("runsc's oci-seccomp unsaid for runtime class %s: %q", tc.o.RuntimeClass, m.Unexpressed)
			}
			if def != nil && *def != 1 && !slices.ContainsFunc(m.Unexpressed, func(l string) bool { return strings.HasPrefix(l, "seccomp: the SeccompProfile has no default errno") }) {
				t.Errorf("default errno %d dropped unsaid", *def)
			}
		})
	}
}

// TestPodSeccompProfileRejects: the schema check is not vacuous: a
// SeccompProfile with a misspelled field, an unknown action, a value
// above int64 or a name twice in a set fails it.
func TestPodSeccompProfileRejects(t *testing.T) {
	k, spo := loadKubeSchema(t), readSPOSchema(t)
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": SeccompProfileAPIVersion, "kind": "SeccompProfile",
			"metadata": map[string]any{"name": "hutch-x"},
			"spec": map[string]any{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []any{
				map[string]any{"names": []any{"read"}, "action": "SCMP_ACT_ALLOW"},
			}},
		}
	}
	if err := spo.validate(k, base()); err != nil {
		t.Fatalf("the base object: %v", err)
	}
	for name, mod := range map[string]func(o map[string]any){
		"defaultErrnoRet": func(o map[string]any) { o["spec"].(map[string]any)["defaultErrnoRet"] = 38 },
		"unknown action":  func(o map[string]any) { o["spec"].(map[string]any)["defaultAction"] = "SCMP_ACT_DENY" },
		"metadata field":  func(o map[string]any) { o["metadata"].(map[string]any)["nmae"] = "x" },
		"name twice": func(o map[string]any) {
			o["spec"].(map[string]any)["syscalls"] = []any{map[string]any{"names": []any{"read", "read"}, "action": "SCMP_ACT_ALLOW"}}
		},
		"value above int64": func(o map[string]any) {
			o["spec"].(map[string]any)["syscalls"] = []any{map[string]any{"names": []any{"read"}, "action": "SCMP_ACT_ALLOW",
				"args": []any{map[string]any{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}}}}
		},
		"kind": func(o map[string]any) { o["kind"] = "SeccompProfiles" },
	} {
		o := base()
		mod(o)
		if err := spo.validate(k, o); err == nil {
			t.Errorf("%s: validates", name)
		}
	}
}
