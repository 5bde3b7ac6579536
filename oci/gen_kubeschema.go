//go:build ignore

// gen_kubeschema extracts from the OpenAPI document of a pinned
// Kubernetes release the definitions the Pod form's objects need (the
// Pod, the ConfigMap and the NetworkPolicy, and every definition they
// reference), copied as they are, and writes them with the release and
// the sha256 of the document they come from to testdata/, which the
// tests validate manifests against. go generate ./oci runs it; it
// fetches the release's module through the go command (the module proxy,
// its checksum checked), and the tests need no network.
package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// roots are the definitions the Pod form's objects are, by kind.
var roots = []string{
	"io.k8s.api.core.v1.ConfigMap",
	"io.k8s.api.core.v1.Pod",
	"io.k8s.api.networking.v1.NetworkPolicy",
}

const (
	module = "k8s.io/kubernetes"
	source = "api/openapi-spec/swagger.json"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen_kubeschema: ")
	version := flag.String("version", "v1.32.3", "the Kubernetes release")
	out := flag.String("o", "testdata/kubernetes-openapi.json", "the file to write")
	flag.Parse()

	doc, err := read(*version)
	if err != nil {
		log.Fatal(err)
	}
	var spec struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(doc, &spec); err != nil {
		log.Fatalf("%s: %v", source, err)
	}
	names, err := closure(spec.Definitions, roots)
	if err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	var b bytes.Buffer
	header := []struct {
		key string
		v   any
	}{
		{"kubernetes", *version},
		{"source", module + "@" + *version + "/" + source},
		{"sha256", hex.EncodeToString(sum[:])},
		{"generator", "oci/gen_kubeschema.go"},
		{"roots", roots},
	}
	b.WriteString("{\n")
	for _, h := range header {
		v, _ := json.Marshal(h.v)
		fmt.Fprintf(&b, "  %q: %s,\n", h.key, v)
	}
	// One definition a line, compacted but otherwise as the source has
	// it: a new release's changes read as a diff of definitions.
	b.WriteString("  \"definitions\": {\n")
	for i, n := range names {
		var c bytes.Buffer
		if err := json.Compact(&c, spec.Definitions[n]); err != nil {
			log.Fatalf("%s: %v", n, err)
		}
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %q: %s%s\n", n, c.Bytes(), sep)
	}
	b.WriteString("  }\n}\n")
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: %d definitions from %s@%s", *out, len(names), module, *version)
}

// read returns the OpenAPI document of Kubernetes version, from its
// module's zip as go mod download fetches and checks it. It runs outside
// this module, whose go.mod and go.sum it leaves alone.
func read(version string) ([]byte, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	cmd.Stderr = os.Stderr
	js, err := cmd.Output()
	var dl struct{ Zip, Error string }
	if jerr := json.Unmarshal(js, &dl); jerr != nil || dl.Error != "" || err != nil {
		return nil, fmt.Errorf("go mod download %s@%s: %v %s", module, version, err, dl.Error)
	}
	z, err := zip.OpenReader(dl.Zip)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	f, err := z.Open(module + "@" + version + "/" + source)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// closure is roots and every definition they reference, transitively,
// sorted.
func closure(defs map[string]json.RawMessage, roots []string) ([]string, error) {
	seen := map[string]bool{}
	todo := slices.Clone(roots)
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[n] {
			continue
		}
		d, ok := defs[n]
		if !ok {
			return nil, fmt.Errorf("no definition %s", n)
		}
		seen[n] = true
		var v any
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, fmt.Errorf("%s: %v", n, err)
		}
		todo = append(todo, refs(v)...)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// refs are the definitions v references ("$ref": "#/definitions/NAME").
func refs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				out = append(out, strings.TrimPrefix(s, "#/definitions/"))
				continue
			}
			out = append(out, refs(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, refs(e)...)
		}
	}
	return out
}
