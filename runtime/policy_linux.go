//go:build linux

package runtime

import "golang.org/x/sys/unix"

// defaultMemory is half of the host's memory, or 0 when it cannot be read.
func defaultMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) / 2
}
