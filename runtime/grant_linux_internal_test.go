//go:build linux

package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGrantRefusedStartsNothing: a command asking beyond its Sandbox's
// Grantable is refused with the tag named, before any init is taken;
// Narrow refuses the same way.
func TestGrantRefusedStartsNothing(t *testing.T) {
	w := newGrantWorld(t)
	p := DefaultPolicy(w.ws)
	p.Grantable = Grant{Network: true, Domains: []string{"*.example.com"}, Writable: []string{w.dirs[0]}}
	sb, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer func() { testHookStart = nil }()
	reached := 0
	testHookStart = func(stage string, c *Cmd) { reached++ }
	for _, tc := range []struct {
		g   Grant
		tag string
	}{
		{Grant{HostNetwork: true}, "@host-network"},
		{Grant{Network: true, Domains: []string{"example.com"}}, "domain:example.com"},
		{Grant{Network: true, Domains: []string{"*"}}, "domain:*"},
		{Grant{Writable: []string{w.dirs[2]}}, "write:" + w.dirs[2]},
		{Grant{Writable: []string{w.link}}, "write:" + w.link}, // below a grantable tree, but leads out of it
		{Grant{GitWrite: true}, "@git-write"},
		{Grant{Domains: []string{"api.example.com"}}, "@network"},
	} {
		c := sb.Command(t.Context(), "true")
		c.Grant = tc.g
		err := c.Run()
		var pe *PermissionError
		if !errors.As(err, &pe) || pe.Tag != tc.tag || !errors.Is(err, ErrNotPermitted) {
			t.Errorf("%v: %v; want a refusal of %s", tc.g.Tags(), err, tc.tag)
		}
		if _, err := sb.Narrow(tc.g); !errors.As(err, &pe) || pe.Tag != tc.tag {
			t.Errorf("Narrow %v: %v", tc.g.Tags(), err)
		}
	}
	if reached != 0 {
		t.Errorf("refused commands reached %d start stages", reached)
	}
	// The same write without a grant and with one, judged on the host.
	target := filepath.Join(w.dirs[1], "granted")
	for _, g := range []Grant{{}, {Writable: []string{w.dirs[1]}}} {
		c := sb.Command(t.Context(), "sh", "-c", "echo x > "+target)
		c.Grant = g
		err := c.Run()
		_, serr := os.Stat(target)
		if g.IsZero() != (serr != nil) || g.IsZero() == (err == nil) {
			t.Errorf("grant %v: the command said %v; the host has the file: %v", g.Tags(), err, serr == nil)
		}
	}
	// Within it: started, in a Sandbox made for the grant.
	c := sb.Command(t.Context(), "true")
	c.Grant = Grant{Network: true, Domains: []string{"api.example.com"}, Writable: []string{filepath.Join(w.dirs[0], "b")}}
	if err := c.Run(); err != nil || reached == 0 {
		t.Errorf("a grant within: %v (stages %d)", err, reached)
	}
	if c.sb == sb || c.sb.policy.Network != NetworkAllow || !slices.Contains(c.sb.policy.Writable, w.dirs[1]) {
		t.Errorf("the granted command's policy: %+v", c.sb.policy)
	}
}
