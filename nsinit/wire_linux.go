package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The host and the init talk over a SOCK_STREAM socket in frames: a
// 4-byte little-endian length, then that many bytes of JSON. The command
// frame carries the command's stdin, stdout and stderr as SCM_RIGHTS.

// maxFrame bounds one frame; a config is a few tens of KiB.
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

// ReadFrame reads one frame from the blocking socket fd and returns its
// payload and the fds that came with it (O_CLOEXEC).
func ReadFrame(fd int) ([]byte, []int, error) {
	var fds []int
	read := func(want int) ([]byte, error) {
		out := make([]byte, 0, want)
		// Room for the most fds a frame carries: a v1 cgroup in every
		// hierarchy a command may need, with margin.
		oob := make([]byte, unix.CmsgSpace(16*4))
		for len(out) < want {
			buf := make([]byte, want-len(out))
			n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if err == nil && flags&unix.MSG_CTRUNC != 0 {
				err = errors.New("nsinit: frame carried more fds than fit")
			}
			if err != nil {
				return nil, err
			}
			if oobn > 0 {
				if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
					for _, m := range msgs {
						if r, err := unix.ParseUnixRights(&m); err == nil {
							fds = append(fds, r...)
						}
					}
				}
			}
			if n == 0 {
				return nil, errors.New("nsinit: connection closed mid-frame")
			}
			out = append(out, buf[:n]...)
		}
		return out, nil
	}
	hdr, err := read(4)
	if err != nil {
		return nil, fds, err
	}
	n := binary.LittleEndian.Uint32(hdr)
	if n > maxFrame {
		return nil, fds, fmt.Errorf("nsinit: frame of %d bytes is over the %d limit", n, maxFrame)
	}
	payload, err := read(int(n))
	return payload, fds, err
}
