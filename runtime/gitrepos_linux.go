package runtime

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// fsNow is the clock the filesystems stamp new files with: the coarse
// one, which may lag time.Now by a tick. A file made after fsNow returns
// is never stamped earlier than what it returned.
func fsNow() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().Add(-time.Second)
	}
	return time.Unix(ts.Unix())
}

// hasBirthTime reports whether the filesystem holding p records when
// files were born.
func hasBirthTime(p string) bool {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx)
	return err == nil && stx.Mask&unix.STATX_BTIME != 0
}

// bornSince reports whether the file at p (fi, from Lstat) was created at
// or after t: its birth time (statx), or its modification time where the
// filesystem keeps none.
func bornSince(p string, fi fs.FileInfo, t time.Time) bool {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx)
	if err == nil && stx.Mask&unix.STATX_BTIME != 0 {
		return !time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec)).Before(t)
	}
	return !fi.ModTime().Before(t)
}
