package landlock

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The UAPI values this package spells out must be the kernel's.
func TestConstantsMatchUAPI(t *testing.T) {
	for _, c := range []struct {
		name      string
		ours, uns uint64
	}{
		{"EXECUTE", accessExecute, unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"WRITE_FILE", accessWriteFile, unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{"READ_FILE", accessReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{"READ_DIR", accessReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{"TRUNCATE", accessTruncate, unix.LANDLOCK_ACCESS_FS_TRUNCATE},
		{"IOCTL_DEV", accessIoctlDev, unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"BIND_TCP", accessBindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP},
		{"CONNECT_TCP", accessConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP},
		{"SCOPE_ABSTRACT", scopeAbstract, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"SCOPE_SIGNAL", scopeSignal, unix.LANDLOCK_SCOPE_SIGNAL},
	} {
		if c.ours != c.uns {
			t.Errorf("%s: %#x here, %#x in x/sys/unix", c.name, c.ours, c.uns)
		}
	}
}
