//go:build linux

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// imageRoot is a root file system shaped like a distribution image's (a
// merged /usr with its links, the usual top-level directories, so that
// the view binds as many entries as a Debian image's), its programs
// busybox-static's: what hutch run --image runs on once the image is
// unpacked (the unpack itself happens once per digest, not per spawn).
var imageRoot = sync.OnceValues(func() (string, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", err
	}
	root := filepath.Join(scratch, "image-root")
	for _, d := range []string{"usr/bin", "usr/lib", "usr/sbin", "usr/share", "etc", "home", "root", "tmp", "var/cache", "var/lib", "var/log", "opt", "srv", "mnt", "media", "boot", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	for link, to := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			return "", err
		}
	}
	b, err := os.ReadFile(bb)
	if err == nil {
		err = os.WriteFile(filepath.Join(root, "usr/bin/busybox"), b, 0o755)
	}
	for _, a := range []string{"true", "sh"} {
		if err == nil {
			err = os.Symlink("busybox", filepath.Join(root, "usr/bin", a))
		}
	}
	return root, err
})

// onImage is a Policy edit that runs on imageRoot.
func onImage(b *testing.B) func(*runtime.Policy) {
	root, err := imageRoot()
	if err != nil {
		b.Skipf("no image root (busybox-static): %v", err)
	}
	return func(p *runtime.Policy) { p.Root = root }
}

// BenchmarkImageCost reports what running on an image's root (Policy.Root,
// hutch run --image or --rootfs) costs a cold spawn over the host's root:
// image against host, alternated; a negative figure is a saving.
func BenchmarkImageCost(b *testing.B) {
	layerCost(b, sandbox(b, onImage(b)), sandbox(b, nil))
}
