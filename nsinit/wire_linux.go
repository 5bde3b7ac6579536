package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The host and the init talk over a SOCK_STREAM socket in frames: a
// 4-byte little-endian length, then a wire message of that length (see
// init.h). The config frame carries the plan's fds, the command frame the
// command's stdin, stdout and stderr, as SCM_RIGHTS.

// maxFrame bounds one frame (init.h's INIT_MAX_FRAME); a config is a few
// tens of KiB, more with a large Landlock carve-out.
const maxFrame = 16 << 20

// WriteFrame sends payload as one frame on the blocking socket fd, with
// fds attached to its first byte.
func WriteFrame(fd int, payload []byte, fds ...int) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("nsinit: frame of %d bytes is over the %d limit", len(payload), maxFrame)
	}
	buf := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	buf = append(buf, payload...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for len(buf) > 0 {
		n, err := unix.SendmsgN(fd, buf, oob, nil, unix.MSG_NOSIGNAL)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("nsinit: send frame: %w", err)
		}
		buf, oob = buf[n:], nil
	}
	return nil
}
