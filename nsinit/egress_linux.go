package nsinit

// Egress is the sandbox's one way out when the network policy allows
// some destinations: a TCP listener on the sandbox's own loopback (the
// address HTTP_PROXY and friends point at), created by the init inside
// the sandbox's network namespace and handed to the host (HandoffEgress),
// whose egress proxy accepts on it. Nothing inside the sandbox can name
// the host's proxy, every decision is the host's, and no byte is copied
// by the init.
type Egress struct {
	Port int
}

// wantFds is the number of fds the config frame carries: the cgroup v1
// tasks files, then the handoff socket.
func (c *Config) wantFds() int {
	n := c.CgroupTasks
	if c.HandsOff() {
		n++
	}
	if c.hostRuleset() {
		n++
	}
	return n
}

// hostRuleset reports whether the config frame carries a Landlock
// ruleset begun on the host, as its last fd.
func (c *Config) hostRuleset() bool {
	return c.HostRuleset && c.Landlock != nil && c.Landlock.ABI > 0
}

// HandsOff reports whether the init has anything to hand the host, and so
// whether the config frame carries a handoff socket.
func (c *Config) HandsOff() bool {
	return c.Egress != nil || c.UnixWall != nil || c.Denials != nil || c.Ingress || len(c.Reach) > 0
}
