//go:build !linux

package runtime

import (
	"errors"
	"io"
)

// errPipes: the pipes are Linux's for now; on macOS set Stdin, Stdout
// and Stderr.
var errPipes = errors.New("hutch: StdinPipe, StdoutPipe and StderrPipe are implemented on Linux only; set Stdin, Stdout or Stderr")

// StdinPipe is implemented on Linux only (see the Linux doc).
func (c *Cmd) StdinPipe() (io.WriteCloser, error) { return nil, errPipes }

// StdoutPipe is implemented on Linux only (see the Linux doc).
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) { return nil, errPipes }

// StderrPipe is implemented on Linux only (see the Linux doc).
func (c *Cmd) StderrPipe() (io.ReadCloser, error) { return nil, errPipes }
