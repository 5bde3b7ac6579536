//go:build !linux

package localapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
)

// Listen is Linux only for now: the check of every connection's peer
// (SO_PEERCRED) is, and the API is not served without it.
func Listen(path string, allowUIDs []int, logger *slog.Logger) (net.Listener, error) {
	return nil, fmt.Errorf("the local API's socket checks its peers with SO_PEERCRED, Linux only: %w", errors.ErrUnsupported)
}
