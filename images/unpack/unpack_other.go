//go:build !linux

package unpack

import (
	"context"
	"errors"

	"github.com/hutchbox/hutch/images"
)

// Layout unpacks images on Linux only, the one system where a sandbox
// runs on a root of its own.
func Layout(ctx context.Context, layout, tag, cache string) (*images.Image, error) {
	return nil, &images.Error{Layout: layout, Tag: tag, Reason: "images run on Linux only", Err: errors.ErrUnsupported}
}
