package runtime

import (
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

// birthTime is when the file at p was created, where its filesystem
// records it (statx STATX_BTIME).
func birthTime(p string) (time.Time, bool) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx)
	if err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec)), true
}
