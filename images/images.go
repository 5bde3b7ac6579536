// Package images runs sandboxes on OCI images: an image of an OCI image
// layout on disk (what skopeo copy, docker save or buildah push oci:
// write), unpacked into a root file system once per manifest digest, and
// its configuration, for a Policy's Root.
//
// Unpacking is umoci's (layers, whiteouts, paths kept inside the root),
// always in its rootless mode: the files belong to the user who unpacks,
// device nodes are left out, and setuid and setgid bits and file
// capabilities are taken away, so that nothing of the image's owners or
// privileges has a meaning on the host. A sandbox shows the root read-only,
// with nosuid and nodev. Pulling from a registry is left to those tools
// (docs/images.md says how).
//
// This package holds what a program needs to run on an unpacked image:
// the Image, Apply, and where the cache is. The unpacking itself is
// package images/unpack (a Go program calls unpack.Layout), or the
// hutch-image helper that the hutch CLI runs, so that the CLI does not
// link umoci (cmd/hutch-image says why).
package images

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchbox/hutch/runtime"
)

// Image is an image unpacked: its root file system and configuration.
type Image struct {
	// Root is the unpacked root file system, for Policy.Root. It
	// belongs to the cache: read it, never change it.
	Root string `json:"root"`
	// Digest is the image manifest's digest ("sha256:...").
	Digest string `json:"digest"`
	// Env, WorkingDir and User are the image's configuration.
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// ParseRef splits what --image takes, LAYOUT[:TAG], into the layout's
// directory and the tag ("" when none is given). A colon belongs to the
// path when what follows it is not a tag (holds a slash).
func ParseRef(s string) (layout, tag string) {
	i := strings.LastIndex(s, ":")
	if i < 0 || strings.Contains(s[i+1:], "/") {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// DefaultCache is where images are unpacked unless the caller says:
// $XDG_CACHE_HOME/hutch/images, or ~/.cache/hutch/images.
func DefaultCache() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("images: no cache directory: %w (set XDG_CACHE_HOME)", err)
	}
	return filepath.Join(base, "hutch", "images"), nil
}

// Apply makes p run on the image: its Root the image's root, and the
// image's Env under p's own (a variable p.Env sets keeps p's value). It
// leaves out, and returns with the reason, the image's variables that a
// sandbox sets itself (runtime.SetsEnv: an image's HOME=/root or
// GOPATH=/go names a tree that is read-only in the sandbox) or refuses
// (LD_LIBRARY_PATH: the loader would load what it names).
func (im *Image) Apply(p *runtime.Policy) (left []string) {
	p.Root = im.Root
	have := map[string]bool{}
	for _, kv := range p.Env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	var env []string
	for _, kv := range im.Env {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "" || have[k]:
		case runtime.SetsEnv(k):
			left = append(left, k+": the sandbox sets it")
		case runtime.EnvRefused(k) != "":
			left = append(left, k+": "+runtime.EnvRefused(k))
		default:
			env = append(env, kv)
		}
	}
	p.Env = append(env, p.Env...)
	return left
}

// Error is an image that could not be unpacked: the layout and tag as
// given, and why.
type Error struct {
	Layout, Tag string
	Reason      string
	Err         error
}

// Error names the image as given (layout:tag) and says why it was not unpacked.
func (e *Error) Error() string {
	ref := e.Layout
	if e.Tag != "" {
		ref += ":" + e.Tag
	}
	s := "image " + ref + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap is the underlying error, if there was one.
func (e *Error) Unwrap() error { return e.Err }
