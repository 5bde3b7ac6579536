package policyfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvents are the names in a directory whose content is complete anew:
// a file closed after a write (IN_CLOSE_WRITE), or one renamed or linked
// into place (IN_MOVED_TO, IN_CREATE of what has no writer). A write in
// progress is no event: its writer's close is.
type dirEvents struct {
	// file reads the inotify instance in the runtime's poller (its fd is
	// non-blocking): Close wakes the read.
	file  *os.File
	names chan string
	errs  chan error
}

func watchDir(dir string) (*dirEvents, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil, err
	}
	e := &dirEvents{file: os.NewFile(uintptr(fd), "inotify"), names: make(chan string, 16), errs: make(chan error, 1)}
	go e.read(dir)
	return e, nil
}

func (e *dirEvents) read(dir string) {
	defer close(e.names)
	buf := make([]byte, 64<<10)
	for {
		n, err := e.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				e.errs <- err
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off = end
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				e.errs <- errors.New("inotify queue overflow")
				continue
			}
			if len(name) > 0 {
				e.names <- filepath.Join(dir, string(name))
			}
		}
	}
}

func (e *dirEvents) close() { e.file.Close() }
