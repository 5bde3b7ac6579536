//go:build linux

package runtime

import (
	"bytes"
	"io"
	"os"
	"strings"

	"github.com/hutchbox/hutch/mounts"
	"golang.org/x/sys/unix"
)

// sandboxHostname is the hostname of a sandbox with a UTS namespace of
// its own.
const sandboxHostname = "hutch"

// viewHosts is the /etc/hosts the view shows in place of the one it
// would (the host's, or the root's of an image): that one with the
// sandbox's hostname added on 127.0.1.1, as Debian names a host's own
// name and container runtimes a container's. A command resolving its own
// host name (Java's InetAddress.getLocalHost, Python's socket.getfqdn,
// git's ident, hostname -f) then finds it in the file, as it would on a
// host, instead of asking a DNS server the sandbox cannot reach. It is
// read once, as the Sandbox is made.
//
// None when uts is false (the sandbox keeps the host's hostname), when
// the view shows no regular file /etc/hosts read-only at that path (a
// writable tree, a mask, a listed view without it keep theirs; a symlink
// is not followed), when the file is not readable by all (the command
// then meets its permissions as before), when it already names the
// hostname, or when it is over mounts.MaxFileContent (or holds a NUL).
func viewHosts(spec mounts.Spec, uts bool) []mounts.FileContent {
	const target = "/etc/hosts"
	if !uts {
		return nil
	}
	pl := mounts.Build(spec).Lookup(target)
	if pl.Reach != mounts.OnHost || pl.Writable {
		return nil
	}
	// The file itself, not a link's target, and only one anyone may read:
	// what the host reads here the command sees, and it must not see
	// more than its own permissions give it.
	f, err := os.OpenFile(pl.HostPath, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 || fi.Size() > mounts.MaxFileContent {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, mounts.MaxFileContent+1))
	if err != nil || len(b) > mounts.MaxFileContent || bytes.IndexByte(b, 0) >= 0 || namesHost(b, sandboxHostname) {
		return nil
	}
	content := string(b)
	if content != "" && !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	content += "127.0.1.1\t" + sandboxHostname + "\n"
	if len(content) > mounts.MaxFileContent {
		return nil
	}
	return []mounts.FileContent{{Path: target, Content: content}}
}

// namesHost reports whether the hosts file b maps name (a line's second
// field or later, before a comment).
func namesHost(b []byte, name string) bool {
	for line := range strings.SplitSeq(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		for i := 1; i < len(fields); i++ {
			if fields[i] == name {
				return true
			}
		}
	}
	return false
}
