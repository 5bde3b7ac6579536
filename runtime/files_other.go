//go:build !linux

package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// The file door resolves paths against the view's mount plan, which only
// Linux sandboxes have; elsewhere each operation fails, saying so.
func unsupportedFiles(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the file operations are implemented for Linux sandboxes only, not on %s", errors.ErrUnsupported, runtime.GOOS)}
}

// ReadFile is not implemented on this platform.
func (sb *Sandbox) ReadFile(name string, opt ReadOptions) (*FileContent, error) {
	return nil, unsupportedFiles("read", name)
}

// WriteFile is not implemented on this platform.
func (sb *Sandbox) WriteFile(name string, data []byte, opt WriteOptions) (*FileInfo, error) {
	return nil, unsupportedFiles("write", name)
}

// ReadDir is not implemented on this platform.
func (sb *Sandbox) ReadDir(name string) ([]FileInfo, error) {
	return nil, unsupportedFiles("readdir", name)
}

// OpenForSend is not implemented on this platform.
func (sb *Sandbox) OpenForSend(name string, maxBytes int64) (*os.File, *FileInfo, error) {
	return nil, nil, unsupportedFiles("send", name)
}

// Stat is not implemented on this platform.
func (sb *Sandbox) Stat(name string) (*FileInfo, error) {
	return nil, unsupportedFiles("stat", name)
}
