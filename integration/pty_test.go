//go:build linux

package integration

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openPty opens a new pseudo-terminal pair on the host.
func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	unlock := 0
	if err := ioctlInt(int(m.Fd()), unix.TIOCSPTLCK, &unlock); err != nil {
		m.Close()
		return nil, nil, err
	}
	var n int
	if err := ioctlInt(int(m.Fd()), unix.TIOCGPTN, &n); err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

func ioctlInt(fd int, req uint, v *int) error {
	i := int32(*v)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&i)))
	*v = int(i)
	if e != 0 {
		return e
	}
	return nil
}
