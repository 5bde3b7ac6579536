//go:build !linux

package runtime

import "time"

// fsNow is the time new files are stamped with from now on.
func fsNow() time.Time { return time.Now() }

// birthTime is not read on this platform: repoChanges goes by the
// modification time.
func birthTime(string) (time.Time, bool) { return time.Time{}, false }
