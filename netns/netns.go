// Package netns owns the sandbox's network namespace: what is brought up in
// it and how the command reaches (or does not reach) anything outside.
//
// The default is no network at all: a fresh namespace whose only interface
// is loopback, up, so programs that talk to themselves over 127.0.0.1 work
// while nothing of the host's network stack (its interfaces, its loopback
// listeners, its abstract unix sockets) is reachable.
package netns

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// LoopbackUp brings up "lo" in the calling thread's network namespace. In a
// fresh namespace lo is down; bringing it up needs CAP_NET_ADMIN in the
// namespace's owning user namespace, so EPERM here means a user namespace
// without capabilities (for example under AppArmor's userns restriction).
func LoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns: find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns: bring lo up: %w", err)
	}
	return nil
}
