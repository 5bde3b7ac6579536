//go:build linux

package runtime

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// commandPipe makes a pipe between the host and a command. The host's end
// (the read end when hostReads) is nonblocking and in Go's poller, where
// its copier parks; the command's end is a plain blocking file, only ever
// sent to the init and closed. os.Pipe would put both ends in the poller,
// and handing the command's end over (Fd) would take it out again: five
// system calls more per pipe (some 5 us each on this VM), on a command's
// path that has two or three.
func commandPipe(hostReads bool) (host, command *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	h, c := p[1], p[0]
	if hostReads {
		h, c = p[0], p[1]
	}
	// A new pipe has no other status flag to keep.
	if _, err := unix.FcntlInt(uintptr(h), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(h)
		unix.Close(c)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(h), "|host"), os.NewFile(uintptr(c), "|command"), nil
}

// copyOutput copies a command's output pipe r to w, as io.Copy does. With
// paused set, it calls paused whenever r has nothing more to read for now
// (FIONREAD, which Linux names TIOCINQ, says 0): the writer stopped, for a
// while or for good.
//
// A command that fills a read (it writes faster than the copy takes it)
// gets a bigger pipe and bigger reads: with the default 64 KiB pipe, the
// command and the copy hand over to each other every few pages, a
// context switch each, and 100 MB written by cat took 85 ms here against
// 45 ms through a 256 KiB pipe read 256 KiB at a time. Commands that
// write little keep the small pipe and buffer.
func copyOutput(w io.Writer, r *os.File, paused func()) error {
	rc, err := r.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	grown := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if paused != nil {
				pending := 1
				rc.Control(func(fd uintptr) { pending, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
				if pending == 0 {
					paused()
				}
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		if n == len(buf) && !grown {
			grown = true
			if growPipe(rc) {
				defer grownPipes.Add(-1)
				big := bigReads.Get().(*[]byte)
				defer bigReads.Put(big)
				buf = *big
			}
		}
	}
}

// grownPipeSize is the size growPipe asks for, and the size of the reads
// from a grown pipe.
const grownPipeSize = 256 << 10

// maxGrownPipes bounds the pipes grown at once in this process. A user's
// pipes share a budget (fs.pipe-user-pages-soft, 64 MiB by default), past
// which every new pipe of theirs gets two pages, the pipes of the
// commands themselves included (they run as the same user on the host):
// hutch's grown pipes take at most an eighth of the default.
const maxGrownPipes = 32

var (
	grownPipes atomic.Int32
	bigReads   = sync.Pool{New: func() any { b := make([]byte, grownPipeSize); return &b }}
)

// growPipe asks the kernel for a grownPipeSize pipe, within
// maxGrownPipes; it reports whether it got it (then the caller releases
// its place in grownPipes). A refusal (a user over the budget, a smaller
// fs.pipe-max-size) leaves the pipe as it was.
func growPipe(rc syscall.RawConn) bool {
	if grownPipes.Add(1) > maxGrownPipes {
		grownPipes.Add(-1)
		return false
	}
	var err error
	rc.Control(func(fd uintptr) {
		// Never smaller: pages of 64 KiB make a default pipe of 1 MiB.
		var size int
		if size, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil && size >= grownPipeSize {
			err = unix.EEXIST
		}
		if err == nil {
			_, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, grownPipeSize)
		}
	})
	if err != nil {
		grownPipes.Add(-1)
		return false
	}
	return true
}

// nullStdin is the stdin of every command without one: /dev/null, opened
// once (read only, as os/exec opens it) and sent to each command's init,
// which gets its own copy of the descriptor. A failed open (out of fds for
// a moment) is not kept: the next command tries again.
func nullStdin() (*os.File, error) {
	nullIn.mu.Lock()
	defer nullIn.mu.Unlock()
	if nullIn.f == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		nullIn.f = f
	}
	return nullIn.f, nil
}

var nullIn struct {
	mu sync.Mutex
	f  *os.File
}

// StdinPipe returns a pipe connected to the command's standard input when
// it starts, as exec.Cmd.StdinPipe does: close it to give the command
// EOF. Wait closes it after the command ends; once the command no longer
// reads, writes to it fail instead of blocking.
func (c *Cmd) StdinPipe() (io.WriteCloser, error) {
	if c.Stdin != nil {
		return nil, errors.New("hutch: Stdin already set")
	}
	if c.startCalled {
		return nil, errors.New("hutch: StdinPipe after Start")
	}
	r, w := io.Pipe()
	in := &stdinPipe{r: r}
	c.Stdin = in
	c.pipes = append(c.pipes, w, r)
	return w, nil
}

// StdoutPipe returns a pipe connected to the command's standard output
// when it starts, as exec.Cmd.StdoutPipe does: what the command writes
// arrives as it writes it (through the output limit and the leak scanner,
// as for Stdout), and the reader sees EOF once the command and everything
// it started have closed their output. Wait closes it after the command
// ends, so read it to the end before calling Wait.
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) {
	if c.Stdout != nil {
		return nil, errors.New("hutch: Stdout already set")
	}
	if c.startCalled {
		return nil, errors.New("hutch: StdoutPipe after Start")
	}
	r, w := io.Pipe()
	c.Stdout = &outputPipe{w: w}
	c.pipes = append(c.pipes, r, w)
	return r, nil
}

// StderrPipe is StdoutPipe for the command's standard error.
func (c *Cmd) StderrPipe() (io.ReadCloser, error) {
	if c.Stderr != nil {
		return nil, errors.New("hutch: Stderr already set")
	}
	if c.startCalled {
		return nil, errors.New("hutch: StderrPipe after Start")
	}
	r, w := io.Pipe()
	c.Stderr = &outputPipe{w: w}
	c.pipes = append(c.pipes, r, w)
	return r, nil
}

// stdinPipe is Stdin when StdinPipe made it: the copier closes it when the
// command stops reading.
type stdinPipe struct{ r *io.PipeReader }

func (p *stdinPipe) Read(b []byte) (int, error) { return p.r.Read(b) }

// outputPipe is Stdout or Stderr when StdoutPipe or StderrPipe made it:
// the copier closes it when the command's output ends.
type outputPipe struct{ w *io.PipeWriter }

func (p *outputPipe) Write(b []byte) (int, error) { return p.w.Write(b) }

// closePipes closes the pipes' ends, once.
func (c *Cmd) closePipes() {
	for _, p := range c.pipes {
		p.Close()
	}
	c.pipes = nil
}
