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
// reports every attempt as an Event: refused by the policy (403), or
// allowed and failed (a name that does not resolve: 502).
//
// It also owns the unix-socket wall: neither a read-only view nor a
// network namespace stops connect(2) on a host's socket file. Where
// Landlock cannot guard pathname sockets (before ABI 9), every connect of
// the command is handed to the host by a seccomp listener, and UnixWall
// answers it on the objects it was given, never on a path it re-resolves
// (unixwall_linux.go).
package netns
