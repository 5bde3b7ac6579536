//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
)

// handoff is the host's end of an init's handoff socket (see
// nsinit.HandoffEgress): the init hands over, once each, the egress
// listener it made in the sandbox's network namespace and the unix wall's
// notification listener with the trees it allows; the host serves them
// for the sandbox's life. Its reads park in the runtime poller.
type handoff struct {
	sock *os.File
}

// newHandoff returns the host's end and the init's end of a fresh
// handoff socket pair.
func newHandoff() (*handoff, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return &handoff{sock: os.NewFile(uintptr(fds[0]), "handoff")}, os.NewFile(uintptr(fds[1]), "handoff-init"), nil
}

// next reads one record and its fds; io.EOF once the init is gone.
func (h *handoff) next() (nsinit.Record, []int, error) {
	rc, err := h.sock.SyscallConn()
	if err != nil {
		return nsinit.Record{}, nil, err
	}
	buf := make([]byte, 8192)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	var fds []int
	if err == nil {
		fds = parseRights(oob[:oobn])
	}
	if err == nil && n == 0 && oobn == 0 {
		err = io.EOF
	}
	if err != nil {
		return nsinit.Record{}, fds, err
	}
	recs, err := nsinit.DecodeWire(buf[:n])
	if err != nil || len(recs) != 1 {
		return nsinit.Record{}, fds, fmt.Errorf("hutch: handoff record: %v", err)
	}
	return recs[0], fds, nil
}

// serveHandoff serves what the init hands over until it is gone. A record
// that is not what the init sends is dropped with its fds.
func (in *sandboxInit) serveHandoff(h *handoff) {
	defer h.sock.Close()
	defer in.closeReach()
	if in.ingress != nil {
		defer close(in.ingress.gone)
	}
	var roots []netns.WallRoot
	defer func() {
		for _, r := range roots {
			unix.Close(r.Fd)
		}
	}()
	for {
		rec, fds, err := h.next()
		if err != nil {
			closeFds(fds)
			if !errors.Is(err, io.EOF) {
				in.log.Debug("hutch: handoff", "err", err)
				continue
			}
			return
		}
		if rec.Kind == nsinit.HandoffIngress && in.ingress != nil {
			in.ingress.answer(fds)
			continue
		}
		if len(fds) != 1 {
			closeFds(fds)
			continue
		}
		switch rec.Kind {
		case nsinit.HandoffEgress:
			if addr, port, ok := in.reachOf(fds[0]); ok {
				in.serveReach(fds[0], port, addr)
				continue
			}
			in.serveEgress(fds[0])
		case nsinit.HandoffWallRoot:
			roots = append(roots, netns.WallRoot{Path: string(rec.Blob(0)), Fd: fds[0]})
		case nsinit.HandoffWall:
			_, err := netns.ServeUnixWall(fds[0], roots, in.wall) // owns them now
			roots = nil
			if err != nil {
				in.log.Warn("hutch: unix wall", "err", err)
			}
		default:
			closeFds(fds)
		}
	}
}

// serveEgress has the init's proxy accept on the egress listener fd.
func (in *sandboxInit) serveEgress(fd int) {
	f := os.NewFile(uintptr(fd), "egress")
	l, err := net.FileListener(f)
	f.Close()
	if err != nil || in.proxy == nil {
		if l != nil {
			l.Close()
		}
		return
	}
	go func() {
		if err := in.proxy.Serve(l); err != nil {
			in.log.Debug("hutch: egress proxy", "err", err)
		}
		l.Close()
	}()
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

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// tmpEnv points the temporary-directory variables at dir.
func tmpEnv(dir string) []string { return []string{"TMPDIR=" + dir, "TMP=" + dir, "TEMP=" + dir} }

// setupEnv makes the base environment of every command: the clean one,
// HOME in Policy.Home, or else in the private /tmp (the private temporary
// directory at LevelLandlock, where TMPDIR goes too),
// the proxy variables with NetworkAllow, and the policy's Env over all.
func (sb *Sandbox) setupEnv() {
	p := &sb.policy
	home := p.Home
	switch {
	case home != "":
	case sb.level == LevelLandlock:
		home = filepath.Join(sb.tmpDir, "home")
	default:
		home = Home
	}
	sb.env = baseEnvAt(p, home)
	if sb.level == LevelLandlock {
		// The host's /tmp is not private at this level.
		sb.env = mergeEnv(mergeEnv(sb.env, tmpEnv(sb.tmpDir)), p.Env)
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

// startEgress creates the init's egress proxy (its own, so that its
// events are this command's); it serves the listener the init hands over.
func (in *sandboxInit) startEgress(sb *Sandbox) error {
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
		return err
	}
	in.proxy = px
	return nil
}

// networkEvents returns what the init's proxy saw so far.
func (in *sandboxInit) networkEvents() []netns.Event {
	in.netMu.Lock()
	defer in.netMu.Unlock()
	return slices.Clone(in.netEvents)
}
