//go:build linux && cgo

package nsinit

/*
#include <stdlib.h>
#include "files.h"
#include "init.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The file server's protocol (files.h), read from its header.
const (
	cmdFiles    = C.CMD_FILES
	fileOpen    = C.FILE_OPEN
	fileMkdir   = C.FILE_MKDIR
	fileList    = C.FILE_LIST
	fileResult  = C.FILE_RESULT
	fileEntry   = C.FILE_ENTRY
	fileEnd     = C.FILE_END
	fileMaxReq  = C.FILE_MAX_REQUEST
	replyFrames = 1 << 20 // a listing's frames, at most: a bound, not an expectation
)

// What a FileClient.Open asks of the server beyond opening.
const (
	// FileSend hands the opened file to the host.
	FileSend = C.FILE_SEND
	// FileRegular refuses anything but a regular file: EISDIR for a
	// directory, EINVAL for anything else, the file never handed over.
	FileRegular = C.FILE_REGULAR
)

// EncodeFiles is the command frame that makes a ready init a file server
// (files.h) instead of running a command: it then opens, makes and lists
// what a FileClient asks, in its sandbox's view and with its credentials,
// until the host closes the control socket.
func EncodeFiles() []byte {
	b, err := EncodeWire(Record{Kind: cmdFiles})
	if err != nil {
		panic(err) // a fixed record
	}
	return b
}

// FileStat is what the server says of a file it opened (or of its
// failure to).
type FileStat struct {
	// Err is the kernel's answer to the operation in the sandbox; the
	// other fields are set only when it is 0.
	Err syscall.Errno
	// Mode is st_mode as the kernel gave it.
	Mode     uint32
	Size     int64
	ModTime  time.Time
	Dev, Ino uint64
	// Path is the file's path in the sandbox's view, as the kernel names
	// the object opened ("" when it could not say).
	Path string
}

// FileMode is Mode as Go's fs.FileMode, as os.Stat would give it.
func (s FileStat) FileMode() fs.FileMode { return FileMode(s.Mode) }

// FileEntry is one entry of a listing, described by an lstat in the
// sandbox.
type FileEntry struct {
	Name    string
	Err     syscall.Errno // of the lstat; the rest is set when 0
	Mode    uint32
	Size    int64
	ModTime time.Time
}

// FileMode converts an st_mode to an fs.FileMode.
func FileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// ErrFileServer is matched by a FileClient's error when the server can no
// longer be used: gone, out of step, or not answering in time. Nothing
// more should be sent to it.
var ErrFileServer = errors.New("nsinit: file server")

// FileClient speaks to a file server over the host's end of its control
// socket. It is not safe for concurrent use: one request, one reply.
type FileClient struct {
	fd int
	// pending are bytes read past the last reply: a listing's frames
	// follow each other without a request between them.
	pending []byte
}

// NewFileClient speaks to the file server at the other end of fd, a
// blocking socket the caller owns.
func NewFileClient(fd int) *FileClient { return &FileClient{fd: fd} }

// Open opens path in the server's view with flags (O_ACCMODE, O_CREAT,
// O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_DIRECTORY, O_PATH) and perm
// (for O_CREAT), as want says. With FileSend the opened file comes back,
// when the open succeeded; the caller closes it.
func (c *FileClient) Open(path string, flags int, perm uint32, want int) (FileStat, *os.File, error) {
	if err := c.send(fileOpen, []uint64{uint64(flags), uint64(perm), uint64(want)}, path); err != nil {
		return FileStat{}, nil, err
	}
	recs, fds, err := c.reply()
	if err != nil {
		return FileStat{}, nil, err
	}
	st, err := result(recs)
	if err == nil && len(recs) != 1 {
		err = fmt.Errorf("%w: a reply of %d records to an open", ErrFileServer, len(recs))
	}
	switch {
	case err == nil && want&FileSend != 0 && st.Err == 0 && len(fds) != 1:
		err = fmt.Errorf("%w: %d fds with an open's reply", ErrFileServer, len(fds))
	case err == nil && (want&FileSend == 0 || st.Err != 0) && len(fds) != 0:
		err = fmt.Errorf("%w: an fd not asked for", ErrFileServer)
	}
	if err != nil {
		closeAll(fds)
		return FileStat{}, nil, err
	}
	var f *os.File
	if len(fds) == 1 {
		f = os.NewFile(uintptr(fds[0]), st.Path)
	}
	return st, f, nil
}

// Mkdir makes the directory path with perm, and returns the kernel's
// answer.
func (c *FileClient) Mkdir(path string, perm uint32) (syscall.Errno, error) {
	if err := c.send(fileMkdir, []uint64{uint64(perm)}, path); err != nil {
		return 0, err
	}
	recs, fds, err := c.reply()
	if err == nil && len(fds) > 0 {
		err = fmt.Errorf("%w: an fd with a mkdir's reply", ErrFileServer)
	}
	if err != nil {
		closeAll(fds)
		return 0, err
	}
	st, err := result(recs)
	return st.Err, err
}

// List lists the directory path (every symlink followed): the directory
// as opened, and its entries, "." and ".." left out.
func (c *FileClient) List(path string) (FileStat, []FileEntry, error) {
	if err := c.send(fileList, nil, path); err != nil {
		return FileStat{}, nil, err
	}
	var dir FileStat
	var entries []FileEntry
	for frame := 0; ; frame++ {
		recs, fds, err := c.reply()
		if err == nil && len(fds) > 0 {
			closeAll(fds)
			err = fmt.Errorf("%w: an fd with a listing", ErrFileServer)
		}
		if err == nil && frame == 0 {
			dir, err = result(recs)
			recs = recs[1:]
		}
		if err == nil && frame >= replyFrames {
			err = fmt.Errorf("%w: a listing of more than %d frames", ErrFileServer, replyFrames)
		}
		if err != nil {
			return FileStat{}, nil, err
		}
		for i, r := range recs {
			switch {
			case r.Kind == fileEntry && len(r.Ints) == 5 && len(r.Blobs) == 1:
				entries = append(entries, FileEntry{
					Name: string(r.Blobs[0]), Err: syscall.Errno(r.Ints[0]), Mode: uint32(r.Ints[1]),
					Size: int64(r.Ints[2]), ModTime: time.Unix(int64(r.Ints[3]), int64(r.Ints[4])),
				})
			case r.Kind == fileEnd && len(r.Ints) == 1 && len(r.Blobs) == 0 && i == len(recs)-1:
				if dir.Err == 0 && r.Ints[0] != 0 {
					dir.Err = syscall.Errno(r.Ints[0])
				}
				if len(c.pending) > 0 {
					c.pending = nil
					return FileStat{}, nil, fmt.Errorf("%w: bytes after a listing's end", ErrFileServer)
				}
				return dir, entries, nil
			default:
				return FileStat{}, nil, fmt.Errorf("%w: a listing's record of kind %#x", ErrFileServer, r.Kind)
			}
		}
	}
}

// result decodes the FILE_RESULT that starts recs.
func result(recs []Record) (FileStat, error) {
	if len(recs) == 0 || recs[0].Kind != fileResult || len(recs[0].Ints) != 7 || len(recs[0].Blobs) != 1 {
		return FileStat{}, fmt.Errorf("%w: a reply without its result", ErrFileServer)
	}
	v := recs[0].Ints
	return FileStat{
		Err: syscall.Errno(v[0]), Mode: uint32(v[1]), Size: int64(v[2]),
		ModTime: time.Unix(int64(v[3]), int64(v[4])), Dev: v[5], Ino: v[6],
		Path: string(recs[0].Blobs[0]),
	}, nil
}

func (c *FileClient) send(kind uint16, ints []uint64, path string) error {
	msg, err := EncodeWire(Record{Kind: kind, Ints: ints, Blobs: [][]byte{[]byte(path)}})
	if err == nil && len(msg) > fileMaxReq {
		err = fmt.Errorf("a request of %d bytes, over %d", len(msg), fileMaxReq)
	}
	if err != nil {
		return err // the caller's path: checked before it gets here
	}
	if err := WriteFrame(c.fd, msg); err != nil {
		return fmt.Errorf("%w: %w", ErrFileServer, err)
	}
	return nil
}

// reply reads one reply frame and the fds that came with it. A reply is
// usually whole in the socket by the time it is read, and one recvmsg
// takes it, header and message; what is read past it (a listing's next
// frame) waits in pending for the next reply.
func (c *FileClient) reply() ([]Record, []int, error) {
	var fds []int
	fail := func(err error) ([]Record, []int, error) {
		closeAll(fds)
		c.pending = nil
		return nil, nil, fmt.Errorf("%w: %w", ErrFileServer, err)
	}
	for len(c.pending) < 4 {
		if err := c.fill(&fds); err != nil {
			return fail(err)
		}
	}
	size := binary.LittleEndian.Uint32(c.pending)
	if size < wireHeader || size > maxFrame {
		return fail(fmt.Errorf("a frame of %d bytes", size))
	}
	end := 4 + int(size)
	for len(c.pending) < end {
		if err := c.fill(&fds); err != nil {
			return fail(err)
		}
	}
	recs, err := DecodeWire(c.pending[4:end])
	if err != nil {
		return fail(err)
	}
	c.pending = c.pending[end:]
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return recs, fds, nil
}

// fill reads what the socket has (a few KiB at most) onto pending, and
// the fds that came with it onto fds.
func (c *FileClient) fill(fds *[]int) error {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(c.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && oobn > 0 {
			var got []int
			got, err = rights(oob[:oobn])
			*fds = append(*fds, got...)
			if err == nil && len(*fds) > 1 {
				err = errors.New("fds where none belong")
			}
		}
		switch {
		case err != nil:
			return err
		case flags&unix.MSG_CTRUNC != 0:
			return errors.New("fds cut off")
		case n == 0:
			return errors.New("the server is gone")
		}
		c.pending = append(c.pending, buf[:n]...)
		return nil
	}
}

// rights are the fds of the SCM_RIGHTS messages in oob.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// checkFilesC runs the server's own check of a request (files_check): the
// fuzzer holds it to memory safety.
func checkFilesC(b []byte) error {
	return checkC(b, func(p *C.uint8_t, n C.size_t, why **C.char) C.int { return C.files_check(p, n, why) })
}

// serveFilesC runs the file server (files_serve) on fd in this process,
// for the tests: it returns when the other end closes.
func serveFilesC(fd int) int { return int(C.files_serve(C.int(fd))) }
