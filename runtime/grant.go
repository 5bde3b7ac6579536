package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
)

// A Grant is what one call may be given beyond its Sandbox's policy, as
// permission tags: the network through the egress proxy (@network) to
// some domains (domain:example.com, domain:*.example.com, domain:* for
// any) or package registries (package-manager:python), the host's network
// (@host-network), writes to more trees (write:/path), commits in the
// repositories (@git-write). Commands get nothing of it unless their Cmd
// asks (Cmd.Grant), and a Cmd may ask only for what its Sandbox's
// Policy.Grantable covers; Sandbox.Narrow makes a Sandbox whose
// Grantable is a part of its parent's, for a sub-agent. So permissions
// only ever shrink on the way down.
type Grant struct {
	// Network: the egress proxy, to Domains and the PackageManagers'
	// registries only (neither: nothing is reachable, as Policy's
	// NetworkAllow with an empty list).
	Network         bool     `json:"network,omitempty"`
	Domains         []string `json:"domains,omitempty"`
	PackageManagers []string `json:"package_managers,omitempty"`
	// HostNetwork: no network isolation at all; it covers Network and
	// every domain.
	HostNetwork bool `json:"host_network,omitempty"`
	// Writable are trees of the host made writable, each as
	// Policy.Writable takes it.
	Writable []string `json:"writable,omitempty"`
	// GitWrite: Policy.AllowGitWrite.
	GitWrite bool `json:"git_write,omitempty"`
}

// Tags lists g as permission tags, in a fixed order.
func (g Grant) Tags() []string {
	var tags []string
	if g.HostNetwork {
		tags = append(tags, "@host-network")
	}
	if g.Network {
		tags = append(tags, "@network")
	}
	for _, d := range g.Domains {
		tags = append(tags, "domain:"+d)
	}
	for _, pm := range g.PackageManagers {
		tags = append(tags, "package-manager:"+pm)
	}
	for _, w := range g.Writable {
		tags = append(tags, "write:"+w)
	}
	if g.GitWrite {
		tags = append(tags, "@git-write")
	}
	return tags
}

// ParseGrant reads permission tags, as Tags writes them, into a Grant:
// "@network", "@host-network", "@git-write", "domain:NAME",
// "package-manager:NAME" and "write:/PATH". A domain or a package
// manager brings "@network" with it. An unknown or empty tag is an error
// naming it; what the tags grant is checked when a command asks for it.
func ParseGrant(tags []string) (Grant, error) {
	var g Grant
	for _, tag := range tags {
		kind, arg, hasArg := strings.Cut(tag, ":")
		switch {
		case tag == "@network":
			g.Network = true
		case tag == "@host-network":
			g.HostNetwork = true
		case tag == "@git-write":
			g.GitWrite = true
		case hasArg && arg != "" && kind == "domain":
			g.Network, g.Domains = true, append(g.Domains, arg)
		case hasArg && arg != "" && kind == "package-manager":
			g.Network, g.PackageManagers = true, append(g.PackageManagers, arg)
		case hasArg && arg != "" && kind == "write":
			g.Writable = append(g.Writable, arg)
		default:
			return Grant{}, fmt.Errorf("%q: not a permission tag (@network, @host-network, @git-write, domain:NAME, package-manager:NAME, write:/PATH)", tag)
		}
	}
	return g, nil
}

// IsZero says g grants nothing. Every Start asks: no allocation.
func (g Grant) IsZero() bool {
	return !g.Network && !g.HostNetwork && !g.GitWrite && len(g.Domains) == 0 && len(g.PackageManagers) == 0 && len(g.Writable) == 0
}

// ErrNotPermitted is what a *PermissionError matches with errors.Is.
var ErrNotPermitted = errors.New("hutch: not permitted")

// PermissionError is a grant asked for beyond what the Sandbox may give:
// Tag is the first permission tag not covered, and nothing was started.
type PermissionError struct {
	Tag    string
	Reason string
}

// Error implements error.
func (e *PermissionError) Error() string {
	return fmt.Sprintf("hutch: %s is not permitted: %s", e.Tag, e.Reason)
}

// Is makes a PermissionError match ErrNotPermitted (errors.Is).
func (e *PermissionError) Is(target error) bool { return target == ErrNotPermitted }

// ceiling is a Sandbox's Grantable, checked and resolved by New: what
// Narrow and Cmd.Grant measure a request against.
type ceiling struct {
	grant Grant
	rules *netns.Rules // Domains and PackageManagers, parsed
	// writable are the real paths of the trees a grant may make
	// writable: Grantable's and the policy's own (workspace included).
	writable []string
}

