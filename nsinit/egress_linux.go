package nsinit

import (
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// Egress is the sandbox's one way out when the network policy allows
// some destinations: a TCP listener on the sandbox's own loopback (the
// address HTTP_PROXY and friends point at) whose every accepted connection
// is handed, as a file descriptor, to the host's egress proxy over the
// dialer socket (the last fd of the config frame). The proxy then talks to
// the sandboxed client on that very socket: nothing inside the sandbox can
// name the host's proxy, every decision is the host's, and no byte is
// copied by the init.
type Egress struct {
	Port int `json:"port"`
}

// startEgress listens on 127.0.0.1:port inside the sandbox's network
// namespace and hands each connection to the host through dialer. It runs
// on a goroutine the Go runtime places on a thread other than the one that
// confines itself and forks the command.
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
			handToHost(c.(*net.TCPConn), dialer)
		}
	}()
	return nil
}

// handToHost sends c's descriptor to the host and closes the init's copy.
// One byte and one fd per connection; on a SOCK_SEQPACKET socket each send
// is a record of its own.
func handToHost(c *net.TCPConn, dialer int) {
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.Sendmsg(dialer, []byte{'c'}, unix.UnixRights(int(fd)), nil, 0)
	})
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
