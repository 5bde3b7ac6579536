package main

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
)

// TestCallFor: what hutch run's flags have on top of a server's policy
// travels as the call's own fields (variables, a shorter timeout, grants);
// anything else that differs keeps the command off the server, named.
func TestCallFor(t *testing.T) {
	server := runtime.DefaultPolicy("/w")
	server.Env = []string{"CI=1"}
	with := func(f func(*runtime.Policy)) runtime.Policy {
		p := server.Clone()
		f(&p)
		return p
	}
	tests := []struct {
		name      string
		local     runtime.Policy
		server    runtime.Policy
		killAfter time.Duration
		want      localapi.ExecRequest
		differ    []string
	}{
		{name: "the same flags", local: server, server: server},
		{name: "the server's pool and ceiling are its own", local: server,
			server: with(func(p *runtime.Policy) { p.Prewarm = 4; p.Grantable = runtime.Grant{Network: true} })},
		{name: "a variable more", local: with(func(p *runtime.Policy) { p.Env = append(p.Env, "A=b=c") }), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Env: map[string]string{"A": "b=c"}}}},
		{name: "a variable fewer", local: with(func(p *runtime.Policy) { p.Env = nil }), server: server, differ: []string{"Env"}},
		{name: "a timeout", local: with(func(p *runtime.Policy) { p.Timeout = 1500 * time.Microsecond }), server: server,
			want: localapi.ExecRequest{TimeoutMS: 1}},
		{name: "a longer timeout than the server's", local: with(func(p *runtime.Policy) { p.Timeout = time.Hour }),
			server: with(func(p *runtime.Policy) { p.Timeout = time.Minute }), differ: []string{"Timeout"}},
		{name: "domains", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowDomains, p.PackageManagers = runtime.NetworkAllow, []string{"example.com"}, []string{"python"}
		}), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@network"}, AllowedDomains: []string{"example.com"}, PackageManagers: []string{"python"}}}},
		{name: "a domain more than the server's", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org", "b.org"}
		}), server: with(func(p *runtime.Policy) { p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org"} }),
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@network"}, AllowedDomains: []string{"b.org"}}}},
		{name: "a domain fewer", local: with(func(p *runtime.Policy) { p.Network = runtime.NetworkAllow }),
			server: with(func(p *runtime.Policy) { p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org"} }), differ: []string{"AllowDomains"}},
		{name: "local addresses are no grant", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowLocal = runtime.NetworkAllow, []string{"127.0.0.1:8080"}
		}), server: server, differ: []string{"AllowLocal", "Network"}},
		{name: "host network, a tree, commits", local: with(func(p *runtime.Policy) {
			p.Network, p.Writable, p.AllowGitWrite = runtime.NetworkHost, []string{"/data"}, true
		}), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@host-network", "write:/data", "@git-write"}}}},
		{name: "limits and masks differ", local: with(func(p *runtime.Policy) { p.Memory, p.Deny = 64<<20, []string{"/srv"} }), server: server,
			differ: []string{"Deny", "Memory"}},
		{name: "another workspace", local: runtime.DefaultPolicy("/v"), server: runtime.DefaultPolicy("/w"), differ: []string{"Workspace"}},
		{name: "--kill-after given, another", local: server, server: server, killAfter: 3 * time.Second, differ: []string{"--kill-after"}},
		{name: "--kill-after given, the same", local: server, server: server, killAfter: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, differ := callFor(tt.local, tt.server, tt.killAfter, 5*time.Second)
			slices.Sort(differ)
			if !slices.Equal(differ, tt.differ) {
				t.Errorf("differ %v, want %v", differ, tt.differ)
			}
			if len(tt.differ) == 0 && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("call %+v, want %+v", got, tt.want)
			}
		})
	}
}
