// Package smallfile reads a small file that someone other than hutch may
// have written (a policy file, an approvals rules file, a repository's
// configuration): a regular file only, anything else refused unread, and
// no more than a bound, counted in what is read, since a file may grow
// after it was looked at.
package smallfile

import (
	"fmt"
	"io"
	"os"
)

// Read reads f, which the caller opened without blocking (O_NONBLOCK, so
// that a FIFO cannot hold it) and closes. A file that is not regular (a
// FIFO, a device, a directory) is refused unread, and one of more than max
// bytes is refused; what, the kind of file the caller reads ("a policy
// file"), is what the refusals call it.
func Read(f *os.File, max int64, what string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v): %s is refused unread", fi.Mode().Type(), what)
	}
	// One byte past the limit tells a file that grew since the Stat.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("more than %d bytes, the most %s may have", max, what)
	}
	return b, nil
}
