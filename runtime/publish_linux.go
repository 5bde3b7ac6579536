//go:build linux

package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
)

// ingressTimeout bounds the wait for the init's socket and for the
// connect to the sandbox's port (a full accept queue drops SYNs).
const ingressTimeout = 10 * time.Second

// ingressSource makes TCP sockets in one init's network namespace: each
// message on the handoff socket has the init answer with a fresh socket
// (nsinit.HandoffIngress), which the host connects to the published port.
// The init copies no byte; the host alone names the destination.
type ingressSource struct {
	ho *handoff
	// mu keeps one request out at a time, so each answer is its own.
	mu      sync.Mutex
	answers chan int
	// gone is closed when the init's handoff socket ends.
	gone chan struct{}

	evMu      sync.Mutex
	forwarded []*netns.Forwarding
}

func newIngressSource(ho *handoff) *ingressSource {
	return &ingressSource{ho: ho, answers: make(chan int, 1), gone: make(chan struct{})}
}

// answer takes the init's answer to a request: one socket, or none when
// the init could not make one (-1).
func (s *ingressSource) answer(fds []int) {
	fd := -1
	if len(fds) == 1 {
		fd = fds[0]
	} else {
		closeFds(fds)
	}
	select {
	case s.answers <- fd:
	default: // an answer nobody waits for any more
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// dial connects to 127.0.0.1:port in the init's network namespace.
func (s *ingressSource) dial(port int) (netns.HalfCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.ho.sock.Write([]byte{1}); err != nil {
		return nil, errors.New("the sandbox's command has ended")
	}
	timer := time.NewTimer(ingressTimeout)
	defer timer.Stop()
	var fd int
	select {
	case fd = <-s.answers:
	case <-s.gone:
		return nil, errors.New("the sandbox's command has ended")
	case <-timer.C:
		return nil, errors.New("the sandbox's init did not answer")
	}
	if fd < 0 {
		return nil, errors.New("the sandbox's init could not make a socket")
	}
	f := os.NewFile(uintptr(fd), "ingress")
	defer f.Close()
	// What the init handed over must be what it was asked for: a TCP
	// socket, not yet connected, which the host connects to the one port.
	domain, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err := errors.Join(err1, err2); err != nil || domain != unix.AF_INET || typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("the sandbox's init answered with something else than a TCP socket (%v)", err)
	}
	tv := unix.NsecToTimeval(int64(ingressTimeout))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, fmt.Errorf("connect to 127.0.0.1:%d in the sandbox: %w", port, err)
	}
	zero := unix.Timeval{}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &zero); err != nil {
		return nil, err
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("the sandbox's socket is not TCP")
	}
	return tc, nil
}

// track follows a connection forwarded to this init's command.
func (s *ingressSource) track(f *netns.Forwarding) {
	s.evMu.Lock()
	s.forwarded = append(s.forwarded, f)
	s.evMu.Unlock()
}

// recorded are the events of the connections forwarded to the command,
// which has ended: each once the sandbox's side of it has ended too (at
// once, its sockets gone with the sandbox), or as counted by
// ingressTimeout.
func (s *ingressSource) recorded() []netns.IngressEvent {
	if s == nil {
		return nil
	}
	s.evMu.Lock()
	forwarded := slices.Clone(s.forwarded)
	s.evMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ingressTimeout)
	defer cancel()
	var events []netns.IngressEvent
	for _, f := range forwarded {
		select {
		case <-f.SandboxEnded():
		case <-ctx.Done():
		}
		events = append(events, f.Event())
	}
	return events
}

// publisher holds a Sandbox's published ports (Policy.Publish) from New
// to Close, and forwards each connection to the command started last
// among those running.
type publisher struct {
	mu        sync.Mutex
	running   []*ingressSource // newest last
	ingresses []*netns.Ingress
	published []Publish
}