// newCeiling checks p's Grantable and resolves it. Its errors are
// *PolicyError on Grantable's fields.
func newCeiling(p Policy, resolvedWritable []string) (ceiling, error) {
	g := p.Grantable
	c := ceiling{grant: g, writable: slices.Clone(resolvedWritable)}
	if (len(g.Domains) > 0 || len(g.PackageManagers) > 0) && !g.Network && !g.HostNetwork {
		return c, &PolicyError{Field: "Grantable.Domains", Value: strings.Join(append(slices.Clone(g.Domains), g.PackageManagers...), ","), Reason: "domains and package managers are granted with Network (@network)"}
	}
	rules, err := netns.ParseRules(g.Domains, g.PackageManagers)
	if err != nil {
		var re *netns.RuleError
		if errors.As(err, &re) {
			return c, &PolicyError{Field: "Grantable.Domains", Value: re.Input, Reason: re.Reason}
		}
		return c, err
	}
	c.rules = rules
	for i, w := range g.Writable {
		real, err := filepath.EvalSymlinks(w)
		if err != nil || !filepath.IsAbs(w) {
			return c, &PolicyError{Field: fmt.Sprintf("Grantable.Writable[%d]", i), Value: w, Reason: "not an absolute path to an existing directory"}
		}
		c.writable = append(c.writable, real)
	}
	return c, nil
}

// check says whether c covers g: nil, or a *PermissionError on the
// first tag it does not.
func (c ceiling) check(g Grant) error {
	deny := func(tag, why string) error { return &PermissionError{Tag: tag, Reason: why} }
	if g.HostNetwork && !c.grant.HostNetwork {
		return deny("@host-network", "the sandbox may not give the host's network")
	}
	if g.Network && !c.grant.Network && !c.grant.HostNetwork {
		return deny("@network", "the sandbox may not give network access")
	}
	if (len(g.Domains) > 0 || len(g.PackageManagers) > 0) && !g.Network && !g.HostNetwork {
		return deny("@network", "domains and package managers come with @network")
	}
	for _, d := range g.Domains {
		if c.grant.HostNetwork {
			continue
		}
		ok, err := c.rules.Covers(d)
		if err != nil {
			return deny("domain:"+d, err.Error())
		}
		if !ok {
			return deny("domain:"+d, "not among the domains the sandbox may give")
		}
	}
	for _, pm := range g.PackageManagers {
		hosts, known := netns.Presets[pm]
		if !known {
			return deny("package-manager:"+pm, "no such package manager")
		}
		if c.grant.HostNetwork || slices.Contains(c.grant.PackageManagers, pm) {
			continue
		}
		for _, h := range hosts {
			if ok, _ := c.rules.Covers(h); !ok {
				return deny("package-manager:"+pm, "its registry "+h+" is not among the domains the sandbox may give")
			}
		}
	}
	for _, w := range g.Writable {
		if err := c.checkWritable(w); err != nil {
			return err
		}
	}
	if g.GitWrite && !c.grant.GitWrite {
		return deny("@git-write", "the sandbox may not give commits in the repositories")
	}
	return nil
}

// checkWritable says whether w, once every symlink in it is resolved,
// lies in a tree the ceiling may make writable.
func (c ceiling) checkWritable(w string) error {
	tag := "write:" + w
	if !filepath.IsAbs(w) {
		return &PermissionError{Tag: tag, Reason: "not an absolute path"}
	}
	real, err := filepath.EvalSymlinks(w)
	if err != nil {
		return &PermissionError{Tag: tag, Reason: "cannot be resolved: " + pathReason(err)}
	}
	for _, tree := range c.writable {
		if mounts.Within(real, tree) {
			return nil
		}
	}
	return &PermissionError{Tag: tag, Reason: "not within a tree the sandbox may make writable"}
}

// apply is p with g added: what a command granted g runs under.
func (g Grant) apply(p Policy) Policy {
	p = p.clone()
	switch {
	case g.HostNetwork:
		p.Network, p.AllowDomains, p.PackageManagers, p.AllowLocal = NetworkHost, nil, nil, nil
	case g.Network && p.Network != NetworkHost:
		p.Network = NetworkAllow
		p.AllowDomains = append(p.AllowDomains, g.Domains...)
		p.PackageManagers = append(p.PackageManagers, g.PackageManagers...)
	}
	p.Writable = append(p.Writable, g.Writable...)
	p.AllowGitWrite = p.AllowGitWrite || g.GitWrite
	p.Grantable = Grant{}
	return p
}
