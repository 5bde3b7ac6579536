//go:build linux

package localapi

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Listen makes the unix socket the API is served on and returns its
// listener, which accepts only connections whose peer (SO_PEERCRED, as
// the kernel recorded it at connect(2)) runs as this process's effective
// uid or one of allowUIDs; any other is logged and closed before a byte
// of it is read. Closing the listener removes the socket, and the
// directory Listen made for it, if nothing else is in it.
//
// The socket's directory is the first wall: it is made mode 0700 when it
// is missing, and an existing one must be a directory of this uid that
// neither group nor others can enter. That also covers the moment
// between bind(2) and the socket's chmod to 0600, when the socket has
// the umask's mode. An existing socket at path is replaced unless a
// server answers on it; anything else there is refused.
func Listen(path string, allowUIDs []int, logger *slog.Logger) (net.Listener, error) {
	if logger == nil {
		logger = slog.Default()
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	euid := os.Geteuid()
	dir := filepath.Dir(path)
	made, err := socketDir(dir, euid)
	if err != nil {
		return nil, err
	}
	// What Listen made, it takes away again on a failure and on Close.
	madeDir := ""
	if made {
		madeDir = dir
	}
	fail := func(err error) (net.Listener, error) {
		if made {
			os.Remove(dir)
		}
		return nil, err
	}
	if err := clearStale(path); err != nil {
		return fail(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fail(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fail(err)
	}
	allowed := append([]int{euid}, allowUIDs...)
	return &peerListener{UnixListener: l, allowed: allowed, log: logger, madeDir: madeDir}, nil
}

// socketDir makes dir 0700 (made: true), or checks that the existing dir
// is as private.
func socketDir(dir string, euid int) (made bool, err error) {
	if err := os.Mkdir(dir, 0o700); err == nil {
		return true, os.Chmod(dir, 0o700) // past the umask, which may have taken more
	} else if !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return false, fmt.Errorf("socket directory %s: not a directory (%v)", dir, fi.Mode().Type())
	case int(st.Uid) != euid:
		return false, fmt.Errorf("socket directory %s: owned by uid %d, not this server's uid %d", dir, st.Uid, euid)
	case fi.Mode().Perm()&0o077 != 0:
		return false, fmt.Errorf("socket directory %s: mode %04o lets group or others in; the socket needs a directory only its owner can enter (chmod 700, or a path in a directory that does not exist yet)", dir, fi.Mode().Perm())
	}
	return false, nil
}

// clearStale removes a socket left at path by a server that is gone.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%v): not replaced", path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s: a server already answers on this socket", path)
	}
	return os.Remove(path)
}

// peerListener is a unix listener that hands on only connections from
// allowed uids.
type peerListener struct {
	*net.UnixListener
	allowed []int
	log     *slog.Logger
	// madeDir is the socket's directory when Listen made it: Close
	// removes it once empty.
	madeDir string
}

// Close stops listening and removes the socket, and the directory Listen
// made for it when nothing else is there.
func (l *peerListener) Close() error {
	err := l.UnixListener.Close()
	if l.madeDir != "" {
		os.Remove(l.madeDir) // fails, as it should, if something else is there
	}
	return err
}

// Accept returns the next connection from an allowed uid.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		cred, err := peerCred(c)
		if err == nil && slices.Contains(l.allowed, int(cred.Uid)) {
			return c, nil
		}
		if err != nil {
			l.log.Warn("hutch serve: connection refused: no peer credentials", "err", err)
		} else {
			l.log.Warn("hutch serve: connection refused: uid not allowed", "uid", cred.Uid, "pid", cred.Pid)
		}
		c.Close()
	}
}

// peerCred is the credentials c's peer had when it connected.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}
