//go:build linux

package oci

//go:generate go run gen_kubeschema.go

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// kubeSchemaFile holds the definitions of a pinned Kubernetes release
// the Pod form's objects need, as gen_kubeschema.go extracted them.
const kubeSchemaFile = "testdata/kubernetes-openapi.json"

// kubeSchema is a Kubernetes release's OpenAPI definitions, made
// strict, by the apiVersion and kind of the objects they define.
type kubeSchema struct {
	Kubernetes, Source, SHA256 string
	byKind                     map[string]*spec.Schema
	defs                       map[string]map[string]any
}

var (
	kubeSchemaOnce sync.Once
	kubeSchemaV    *kubeSchema
	kubeSchemaErr  error
)

// loadKubeSchema reads kubeSchemaFile once.
func loadKubeSchema(t *testing.T) *kubeSchema {
	t.Helper()
	kubeSchemaOnce.Do(func() { kubeSchemaV, kubeSchemaErr = readKubeSchema(kubeSchemaFile) })
	if kubeSchemaErr != nil {
		t.Fatal(kubeSchemaErr)
	}
	return kubeSchemaV
}

func readKubeSchema(file string) (*kubeSchema, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Kubernetes, Source, SHA256 string
		Roots                      []string
		Definitions                map[string]map[string]any
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	k := &kubeSchema{Kubernetes: doc.Kubernetes, Source: doc.Source, SHA256: doc.SHA256, byKind: map[string]*spec.Schema{}, defs: doc.Definitions}
	for _, root := range doc.Roots {
		tree, err := expand(doc.Definitions, root, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		js, err := json.Marshal(tree)
		if err != nil {
			return nil, err
		}
		s := new(spec.Schema)
		if err := json.Unmarshal(js, s); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", file, root, err)
		}
		gvks, _ := doc.Definitions[root]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			g, _ := g.(map[string]any)
			apiVersion := fmt.Sprint(g["version"])
			if group := fmt.Sprint(g["group"]); group != "" {
				apiVersion = group + "/" + apiVersion
			}
			k.byKind[apiVersion+" "+fmt.Sprint(g["kind"])] = s
		}
	}
	return k, nil
}

// expand is definition name with every reference replaced by the
// definition it names (the validator follows none), and made strict as
// kubeconform's -strict makes it: an object with properties takes no
// others, so that a misspelled field is an error, as kubectl's
// server-side field validation makes it. The definitions are left as
// they are.
func expand(defs map[string]map[string]any, name string, stack []string) (map[string]any, error) {
	for _, s := range stack {
		if s == name {
			return nil, fmt.Errorf("definitions refer to themselves: %s", strings.Join(append(stack, name), " -> "))
		}
	}
	d, ok := defs[name]
	if !ok {
		return nil, fmt.Errorf("no definition %s", name)
	}
	v, err := expandValue(defs, d, append(stack, name))
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func expandValue(defs map[string]map[string]any, v any, stack []string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			return expand(defs, strings.TrimPrefix(ref, "#/definitions/"), stack)
		}
		out := map[string]any{}
		for k, e := range v {
			x, err := expandValue(defs, e, stack)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		if _, ok := out["properties"]; ok {
			if _, ok := out["additionalProperties"]; !ok {
				out["additionalProperties"] = false
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			x, err := expandValue(defs, e, stack)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return v, nil
}

// validate checks obj, an object as JSON decodes it, against the
// definition of its apiVersion and kind.
func (k *kubeSchema) validate(obj map[string]any) error {
	key := fmt.Sprint(obj["apiVersion"]) + " " + fmt.Sprint(obj["kind"])
	s, ok := k.byKind[key]
	if !ok {
		return fmt.Errorf("%s: no such kind in Kubernetes %s", key, k.Kubernetes)
	}
	return validate.AgainstSchema(s, obj, strfmt.Default)
}

// yamlDocs are the documents of a YAML stream as JSON decodes them.
func yamlDocs(t *testing.T, y []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range bytes.Split(y, []byte("\n---\n")) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// TestKubeSchemaFile: the schema is the pinned release's, whole: every
// root is a kind, and every reference resolves.
func TestKubeSchemaFile(t *testing.T) {
	k := loadKubeSchema(t)
	if k.Kubernetes == "" || len(k.SHA256) != 64 || !strings.HasPrefix(k.Source, "k8s.io/kubernetes@"+k.Kubernetes+"/") {
		t.Errorf("%s: release %q, source %q, sha256 %q", kubeSchemaFile, k.Kubernetes, k.Source, k.SHA256)
	}
	for _, kind := range []string{"v1 Pod", "v1 ConfigMap", "networking.k8s.io/v1 NetworkPolicy"} {
		if k.byKind[kind] == nil {
			t.Errorf("%s: no definition of %s", kubeSchemaFile, kind)
		}
	}
	t.Logf("Kubernetes %s (%s, sha256 %s)", k.Kubernetes, k.Source, k.SHA256)
}
