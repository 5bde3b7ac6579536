// Package netns owns the sandbox's network: what is brought up in its
// network namespace, and the host-side egress proxy through which, and only
// through which, a command may reach the outside.
//
// The default is no network at all: a fresh namespace whose only interface
// is loopback, up, so programs that talk to themselves over 127.0.0.1 work
// while nothing of the host's network stack (its interfaces, its loopback
// listeners, its abstract unix sockets) is reachable.
//
// With an allow-list, the namespace still has no route anywhere; the
// sandbox's init hands every connection made to its loopback proxy port to
// a Proxy on the host, which speaks HTTP CONNECT, plain HTTP and SOCKS5,
// matches the destination against Rules (exact names, *.wildcards, ports,
// package-manager Presets), refuses loopback, private, link-local, CGNAT
// and cloud-metadata addresses on the address it actually dials, and
// reports every attempt as an Event.
package netns
