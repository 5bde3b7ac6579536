//go:build linux

package hostprobe

import "testing"

func TestProcMasked(t *testing.T) {
	const (
		root    = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		proc    = "23 22 0:21 / /proc rw,nosuid shared:2 - proc proc rw\n"
		autofs  = "24 23 0:22 / /proc/sys/fs/binfmt_misc rw shared:3 - autofs systemd-1 rw\n"
		binfmt  = "25 24 0:23 / /proc/sys/fs/binfmt_misc rw shared:4 - binfmt_misc binfmt_misc rw\n"
		nfsd    = "26 23 0:24 / /proc/fs/nfsd rw shared:5 - nfsd nfsd rw\n"
		kcore   = "27 23 0:25 / /proc/kcore rw,nosuid - tmpfs tmpfs rw\n"
		sysBind = "28 23 0:21 /sys /proc/sys ro,nosuid - proc proc rw\n"
	)
	for _, tc := range []struct {
		name   string
		table  string
		masked bool
	}{
		{"plain host", root + proc, false},
		{"systemd host", root + proc + autofs + binfmt + nfsd, false},
		{"docker masks", root + proc + kcore, true},
		{"docker read-only /proc/sys", root + proc + sysBind, true},
	} {
		if got := procMasked([]byte(tc.table)) != nil; got != tc.masked {
			t.Errorf("%s: masked = %v, want %v", tc.name, got, tc.masked)
		}
	}
}
