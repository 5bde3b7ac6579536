//go:build linux

package runtime_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// TestResolvedJSON: a Resolved survives its JSON form whole (policy,
// level, the trees Cmd.Dir is judged against); a form of another version,
// or with a field this build does not know, is refused, never read in
// part.
func TestResolvedJSON(t *testing.T) {
	ws := mkdirs(t, t.TempDir(), "sub", "extra")
	p := runtime.DefaultPolicy(ws)
	p.Writable, p.Deny, p.DenyNames = []string{"extra"}, []string{"sub/secret"}, []string{"*.key"}
	p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	p.Memory, p.Env = 256<<20, []string{"A=1"}
	r, err := runtime.Check(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back runtime.Resolved
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("reading %s: %v", b, err)
	}
	if !reflect.DeepEqual(back.Policy(), r.Policy()) || back.Level() != r.Level() {
		t.Errorf("round trip: %+v at %s, want %+v at %s", back.Policy(), back.Level(), r.Policy(), r.Level())
	}
	for _, dir := range []string{"", "sub", filepath.Join(ws, "extra"), "/etc"} {
		got, gotErr := back.WorkDir(dir)
		want, wantErr := r.WorkDir(dir)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("WorkDir(%q): %q, %v; before the round trip %q, %v", dir, got, gotErr, want, wantErr)
		}
	}

	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["format"] != float64(runtime.ResolvedFormat) {
		t.Errorf("format %v, want %d", doc["format"], runtime.ResolvedFormat)
	}
	for name, change := range map[string]func(map[string]any){
		"another format": func(d map[string]any) { d["format"] = runtime.ResolvedFormat + 1 },
		"no format":      func(d map[string]any) { delete(d, "format") },
		"unknown field":  func(d map[string]any) { d["grants_v2"] = true },
		"unknown policy field": func(d map[string]any) {
			d["policy"].(map[string]any)["mount_everything"] = true
		},
	} {
		var d map[string]any
		json.Unmarshal(b, &d)
		change(d)
		bad, _ := json.Marshal(d)
		var r runtime.Resolved
		if err := json.Unmarshal(bad, &r); err == nil {
			t.Errorf("%s: read, want refused", name)
		}
	}
}

