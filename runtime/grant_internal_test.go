package runtime

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/netns"
)

// grantWorld is a small host for grants: directories to grant writes on
// (one reached through a symlink that leads elsewhere), destinations and
// files to measure what a grant reaches.
type grantWorld struct {
	ws    string
	dirs  []string // grantable trees, some nested
	link  string   // a path below dirs[0] that is a symlink to dirs[2]
	files []string // one file per tree, and one in the workspace
}

func newGrantWorld(t *testing.T) grantWorld {
	root := t.TempDir()
	w := grantWorld{ws: filepath.Join(root, "ws")}
	for _, d := range []string{"a", "a/b", "c", "c/d", "e"} {
		w.dirs = append(w.dirs, filepath.Join(root, d))
	}
	for _, d := range append([]string{w.ws}, w.dirs...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		w.files = append(w.files, filepath.Join(d, "f"))
	}
	w.link = filepath.Join(w.dirs[0], "link")
	if err := os.Symlink(w.dirs[2], w.link); err != nil {
		t.Fatal(err)
	}
	return w
}

var (
	grantDomains = []string{"example.com", "*.example.com", "api.example.com", "a.b.example.com", "other.org", "*", "example.com:443", "pypi.org"}
	grantPMs     = []string{"python", "node"}
	// grantDests are what a grant's reach is measured on.
	grantDests = []struct {
		host string
		port int
	}{{"example.com", 443}, {"example.com", 80}, {"api.example.com", 443}, {"x.example.com", 443}, {"a.b.example.com", 443},
		{"other.org", 443}, {"pypi.org", 443}, {"files.pythonhosted.org", 443}, {"registry.npmjs.org", 443}, {"1.2.3.4", 443}}
)

// randomGrant draws a grant from w's universe.
func (w grantWorld) randomGrant(rng *rand.Rand) Grant {
	var g Grant
	g.HostNetwork = rng.Intn(8) == 0
	g.Network = rng.Intn(2) == 0
	if g.Network || g.HostNetwork {
		for _, d := range grantDomains {
			if rng.Intn(4) == 0 {
				g.Domains = append(g.Domains, d)
			}
		}
		for _, pm := range grantPMs {
			if rng.Intn(4) == 0 {
				g.PackageManagers = append(g.PackageManagers, pm)
			}
		}
	}
	for _, d := range append(slices.Clone(w.dirs), w.link) {
		if rng.Intn(3) == 0 {
			g.Writable = append(g.Writable, d)
		}
	}
	g.GitWrite = rng.Intn(3) == 0
	return g
}

// reach is what g lets through, measured: the destinations its network
// reaches, the files it may write (besides the workspace, which every
// command has), git writes. An oracle written apart from ceiling.check.
type reach struct {
	dests map[int]bool
	files map[string]bool
	git   bool
}

func (w grantWorld) reach(t *testing.T, g Grant) reach {
	r := reach{dests: map[int]bool{}, files: map[string]bool{}, git: g.GitWrite}
	rules, err := netns.ParseRules(g.Domains, g.PackageManagers)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range grantDests {
		if _, ok := rules.Match(d.host, d.port); g.HostNetwork || g.Network && ok {
			r.dests[i] = true
		}
	}
	for _, f := range w.files {
		real, _ := filepath.EvalSymlinks(filepath.Dir(f))
		for _, tree := range append([]string{w.ws}, g.Writable...) {
			rt, _ := filepath.EvalSymlinks(tree)
			if real == rt || strings.HasPrefix(real, rt+"/") {
				r.files[f] = true
			}
		}
	}
	return r
}

func (r reach) within(p reach) bool {
	for d := range r.dests {
		if !p.dests[d] {
			return false
		}
	}
	for f := range r.files {
		if !p.files[f] {
			return false
		}
	}
	return !r.git || p.git
}

// TestGrantAttenuation (issue 18, must show 1): for random parents and
// requests, a request the parent's ceiling accepts reaches nothing the
// parent does not, and so on down a chain of Narrow; one it refuses is
// refused on a tag of the request that is refused on its own too.
func TestGrantAttenuation(t *testing.T) {
	w := newGrantWorld(t)
	rng := rand.New(rand.NewSource(18))
	accepted, refused := 0, 0
	for range 3000 {
		parent := w.randomGrant(rng)
		c, err := newCeiling(Policy{Grantable: parent}, []string{w.ws})
		if err != nil {
			t.Fatalf("ceiling %v: %v", parent.Tags(), err)
		}
		child := w.randomGrant(rng)
		err = c.check(child)
		var pe *PermissionError
		switch {
		case err == nil:
			accepted++
			if !w.reach(t, child).within(w.reach(t, parent)) {
				t.Fatalf("%v accepted under %v, but reaches more", child.Tags(), parent.Tags())
			}
			// One more level: a sub-agent of the child.
			cc, err := newCeiling(Policy{Grantable: child}, []string{w.ws})
			if err != nil {
				t.Fatal(err)
			}
			grand := w.randomGrant(rng)
			if cc.check(grand) == nil && !w.reach(t, grand).within(w.reach(t, parent)) {
				t.Fatalf("%v accepted under %v under %v, but reaches more than the root", grand.Tags(), child.Tags(), parent.Tags())
			}
		case errors.As(err, &pe) && errors.Is(err, ErrNotPermitted):
			refused++
			if !slices.Contains(child.Tags(), pe.Tag) {
				t.Fatalf("%v refused under %v on %q, not one of its tags", child.Tags(), parent.Tags(), pe.Tag)
			}
			if c.check(single(t, pe.Tag)) == nil {
				t.Fatalf("%v refused under %v on %q, which alone is accepted", child.Tags(), parent.Tags(), pe.Tag)
			}
		default:
			t.Fatalf("%v under %v: %v", child.Tags(), parent.Tags(), err)
		}
	}
	t.Logf("3000 random requests: %d accepted, %d refused", accepted, refused)
	if accepted < 100 || refused < 100 {
		t.Errorf("a weak sample: %d accepted, %d refused", accepted, refused)
	}
}

// single is the grant of one tag (domains and presets with @network).
func single(t *testing.T, tag string) Grant {
	switch {
	case tag == "@network":
		return Grant{Network: true}
	case tag == "@host-network":
		return Grant{HostNetwork: true}
	case tag == "@git-write":
		return Grant{GitWrite: true}
	case strings.HasPrefix(tag, "write:"):
		return Grant{Writable: []string{strings.TrimPrefix(tag, "write:")}}
	case strings.HasPrefix(tag, "domain:"):
		return Grant{Network: true, Domains: []string{strings.TrimPrefix(tag, "domain:")}}
	case strings.HasPrefix(tag, "package-manager:"):
		return Grant{Network: true, PackageManagers: []string{strings.TrimPrefix(tag, "package-manager:")}}
	}
	t.Fatalf("tag %q", tag)
	return Grant{}
}
