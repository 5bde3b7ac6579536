package nsinit

import (
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/netns"
)

// Egress is the sandbox's one way out when the network policy allows
// some destinations: a TCP listener on the sandbox's own loopback (the
// address HTTP_PROXY and friends point at) whose every connection is
// handed to the host's egress proxy as one end of a fresh socketpair, sent
// over the dialer socket (the last fd of the config frame). Nothing inside
// the sandbox can name the host's proxy, and every decision is the host's.
type Egress struct {
	Port int `json:"port"`
}

// startEgress listens on 127.0.0.1:port inside the sandbox's network
// namespace and bridges each connection to the host through dialer. It
// runs on goroutines the Go runtime places on threads other than the one
// that confines itself and forks the command.
func startEgress(port, dialer int) error {
	l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		unix.Close(dialer)
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go bridgeToHost(c.(*net.TCPConn), dialer)
		}
	}()
	return nil
}

func bridgeToHost(c *net.TCPConn, dialer int) {
	defer c.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	// One byte and one fd per connection; on a SOCK_SEQPACKET socket each
	// send is a record of its own, so concurrent bridges never interleave.
	err = unix.Sendmsg(dialer, []byte{'c'}, unix.UnixRights(pair[1]), nil, 0)
	unix.Close(pair[1])
	if err != nil {
		unix.Close(pair[0])
		return
	}
	f := os.NewFile(uintptr(pair[0]), "egress")
	up, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	defer up.Close()
	netns.Splice(c, up.(*net.UnixConn))
}

// wantFds is the number of fds the config frame carries: the cgroup v1
// tasks files, then the egress dialer.
func (c *Config) wantFds() int {
	n := c.CgroupTasks
	if c.Egress != nil {
		n++
	}
	return n
}
