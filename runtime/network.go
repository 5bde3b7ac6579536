//go:build linux

package runtime

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
)

// egressPort is where, inside a sandbox whose network policy allows some
// destinations, the bridge to the host's proxy listens (on 127.0.0.1; the
// sandbox has a network namespace of its own, so the port is never taken).
const egressPort = 3128

// connListener is the host's end of an init's egress bridge: a net.Listener
// whose connections are the sandboxed clients' own TCP sockets, accepted
// by the init on the sandbox's loopback and handed over as descriptors,
// one per SOCK_SEQPACKET record (see nsinit.Egress). The proxy serves it
// like any listener and talks to the client directly.
type connListener struct {
	sock      *os.File // nonblocking: reads park in the runtime poller
	closeOnce sync.Once
}

// newEgressPair returns the host's listener and the init's end of a fresh
// dialer socket pair.
func newEgressPair() (*connListener, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return &connListener{sock: os.NewFile(uintptr(fds[0]), "egress")}, os.NewFile(uintptr(fds[1]), "egress-init"), nil
}

func (l *connListener) Accept() (net.Conn, error) {
	rc, err := l.sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	for {
		var fds []int
		var rerr error
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(4))
		err = rc.Read(func(fd uintptr) bool {
			var n, oobn int
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if errors.Is(rerr, unix.EAGAIN) {
				return false
			}
			if rerr == nil && n == 0 && oobn == 0 {
				rerr = net.ErrClosed // the init is gone
			}
			if rerr == nil {
				fds = parseRights(oob[:oobn])
			}
			return true
		})
		if err != nil {
			return nil, net.ErrClosed
		}
		if rerr != nil {
			return nil, rerr
		}
		if len(fds) != 1 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			continue // not what the bridge sends: ignore the record
		}
		f := os.NewFile(uintptr(fds[0]), "egress-conn")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			continue
		}
		return c, nil
	}
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func (l *connListener) Close() error {
	var err error
	l.closeOnce.Do(func() { err = l.sock.Close() })
	return err
}

func (l *connListener) Addr() net.Addr { return &net.UnixAddr{Name: "hutch-egress", Net: "unixpacket"} }

// setupEnv makes the base environment of every command: the clean one,
// HOME and TMPDIR in the private temporary directory at LevelLandlock,
// the proxy variables with NetworkAllow, and the policy's Env over all.
func (sb *Sandbox) setupEnv() {
	p := &sb.policy
	if sb.level == LevelLandlock {
		sb.env = mergeEnv(baseEnvAt(p, filepath.Join(sb.tmpDir, "home")), []string{"TMPDIR=" + sb.tmpDir})
		sb.env = mergeEnv(sb.env, p.Env)
	} else {
		sb.env = baseEnv(p)
	}
	if p.Network == NetworkHost {
		// Info, not Warn: the caller chose it, and every Result says it.
		p.logger().Info("hutch: Network is host: commands share the host's network, with no isolation")
	}
	if p.Network == NetworkAllow {
		// The policy's own Env still has the last word.
		sb.env = mergeEnv(mergeEnv(sb.env, proxyEnv(egressPort)), p.Env)
	}
}

// startEgress starts the host side of an init's egress: a proxy of its
// own (so its events are this command's) serving the connections the
// init's bridge hands over.
func (in *sandboxInit) startEgress(sb *Sandbox, l *connListener) error {
	px, err := netns.NewProxy(netns.ProxyConfig{
		Rules:      sb.netRules,
		AllowLocal: sb.policy.AllowLocal,
		Logger:     in.log,
		OnEvent: func(e netns.Event) {
			in.netMu.Lock()
			in.netEvents = append(in.netEvents, e)
			in.netMu.Unlock()
		},
	})
	if err != nil {
		l.Close()
		return err
	}
	in.proxy = px
	go func() {
		if err := px.Serve(l); err != nil {
			in.log.Debug("hutch: egress proxy", "err", err)
		}
		l.Close()
	}()
	return nil
}

// networkEvents returns what the init's proxy saw so far.
func (in *sandboxInit) networkEvents() []netns.Event {
	in.netMu.Lock()
	defer in.netMu.Unlock()
	return slices.Clone(in.netEvents)
}