// TestNewResolved: a decision carried through JSON makes its Sandbox; one
// taken at another level than the host offers now is refused with a
// *LevelError, nothing made.
func TestNewResolved(t *testing.T) {
	r, err := runtime.Check(runtime.DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var back runtime.Resolved
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	sb, err := runtime.NewResolved(&back)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()

	other := runtime.LevelLandlock
	if r.Level() == other {
		other = runtime.LevelNamespaces
	}
	moved := strings.Replace(string(b), `"level":"`+string(r.Level())+`"`, `"level":"`+string(other)+`"`, 1)
	if err := json.Unmarshal([]byte(moved), &back); err != nil {
		t.Fatal(err)
	}
	var le *runtime.LevelError
	noSpawn(t, func() {
		sb, err = runtime.NewResolved(&back)
	})
	if !errors.As(err, &le) || le.Need != other || le.Have != r.Level() || sb != nil {
		t.Errorf("NewResolved of a decision at %s on a host giving %s: %v, want a LevelError", other, r.Level(), err)
	}
}

// TestCheckOfResolvedIsResolved: Check of a policy already resolved comes
// to the same decision, so that a Resolved carried to another process
// (NewResolved, the OCI form) is made as it was decided, for every kind
// of field resolution rewrites: relative paths, app isolation, the
// network's rules, the grants' ceiling, the leak scanner's action.
func TestCheckOfResolvedIsResolved(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *runtime.Policy, ws string)
	}{
		{"default", func(*runtime.Policy, string) {}},
		{"relative trees", func(p *runtime.Policy, ws string) {
			p.Writable, p.ReadOnly = []string{filepath.Join(ws, "extra")}, []string{"sub"}
			p.Deny, p.DenyNames = []string{"sub/secret"}, []string{"*.key"}
		}},
		{"apps", func(p *runtime.Policy, _ string) { p.Apps = &runtime.AppIsolation{ID: "a1"} }},
		{"apps in a named dir", func(p *runtime.Policy, _ string) { p.Apps = &runtime.AppIsolation{Dir: "sub/apps", ID: "a1"} }},
		{"allow-list", func(p *runtime.Policy, _ string) {
			p.Network, p.AllowDomains, p.PackageManagers = runtime.NetworkAllow, []string{"example.com"}, []string{"node"}
		}},
		{"grants and leaks", func(p *runtime.Policy, _ string) {
			p.Grantable = runtime.Grant{Network: true, GitWrite: true}
			p.Leaks, p.Env = runtime.LeaksRedact, []string{"A=1"}
		}},
		{"limits", func(p *runtime.Policy, _ string) { p.Memory, p.Pids, p.CPUs, p.TmpSize = 256<<20, 64, 0.5, 64<<20 }},
		{"home and tools", func(p *runtime.Policy, ws string) {
			p.Home, p.Tools = filepath.Join(ws, "extra"), filepath.Join(ws, "sub")
		}},
		{"no default deny, names and git", func(p *runtime.Policy, _ string) {
			p.NoDefaultDeny, p.DenyNames, p.AllowGitWrite = true, []string{".env*"}, true
		}},
		{"local and layers", func(p *runtime.Policy, _ string) {
			p.Network, p.AllowLocal = runtime.NetworkAllow, []string{"127.0.0.1:5432"}
			p.SkipLayers, p.AllowDegraded = []runtime.Layer{runtime.LayerKeyring}, []runtime.Layer{runtime.LayerLandlock}
		}},
		{"writable through a symlink", func(p *runtime.Policy, ws string) { p.Writable = []string{filepath.Join(ws, "link")} }},
		{"a profile of the caller's", func(p *runtime.Policy, _ string) { p.Seccomp = seccomp.Default() }},
		{"system tree allowed", func(p *runtime.Policy, _ string) {
			p.Writable, p.AllowSystemWrite = []string{"/etc"}, []string{"/etc"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := mkdirs(t, t.TempDir(), "sub/apps/a1/data", "extra", "apps/a1/data")
			if err := os.Symlink(filepath.Join(ws, "extra"), filepath.Join(ws, "link")); err != nil {
				t.Fatal(err)
			}
			p := runtime.DefaultPolicy(ws)
			tc.edit(&p, ws)
			r, err := runtime.Check(p)
			if err != nil {
				t.Fatal(err)
			}
			again, err := runtime.Check(r.Policy())
			if err != nil {
				t.Fatalf("Check of its own resolved policy: %v", err)
			}
			a, _ := json.Marshal(r)
			b, _ := json.Marshal(again)
			if string(a) != string(b) {
				t.Errorf("Check of the resolved policy decided otherwise:\n first %s\nsecond %s", a, b)
			}
			// As a supervisor gets it: through its JSON form.
			var back runtime.Resolved
			if err := json.Unmarshal(a, &back); err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(&back); string(b) != string(a) {
				t.Errorf("the JSON form read back differs:\n%s\n%s", a, b)
			}
			sb, err := runtime.NewResolved(&back)
			if err != nil {
				t.Fatalf("NewResolved: %v", err)
			}
			sb.Close()
		})
	}
}

// TestCheckForOCI: a policy for an OCI runtime is checked at
// LevelNamespaces, which the runtime makes, whatever this host offers;
// its Resolved keeps the backend, so that NewResolved refuses it as New
// does, before starting anything.
func TestCheckForOCI(t *testing.T) {
	p := runtime.DefaultPolicy(t.TempDir())
	p.Backend = runtime.BackendOCI
	r, err := runtime.Check(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Level() != runtime.LevelNamespaces || r.Policy().Backend != runtime.BackendOCI {
		t.Errorf("Check for an OCI runtime: level %s, backend %s; want namespaces, oci", r.Level(), r.Policy().Backend)
	}
	var sb *runtime.Sandbox
	noSpawn(t, func() { sb, err = runtime.NewResolved(r) })
	var be *runtime.BackendError
	if !errors.As(err, &be) || be.Backend != runtime.BackendOCI || sb != nil {
		t.Errorf("NewResolved of an OCI decision: %v, want a BackendError", err)
	}
	p.Pids = 1
	var pe *runtime.PolicyError
	if _, err := runtime.Check(p); !errors.As(err, &pe) || pe.Field != "Pids" {
		t.Errorf("Check for an OCI runtime of Pids 1: %v, want a PolicyError on Pids", err)
	}
}
