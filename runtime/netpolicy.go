package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/hutchbox/hutch/netns"
)

// proxyEnv points every common client at the egress bridge: curl, wget,
// pip, git and Go read the upper- or lower-case variables, npm its own.
// Loopback stays direct: inside the sandbox it is the sandbox's own.
func proxyEnv(port int) []string {
	http := "http://127.0.0.1:" + strconv.Itoa(port)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(port)
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + http, "http_proxy=" + http,
		"HTTPS_PROXY=" + http, "https_proxy=" + http,
		"ALL_PROXY=" + socks, "all_proxy=" + socks,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"npm_config_proxy=" + http, "npm_config_https_proxy=" + http,
	}
}

// parseNetworkRules parses p's allow-list, and checks AllowLocal, with
// errors that name the field.
func parseNetworkRules(p *Policy) (*netns.Rules, error) {
	rules, err := netns.ParseRules(p.AllowDomains, p.PackageManagers)
	if err != nil {
		var re *netns.RuleError
		if errors.As(err, &re) {
			field := "AllowDomains"
			if i := slices.Index(p.PackageManagers, re.Input); i >= 0 {
				field = fmt.Sprintf("PackageManagers[%d]", i)
			} else if i := slices.Index(p.AllowDomains, re.Input); i >= 0 {
				field = fmt.Sprintf("AllowDomains[%d]", i)
			}
			return nil, &PolicyError{Field: field, Value: re.Input, Reason: re.Reason}
		}
		return nil, &PolicyError{Field: "AllowDomains", Reason: err.Error()}
	}
	// A proxy made and dropped: AllowLocal is checked now, not per command.
	if _, err := netns.NewProxy(netns.ProxyConfig{Rules: rules, AllowLocal: p.AllowLocal}); err != nil {
		var re *netns.RuleError
		if errors.As(err, &re) {
			return nil, &PolicyError{Field: fmt.Sprintf("AllowLocal[%d]", slices.Index(p.AllowLocal, re.Input)), Value: re.Input, Reason: re.Reason}
		}
		return nil, &PolicyError{Field: "AllowLocal", Reason: err.Error()}
	}
	return rules, nil
}
