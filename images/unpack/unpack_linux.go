//go:build linux

package unpack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/umoci/oci/cas/dir"
	"github.com/opencontainers/umoci/oci/casext"
	"github.com/opencontainers/umoci/oci/layer"
	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/images"
)

// Layout unpacks the image tag names in the OCI image layout at layout
// (tag "": the layout's only image) into cache, under its manifest's
// digest, and returns it. An image unpacked there before is not unpacked
// again: the digest names its content. Two callers unpacking the same
// image at once each unpack it, and one of the two copies is kept. Its
// errors are *images.Error.
func Layout(ctx context.Context, layout, tag, cache string) (*images.Image, error) {
	engine, err := dir.Open(layout)
	if err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "not an OCI image layout", Err: err}
	}
	defer engine.Close()
	ext := casext.NewEngine(engine)
	desc, err := manifestOf(ctx, ext, tag)
	if err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: err.Error()}
	}
	blob, err := ext.FromDescriptor(ctx, desc)
	if err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "read the manifest", Err: err}
	}
	defer blob.Close()
	manifest, ok := blob.Data.(ispec.Manifest)
	if !ok {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: fmt.Sprintf("%s is a %s, not an image manifest", desc.Digest, desc.MediaType)}
	}
	im := &images.Image{Digest: desc.Digest.String()}
	if err := readConfig(ctx, ext, manifest, im); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "read the image's configuration", Err: err}
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "make the cache", Err: err}
	}
	if cache, err = filepath.EvalSymlinks(cache); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "resolve the cache", Err: err}
	}
	final := filepath.Join(cache, desc.Digest.Encoded())
	im.Root = filepath.Join(final, "rootfs")
	if _, err := os.Stat(filepath.Join(final, "done")); err == nil {
		return im, nil
	}
	// Unpacked beside, then renamed into place whole: a cache entry is
	// complete or absent, whoever else unpacks the same image.
	tmp, err := os.MkdirTemp(cache, ".unpack-")
	if err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "make the cache", Err: err}
	}
	defer removeAll(tmp)
	// The image's root is the unpacking user: everything belongs to them.
	maps := layer.MapOptions{
		Rootless:    true,
		UIDMappings: []rspec.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Geteuid()), Size: 1}},
		GIDMappings: []rspec.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Getegid()), Size: 1}},
	}
	opts := &layer.UnpackOptions{OnDiskFormat: layer.DirRootfs{MapOptions: maps}}
	if err := layer.UnpackRootfs(ctx, engine, filepath.Join(tmp, "rootfs"), manifest, opts); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "unpack", Err: err}
	}
	if err := strip(filepath.Join(tmp, "rootfs")); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "unpack", Err: err}
	}
	// An empty marker: what the image is, is read from the layout each
	// time (its configuration), never from the cache.
	if err := os.WriteFile(filepath.Join(tmp, "done"), nil, 0o600); err != nil {
		return nil, &images.Error{Layout: layout, Tag: tag, Reason: "unpack", Err: err}
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "done")); serr != nil {
			return nil, &images.Error{Layout: layout, Tag: tag, Reason: "store in the cache", Err: err}
		}
		// Another caller's copy is in place: this one goes.
	}
	return im, nil
}

// manifestOf finds the manifest tag names, or the layout's only one.
func manifestOf(ctx context.Context, ext casext.Engine, tag string) (ispec.Descriptor, error) {
	if tag == "" {
		refs, err := ext.ListReferences(ctx)
		if err != nil {
			return ispec.Descriptor{}, err
		}
		switch len(refs) {
		case 1:
			tag = refs[0]
		case 0:
			return ispec.Descriptor{}, errors.New("the layout names no image")
		default:
			slices.Sort(refs)
			return ispec.Descriptor{}, fmt.Errorf("the layout holds several images (%s): name one, LAYOUT:TAG", strings.Join(refs, ", "))
		}
	}
	paths, err := ext.ResolveReference(ctx, tag)
	if err != nil {
		return ispec.Descriptor{}, err
	}
	switch len(paths) {
	case 0:
		return ispec.Descriptor{}, fmt.Errorf("no image tagged %q", tag)
	case 1:
		return paths[0].Descriptor(), nil
	}
	return ispec.Descriptor{}, fmt.Errorf("%q names %d images (an index for several platforms?): unpack one with skopeo --override-arch", tag, len(paths))
}

// readConfig reads manifest's image configuration into im.
func readConfig(ctx context.Context, ext casext.Engine, manifest ispec.Manifest, im *images.Image) error {
	blob, err := ext.FromDescriptor(ctx, manifest.Config)
	if err != nil {
		return err
	}
	defer blob.Close()
	cfg, ok := blob.Data.(ispec.Image)
	if !ok {
		return fmt.Errorf("%s is a %s, not an image configuration", manifest.Config.Digest, manifest.Config.MediaType)
	}
	im.Env, im.WorkingDir, im.User = cfg.Config.Env, cfg.Config.WorkingDir, cfg.Config.User
	return nil
}

// removeAll removes a directory that umoci's rootless unpacking may have
// left without write permission on some of its directories.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// strip takes from an unpacked root what would give its files power on
// the host, where they lie in the cache: setuid and setgid bits, and file
// capabilities (umoci sets both as the image has them; a sandbox's nosuid
// mount ignores them, the host's filesystem does not).
func strip(root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if m := fi.Mode(); m&(os.ModeSetuid|os.ModeSetgid) != 0 {
			if err := os.Chmod(p, m&^(os.ModeSetuid|os.ModeSetgid)); err != nil {
				return err
			}
		}
		// Looked for first: removing one, even one that is not there,
		// takes a privilege an unprivileged unpacker (who could not
		// have set it either) does not have.
		if _, err := unix.Lgetxattr(p, "security.capability", nil); err == nil {
			if err := unix.Lremovexattr(p, "security.capability"); err != nil {
				return &os.PathError{Op: "removexattr security.capability", Path: p, Err: err}
			}
		}
		return nil
	})
}
