//go:build !linux

package images

import (
	"context"
	"errors"
)

// Unpack unpacks images on Linux only, the one system where a sandbox
// runs on a root of its own.
func Unpack(ctx context.Context, layout, tag, cache string) (*Image, error) {
	return nil, &Error{Layout: layout, Tag: tag, Reason: "images run on Linux only", Err: errors.ErrUnsupported}
}
