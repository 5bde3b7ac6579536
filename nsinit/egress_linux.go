package nsinit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Egress is the sandbox's one way out when the network policy allows
// some destinations: a TCP listener on the sandbox's own loopback (the
// address HTTP_PROXY and friends point at), created by the init inside
// the sandbox's network namespace and handed to the host (HandoffEgress),
// whose egress proxy accepts on it. Nothing inside the sandbox can name
// the host's proxy, every decision is the host's, and no byte is copied
// by the init.
type Egress struct {
	Port int `json:"port"`
}

// The handoff socket (the config frame's last fd when the sandbox has an
// egress or a unix wall) is a SOCK_SEQPACKET socket on which the init
// hands the host, once each, the sandbox-side ends of what the host serves
// for the sandbox: one wire record per message, with its fds.
const (
	// HandoffEgress carries the egress listener (fd).
	HandoffEgress = 1
	// HandoffWallRoot carries one tree of the sandbox's view in which the
	// unix wall lets sockets be reached: its path there (blob) and an
	// O_PATH fd of it. All come before HandoffWall.
	HandoffWallRoot = 2
	// HandoffWall carries the unix wall's seccomp notification listener
	// (fd): from then on the host answers the command's connect(2) calls.
	HandoffWall = 3
)

// handOff sends one record and its fds to the host.
func handOff(sock int, r Record, fds ...int) error {
	b, err := EncodeWire(r)
	if err != nil {
		return err
	}
	if err := unix.Sendmsg(sock, b, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("hand off to the host: %w", err)
	}
	return nil
}

// startEgress listens on 127.0.0.1:port inside the sandbox's network
// namespace and hands the listener to the host.
func startEgress(port, handoff int) error {
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(l)
	if err := unix.Bind(l, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err := unix.Listen(l, unix.SOMAXCONN); err != nil {
		return err
	}
	return handOff(handoff, Record{Kind: HandoffEgress}, l)
}

// handOffUnixWall hands the host the wall's listener and the trees of this
// view it allows, opened here (the private /tmp and /dev/shm exist only in
// this view). A tree that does not exist is left out.
func handOffUnixWall(handoff, listener int, allowed []string) error {
	defer unix.Close(listener)
	for _, p := range allowed {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		err = handOff(handoff, Record{Kind: HandoffWallRoot, Blobs: [][]byte{[]byte(p)}}, fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return handOff(handoff, Record{Kind: HandoffWall}, listener)
}

// wantFds is the number of fds the config frame carries: the cgroup v1
// tasks files, then the handoff socket.
func (c *Config) wantFds() int {
	n := c.CgroupTasks
	if c.HandsOff() {
		n++
	}
	return n
}

// HandsOff reports whether the init has anything to hand the host, and so
// whether the config frame carries a handoff socket.
func (c *Config) HandsOff() bool { return c.Egress != nil || c.UnixWall != nil }
