package policyfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// TestDefaultIsDefaultPolicy: the embedded file, read onto an empty
// Policy, is exactly runtime.DefaultPolicy, and it names every key but
// apps (which has no "none" to write), so that it documents them all.
func TestDefaultIsDefaultPolicy(t *testing.T) {
	got, err := Policy("/w", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := runtime.DefaultPolicy("/w"); !reflect.DeepEqual(got, want) {
		t.Errorf("default.toml gives\n%+v\nruntime.DefaultPolicy gives\n%+v", got, want)
	}
	s := reflect.ValueOf(Default().doc.Sandbox)
	for i := range s.NumField() {
		name := s.Type().Field(i).Name
		if s.Field(i).IsNil() && name != "Apps" {
			t.Errorf("default.toml leaves out %s", s.Type().Field(i).Tag.Get("toml"))
		}
	}
}

// TestFileLayers: a file sets only what it names, a profile on top of it.
func TestFileLayers(t *testing.T) {
	f, err := Parse("p.toml", []byte(`version = 1
[sandbox]
writable = ["/data"]
network = "allow"
package_managers = ["python"]
memory = "512MiB"
pids = "none"
cpus = 1.5
timeout = "30s"
apps = {dir = "apps", id = "a1"}

[profiles.offline]
network = "none"
package_managers = []
timeout = "default"
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Policy("/w", "", f)
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.DefaultPolicy("/w")
	want.Writable, want.Network, want.PackageManagers = []string{"/data"}, runtime.NetworkAllow, []string{"python"}
	want.Memory, want.Pids, want.CPUs, want.Timeout = 512<<20, runtime.Unlimited, 1.5, 30*time.Second
	want.Apps = &runtime.AppIsolation{Dir: "apps", ID: "a1"}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got\n%+v\nwant\n%+v", p, want)
	}
	p, err = Policy("/w", "offline", f)
	if err != nil {
		t.Fatal(err)
	}
	want.Network, want.PackageManagers, want.Timeout = runtime.NetworkNone, nil, 0
	if !reflect.DeepEqual(p, want) {
		t.Errorf("profile offline: got\n%+v\nwant\n%+v", p, want)
	}
	if _, err := Policy("/w", "nope", f); err == nil || !strings.Contains(err.Error(), "profiles.nope: no such profile") {
		t.Errorf("an unknown profile: %v", err)
	}
}

// TestErrorsNameFileLineKey: every kind of mistake in a file is an error
// with the file, the line and the key.
func TestErrorsNameFileLineKey(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no version", "[sandbox]\nnetwork = \"none\"\n", "f.toml:1: version: missing"},
		{"other version", "version = 2\n", "f.toml:1: version: 2: this hutch reads version 1"},
		{"syntax", "version = 1\n[sandbox\n", "f.toml:2"},
		{"unknown key", "version = 1\n[sandbox]\nnetwork = \"none\"\nwritabel = [\"/x\"]\n", "f.toml:4: sandbox.writabel: not a key of a policy file"},
		{"unknown table", "version = 1\n\n[sandbx]\n", "f.toml:3: sandbx: not a key"},
		{"wrong type", "version = 1\n[sandbox]\n\nwritable = \"/x\"\n", "f.toml:4"},
		{"bad size", "version = 1\n[sandbox]\nmemory = \"lots\"\n", "f.toml:3: sandbox.memory:"},
		{"zero size", "version = 1\n[sandbox]\nmemory = 0\n", "f.toml:3: sandbox.memory: 0 is ambiguous"},
		{"bad duration", "version = 1\n[sandbox]\ntimeout = 30\n", "f.toml:3: sandbox.timeout: 30: not a duration"},
		{"negative pids", "version = 1\n[sandbox]\npids = -3\n", "f.toml:3: sandbox.pids: -3: negative"},
		{"in a profile", "version = 1\n[profiles.x]\n\ncpus = \"many\"\n", "f.toml:4: profiles.x.cpus: many: not a number of cores"},
		{"bad bind", "version = 1\n[sandbox]\nbinds = [\"/a:/b:rx\"]\n", `f.toml:3: sandbox.binds: "/a:/b:rx": the mode is ro or rw, not "rx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("f.toml", []byte(tc.body))
			if err == nil {
				_, err = Policy("/w", "x", f)
				if err != nil && strings.Contains(err.Error(), "no such profile") {
					_, err = Policy("/w", "", f)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestExplainNamesLine: a value the file can read but the runtime
// refuses is named at its line, in the table that set it, and stays a
// *runtime.PolicyError for errors.As.
func TestExplainNamesLine(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(t.TempDir(), "p.toml")
	os.WriteFile(path, []byte("version = 1\n[sandbox]\nnetwork = \"none\"\n\n[profiles.small]\n# tiny\nmemory = \"1k\"\n"), 0o644)
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Policy(ws, "small", f)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runtime.New(p)
	err = f.Explain(err, "small")
	var fe *Error
	var pe *runtime.PolicyError
	if !errors.As(err, &fe) || fe.Line != 7 || fe.Key != "profiles.small.memory" || !errors.As(err, &pe) {
		t.Errorf("Explain: %v", err)
	}
	if !strings.HasPrefix(err.Error(), path+":7: profiles.small.memory: \"1k\": below") {
		t.Errorf("Explain says %q", err)
	}
}

// TestFormatRoundTrip: what Format writes reads back to the same policy.
func TestFormatRoundTrip(t *testing.T) {
	p := runtime.DefaultPolicy("/w")
	p.Writable, p.Deny, p.Env = []string{"/data"}, []string{"~/x"}, []string{"A=1"}
	p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	p.Memory, p.Pids, p.CPUs, p.Timeout, p.TmpSize = 3<<30, runtime.Unlimited, 0.5, 90*time.Second, 1<<30
	p.AllowGitWrite, p.AllowNested = true, true
	p.Reads, p.Read = runtime.ReadsListed, []string{"/opt"}
	p.Binds = []runtime.Bind{{Host: "/data/u1", Path: "/home/agent"}, {Host: "/srv/ref", Path: "/ref", ReadOnly: true}}
	p.Apps = &runtime.AppIsolation{Dir: "apps", ID: "a"}
	p.SkipLayers = []runtime.Layer{runtime.LayerKeyring}
	p.Grantable = runtime.Grant{Network: true, Domains: []string{"*.example.com"}, PackageManagers: []string{"go"}, Writable: []string{"/data/more"}, GitWrite: true}
	p.Explain = true
	off := runtime.DefaultPolicy("/w")
	off.Denials = runtime.DenialsOff
	for _, pol := range []runtime.Policy{runtime.DefaultPolicy("/w"), p, off} {
		b, err := Format(pol)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse("formatted.toml", b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		back, err := Policy("/w", "", f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, pol) {
			t.Errorf("round trip of\n%+v\ngave\n%+v\nfrom\n%s", pol, back, b)
		}
	}
}

// FuzzParse holds the policy-file parser to any bytes: a file parses or
// is refused with an *Error, never a panic, and what parses applies to a
// policy or is refused, never a panic either.
func FuzzParse(f *testing.F) {
	f.Add(DefaultTOML())
	for _, s := range []string{"version = 1\n", "version = 1\n[sandbox]\nmemory = \"1k\"\n", "version = 2\n", "[sandbox\n", "version = 1\n[profiles.x]\nnetwork = \"host\"\n", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz.toml", b)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse: %T %v, want an *Error", err, err)
			}
			return
		}
		p := runtime.Policy{Workspace: "/w"}
		_ = file.Apply(&p, "")
	})
}
