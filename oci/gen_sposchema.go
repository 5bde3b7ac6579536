//go:build ignore

// gen_sposchema extracts from the Security Profiles Operator's
// CustomResourceDefinition of SeccompProfile the OpenAPI schema of one
// served version, as it is, and writes it with the operator's release,
// the CRD's path in its repository and the sha256 of that file to
// testdata/, which the tests validate the Pod form's SeccompProfile
// against. The operator's Go module is not on the module proxy, so the
// CRD is read from a checkout of the release's tag:
//
//	go run gen_sposchema.go -crd CHECKOUT/deploy/base-crds/crds/seccompprofile.yaml -release v1.0.0
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"

	"sigs.k8s.io/yaml"
)

const crdPath = "deploy/base-crds/crds/seccompprofile.yaml"

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen_sposchema: ")
	crd := flag.String("crd", "", "the CRD file of the release ("+crdPath+" in its checkout)")
	release := flag.String("release", "v1.0.0", "the operator's release the CRD is of")
	version := flag.String("version", "v1beta1", "the API version whose schema to take")
	out := flag.String("o", "testdata/spo-seccompprofile.json", "the file to write")
	flag.Parse()

	y, err := os.ReadFile(*crd)
	if err != nil {
		log.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Group    string
			Scope    string
			Names    struct{ Kind string }
			Versions []struct {
				Name   string
				Served bool
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(y, &doc); err != nil {
		log.Fatalf("%s: %v", *crd, err)
	}
	var schema json.RawMessage
	for _, v := range doc.Spec.Versions {
		if v.Name == *version && v.Served {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		log.Fatalf("%s: no served version %s", *crd, *version)
	}
	sum := sha256.Sum256(y)
	file := map[string]any{
		"operator":   *release,
		"source":     "github.com/kubernetes-sigs/security-profiles-operator@" + *release + "/" + crdPath,
		"sha256":     hex.EncodeToString(sum[:]),
		"generator":  "oci/gen_sposchema.go",
		"apiVersion": doc.Spec.Group + "/" + *version,
		"kind":       doc.Spec.Names.Kind,
		"scope":      doc.Spec.Scope,
		"schema":     schema,
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "%s: %s %s of %s\n", *out, file["apiVersion"], file["kind"], *release)
}
