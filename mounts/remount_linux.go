package mounts

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernels before 5.12 have no mount_setattr(2). There, attributes are
// applied after a tree is attached, by remounting each of its mounts with
// MS_REMOUNT|MS_BIND: one mount at a time, found through mountinfo, and
// keeping each mount's own flags, which the kernel locks in a user
// namespace and refuses to have cleared.

// noSetattr is set once mount_setattr has returned ENOSYS.
var noSetattr bool

// setattr applies attrs to the mount tree at fd (recursively if asked)
// with mount_setattr. It reports false, with no error, when the kernel
// lacks the call and the caller must remount after attaching instead.
func setattr(fd int, attrs uint64, recursive bool) (bool, error) {
	if noSetattr {
		return false, nil
	}
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(fd, "", flags, &unix.MountAttr{Attr_set: attrs})
	if errors.Is(err, unix.ENOSYS) {
		noSetattr = true
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mount_setattr: %w", err)
	}
	return true, nil
}

// procSelf is where this process's /proc/self is while the new root is
// built: the host's procfs, below the old root.
const procSelf = "/.oldroot/proc/self"

// remountAttached applies attrs to the mount whose root fd refers to and,
// if recursive, to every mount below it, by remounting through paths
// taken from mountinfo.
func remountAttached(fd int, attrs uint64, recursive bool) error {
	top, err := os.Readlink(fmt.Sprintf("%s/fd/%d", procSelf, fd))
	if err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	mounts, err := readMountinfo()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.point != top && !(recursive && Within(m.point, top)) {
			continue
		}
		flags := uintptr(unix.MS_REMOUNT|unix.MS_BIND) | m.flags
		if attrs&unix.MOUNT_ATTR_RDONLY != 0 {
			flags |= unix.MS_RDONLY
		}
		if attrs&unix.MOUNT_ATTR_NOSUID != 0 {
			flags |= unix.MS_NOSUID
		}
		if attrs&unix.MOUNT_ATTR_NODEV != 0 {
			flags |= unix.MS_NODEV
		}
		if attrs&unix.MOUNT_ATTR_NOEXEC != 0 {
			flags |= unix.MS_NOEXEC
		}
		if err := unix.Mount("", m.point, "", flags, ""); err != nil {
			return fmt.Errorf("remount %s: %w", m.point, err)
		}
	}
	return nil
}

type mountEntry struct {
	point string
	flags uintptr // the per-mount flags it has now
}

// readMountinfo lists this process's mounts, parents before children.
func readMountinfo() ([]mountEntry, error) {
	f, err := os.Open(procSelf + "/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("remount: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		e := mountEntry{point: unescape(fields[4])}
		for _, o := range strings.Split(fields[5], ",") {
			switch o {
			case "ro":
				e.flags |= unix.MS_RDONLY
			case "nosuid":
				e.flags |= unix.MS_NOSUID
			case "nodev":
				e.flags |= unix.MS_NODEV
			case "noexec":
				e.flags |= unix.MS_NOEXEC
			case "noatime":
				e.flags |= unix.MS_NOATIME
			case "nodiratime":
				e.flags |= unix.MS_NODIRATIME
			case "relatime":
				e.flags |= unix.MS_RELATIME
			case "strictatime":
				e.flags |= unix.MS_STRICTATIME
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
