//go:build !linux

package runtime

import (
	"io/fs"
	"time"
)

// fsNow is the time new files are stamped with from now on.
func fsNow() time.Time { return time.Now() }

// bornSince reports whether the file at p (fi, from Lstat) was modified,
// and so possibly created, at or after t.
func bornSince(p string, fi fs.FileInfo, t time.Time) bool {
	return !fi.ModTime().Before(t)
}

// hasBirthTime reports whether birth times are known here: they are not
// read on this platform.
func hasBirthTime(string) bool { return false }
