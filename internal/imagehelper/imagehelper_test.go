package imagehelper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/images"
)

// The test binary is its own fake helper: with $FAKE_HELPER set it
// answers as that says and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("FAKE_HELPER") {
	case "":
		os.Exit(m.Run())
	case "image":
		// The command line hutch gives: --cache DIR -- LAYOUT[:TAG].
		if len(os.Args) != 5 || os.Args[1] != "--cache" || os.Args[3] != "--" {
			fmt.Fprintf(os.Stderr, "bad command line %q", os.Args)
			os.Exit(2)
		}
		_ = Write(os.Stdout, &images.Image{Root: os.Args[2] + "/d/rootfs", Digest: "sha256:ab", Env: []string{"REF=" + os.Args[4]}}, nil)
	case "refused":
		_ = Write(os.Stdout, nil, &images.Error{Reason: "not an OCI image layout", Err: errors.New("no index.json")})
		os.Exit(1)
	case "garbage":
		fmt.Println("{not json")
		fmt.Fprintln(os.Stderr, "helper's complaint")
		os.Exit(3)
	case "silent":
	}
	os.Exit(0)
}

func TestUnpack(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		fake, path   string
		root, reason string // want
	}{
		{fake: "image", root: "/cache/d/rootfs"},
		{fake: "refused", reason: "not an OCI image layout: no index.json"},
		{fake: "garbage", reason: "exit status 3: helper's complaint"},
		{fake: "silent", reason: "no reply"},
		{fake: "image", path: filepath.Join(t.TempDir(), "missing"), reason: "no such file"},
	} {
		t.Run(tt.fake, func(t *testing.T) {
			t.Setenv("FAKE_HELPER", tt.fake)
			path := self
			if tt.path != "" {
				path = tt.path
			}
			im, err := Unpack(context.Background(), path, "/srv/img", "v1", "/cache")
			if tt.reason == "" {
				if err != nil || im.Root != tt.root || im.Digest != "sha256:ab" || len(im.Env) != 1 || im.Env[0] != "REF=/srv/img:v1" {
					t.Fatalf("Unpack = %+v, %v; want root %s from /srv/img:v1", im, err, tt.root)
				}
				return
			}
			var ie *images.Error
			if !errors.As(err, &ie) || ie.Layout != "/srv/img" || ie.Tag != "v1" || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Unpack = %+v, %v; want an *images.Error for /srv/img:v1 saying %q", im, err, tt.reason)
			}
		})
	}
}

// TestFind: the helper beside the program comes first, then $PATH, and
// without either the error names the helper.
func TestFind(t *testing.T) {
	onPath := t.TempDir()
	t.Setenv("PATH", onPath)
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), Name) {
		t.Errorf("Find with no helper: %v, want an error naming %s", err, Name)
	}
	if err := os.WriteFile(filepath.Join(onPath, Name), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := Find(); err != nil || p != filepath.Join(onPath, Name) {
		t.Errorf("Find = %q, %v; want the one on $PATH", p, err)
	}
}
