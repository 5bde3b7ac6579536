package policyfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrustedLayerOnlyNarrows: a project's file (untrusted) on top of
// a user's (trusted) may narrow anything and widen nothing; a widening
// is refused at its file, line and key, in the profile's table when the
// profile widens.
func TestUntrustedLayerOnlyNarrows(t *testing.T) {
	ws, a := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(a, "sub"), 0o755)
	user, err := Parse("user.toml", []byte(`version = 1
[sandbox]
network = "allow"
allow_domains = ["*.example.com"]
package_managers = ["python"]
writable = ["`+a+`"]
read_only = ["docs"]
reads = "listed"
read = ["/usr/share", "/opt"]
memory = "1GiB"
pids = 100
explain = true
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, profile, refused string
	}{
		{"network host", `network = "host"`, "", "project.toml:3: sandbox.network"},
		{"no network", `network = "none"` + "\nallow_domains = []\npackage_managers = []", "", ""},
		{"another domain", `allow_domains = ["evil.com"]`, "", "sandbox.allow_domains: an untrusted layer may only narrow the policy below it: evil.com"},
		{"a subdomain", `allow_domains = ["api.example.com"]`, "", ""},
		{"another registry", `package_managers = ["node"]`, "", "sandbox.package_managers"},
		{"the root writable", `writable = ["/"]`, "", "sandbox.writable"},
		{"a narrower tree", `writable = ["` + filepath.Join(a, "sub") + `"]`, "", ""},
		{"more memory", `memory = "2GiB"`, "", "sandbox.memory"},
		{"no memory limit", `memory = "none"`, "", "sandbox.memory"},
		{"less memory", `memory = "512MiB"`, "", ""},
		{"no process limit", `pids = "none"`, "", "sandbox.pids"},
		{"a timeout", `timeout = "30s"`, "", ""},
		{"leaks off", `leaks = "off"`, "", "project.toml:3: sandbox.leaks: an untrusted layer may only narrow the policy below it: off does less than report"},
		{"leaks kill", `leaks = "kill"`, "", ""},
		{"denials off", `denials = "off"`, "", "project.toml:3: sandbox.denials: an untrusted layer may only narrow the policy below it: off records less than record"},
		{"denials recorded", `denials = "record"`, "", ""},
		{"no explaining", `explain = false`, "", "project.toml:3: sandbox.explain: an untrusted layer may only narrow the policy below it: it stops explaining the refusals"},
		{"explaining", `explain = true`, "", ""},
		{"backend auto", `backend = "auto"`, "", "sandbox.backend: an untrusted layer may only narrow the policy below it: auto accepts less isolation than \"\""},
		{"backend none", `backend = "none"`, "", "sandbox.backend"},
		{"backend namespaces", `backend = "namespaces"`, "", "sandbox.backend"},
		{"no default masks", `default_deny = false`, "", "sandbox.default_deny"},
		{"a read-only dropped", `read_only = []`, "", "sandbox.read_only"},
		{"a read-only added", `read_only = ["docs", "src"]`, "", ""},
		{"a mask added", `deny = ["/etc/hosts"]`, "", ""},
		{"disabled", `mode = "disabled"`, "", "sandbox.mode"},
		{"git writes", `allow_git_write = true`, "", "sandbox.allow_git_write"},
		{"nested sandboxes", `allow_nested = true`, "", "sandbox.allow_nested: an untrusted layer may only narrow the policy below it: it lets commands create namespaces"},
		{"no nested sandboxes", `allow_nested = false`, "", ""},
		{"the host's tree readable", `reads = "host"`, "", "sandbox.reads: an untrusted layer may only narrow the policy below it: the host's whole tree is more than the listed trees"},
		{"reads listed still", `reads = "listed"`, "", ""},
		{"another read", `read = ["/srv"]`, "", "sandbox.read: an untrusted layer may only narrow the policy below it: it lists a tree the layer below does not"},
		{"fewer reads", `read = ["/opt"]`, "", ""},
		{"a root of its own", `root = "/srv/image"`, "", "sandbox.root: an untrusted layer may only narrow the policy below it: it changes the root file system the layer below chose"},
		{"the same root", `root = ""`, "", ""},
		{"a bind", `binds = ["/srv:/x"]`, "", "sandbox.binds: an untrusted layer may only narrow the policy below it: it binds a host tree the layer below does not"},
		{"no binds", `binds = []`, "", ""},
		{"a system tree", `allow_system_write = ["/etc"]`, "", "sandbox.allow_system_write: an untrusted layer may only narrow the policy below it: it lets a system tree be writable"},
		{"no system tree", `allow_system_write = []`, "", ""},
		{"a weaker level", `min_level = "landlock"`, "", "sandbox.min_level"},
		{"degraded seccomp", `allow_degraded = ["cgroup", "landlock", "seccomp"]`, "", "sandbox.allow_degraded"},
		{"grants", "[sandbox.grantable]\nnetwork = true", "", "sandbox.grantable"},
		{"a profile widening", "[profiles.p]\n\nnetwork = \"host\"", "p", "project.toml:4: profiles.p.network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "version = 1\n[sandbox]\n" + tc.body + "\n"
			if strings.HasPrefix(tc.body, "[") {
				body = "version = 1\n" + tc.body + "\n"
			}
			project, err := Parse("project.toml", []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Layered(ws, tc.profile, Layer{File: user, Trusted: true}, Layer{File: project})
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("error %v; want one containing %q", err, tc.refused)
			}
			// Trusted, the same file may set anything.
			if _, err := Layered(ws, tc.profile, Layer{File: user, Trusted: true}, Layer{File: project, Trusted: true}); err != nil {
				t.Errorf("trusted: %v", err)
			}
		})
	}
}

// TestUntrustedLayerWritableResolved: a project layer's writable path is
// judged where the kernel would take it: relative to the workspace, and
// through a symlink on the way even when its end does not exist yet.
func TestUntrustedLayerWritableResolved(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		writable string
		refused  bool
	}{
		{"sub", false},
		{filepath.Join(ws, "sub", "new"), false},
		{"link/new", true},
		{filepath.Join(ws, "link", "new", "deeper"), true},
		{"link", true},
	} {
		project, err := Parse("project.toml", []byte("version = 1\n[sandbox]\nwritable = [\""+tc.writable+"\"]\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Layered(ws, "", Layer{File: project})
		if refused := err != nil; refused != tc.refused {
			t.Errorf("writable %q: %v; want refused %v", tc.writable, err, tc.refused)
		}
	}
}
