package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestClientVersions: the clients' packages carry hutch's release: a
// client and the server it was made for say the same version.
func TestClientVersions(t *testing.T) {
	root := filepath.Join("..", "..", "clients")
	for _, tc := range []struct{ file, pattern string }{
		{"python/pyproject.toml", `(?m)^version = "([^"]+)"`},
		{"typescript/package.json", `(?m)^  "version": "([^"]+)"`},
		{"rust/Cargo.toml", `(?m)^version = "([^"]+)"`},
	} {
		b, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(tc.pattern).FindSubmatch(b)
		if m == nil || string(m[1]) != release {
			t.Errorf("clients/%s: version %q, hutch's release is %q", tc.file, m, release)
		}
	}
}