// publish opens the host listeners of Policy.Publish.
func (sb *Sandbox) publish() error {
	if len(sb.policy.Publish) == 0 {
		return nil
	}
	if !slices.Contains(sb.namespaceLayers(), LayerNetNS) {
		return &LevelError{Need: LevelNamespaces, Have: sb.level, Reasons: []string{"Publish needs a network namespace of the sandbox's own"}}
	}
	pub := &publisher{}
	for i, p := range sb.policy.Publish {
		ip := p.HostIP
		if ip == "" {
			ip = "127.0.0.1"
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p.HostPort)))
		if err != nil {
			pub.close()
			return &SetupError{Layer: LayerNetNS, Op: fmt.Sprintf("publish Publish[%d] %s", i, p), Err: err}
		}
		got := p
		got.HostIP, got.Protocol = ip, "tcp"
		got.HostPort = l.Addr().(*net.TCPAddr).Port
		pub.published = append(pub.published, got)
		pub.ingresses = append(pub.ingresses, netns.NewIngress(l, p.Port, pub.dial, nil))
	}
	sb.pub = pub
	return nil
}

// dial is the Ingress's way into the sandbox: through the command
// started last among those running.
func (p *publisher) dial(port int) (netns.HalfCloser, func(*netns.Forwarding), error) {
	p.mu.Lock()
	var s *ingressSource
	if n := len(p.running); n > 0 {
		s = p.running[n-1]
	}
	p.mu.Unlock()
	if s == nil {
		return nil, nil, errors.New("no command runs in the sandbox")
	}
	c, err := s.dial(port)
	return c, s.track, err
}

func (p *publisher) close() {
	for _, in := range p.ingresses {
		in.Close()
	}
}

// Published reports the ports published on the host, host ports chosen
// (Policy.Publish with HostPort 0) filled in; nil when none.
func (sb *Sandbox) Published() []Publish {
	if sb.pub == nil {
		return nil
	}
	return slices.Clone(sb.pub.published)
}

// ingressRunning has connections to the published ports go to in's
// command from now on, until ingressEnded.
func (sb *Sandbox) ingressRunning(in *sandboxInit) {
	if sb.pub == nil || in.ingress == nil {
		return
	}
	sb.pub.mu.Lock()
	sb.pub.running = append(sb.pub.running, in.ingress)
	sb.pub.mu.Unlock()
}

func (sb *Sandbox) ingressEnded(in *sandboxInit) {
	if sb.pub == nil || in.ingress == nil {
		return
	}
	sb.pub.mu.Lock()
	sb.pub.running = slices.DeleteFunc(sb.pub.running, func(s *ingressSource) bool { return s == in.ingress })
	sb.pub.mu.Unlock()
}

func (sb *Sandbox) closePublished() {
	if sb.pub != nil {
		sb.pub.close()
	}
}

// reachPorts are the ports of Policy.Reach, for the init to listen on.
func (sb *Sandbox) reachPorts() []int {
	var ports []int
	for _, r := range sb.policy.Reach {
		ports = append(ports, r.Port)
	}
	return ports
}

// reachOf says whether the listener fd the init handed over is one of
// Policy.Reach's (by the port it is bound to), and where it leads.
func (in *sandboxInit) reachOf(fd int) (addr string, port int, ok bool) {
	if len(in.reach) == 0 {
		return "", 0, false
	}
	sa, err := unix.Getsockname(fd)
	a, isInet := sa.(*unix.SockaddrInet4)
	if err != nil || !isInet {
		return "", 0, false
	}
	addr, ok = in.reach[a.Port]
	return addr, a.Port, ok
}

// serveReach forwards each connection the command makes to its reached
// port to the one host service named for it, until the init is gone.
func (in *sandboxInit) serveReach(fd, port int, addr string) {
	f := os.NewFile(uintptr(fd), "reach")
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return
	}
	dial := func(int) (netns.HalfCloser, func(*netns.Forwarding), error) {
		c, err := net.DialTimeout("tcp", addr, ingressTimeout)
		if err != nil {
			return nil, nil, err
		}
		return c.(*net.TCPConn), nil, nil
	}
	in.reachMu.Lock()
	in.reachers = append(in.reachers, netns.NewIngress(l, port, dial, nil))
	in.reachMu.Unlock()
}

// closeReach ends the forwarding of reached ports: the listeners held
// here would otherwise keep the sandbox's network namespace alive.
func (in *sandboxInit) closeReach() {
	in.reachMu.Lock()
	defer in.reachMu.Unlock()
	for _, r := range in.reachers {
		r.Close()
	}
	in.reachers = nil
}
