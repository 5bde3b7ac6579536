package runtime

import "golang.org/x/sys/unix"

// defaultMemory is half of the host's memory, or 0 when it cannot be read.
func defaultMemory() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n / 2)
}
