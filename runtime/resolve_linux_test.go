//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestResolvedSameOnBothPlatforms feeds Linux's New and macOS's
// resolution the same policies, good and bad, and wants the same verdict
// from each, word for word, and for a good one the same resolved paths,
// deny-list and deny names. Where the platforms differ by design (Linux
// hides /run; Seatbelt cannot spell a character class) the case says so.
func TestResolvedSameOnBothPlatforms(t *testing.T) {
	tmp := func() string {
		d, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	home := tmp()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh", "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	ws, other := tmp(), tmp()
	for _, d := range []string{"sub", "secret/inner", ".git"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(other, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"/usr", ws + "/out"}, {other, ws + "/elsewhere"}, {ws, other + "/ws-link"}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name string
		p    Policy
		// field is the field Linux refuses, "" when it accepts; darwin
		// is macOS's when differs says it is not the same by design.
		field   string
		differs bool
		darwin  string
	}{
		{name: "plain", p: Policy{Workspace: ws}},
		{name: "workspace through a symlink", p: Policy{Workspace: other + "/ws-link"}},
		{name: "everything resolved", p: Policy{Workspace: ws, Writable: []string{"sub", other}, Deny: []string{"~/creds", "secret", "sub/../x", "/etc/../etc/hutch-missing"},
			DenyNames: []string{"*.key", ".env"}, Env: []string{"PAGER=cat"}, Tools: "/usr/bin", SkipLayers: []Layer{LayerKeyring}, AllowDegraded: []Layer{LayerCgroup},
			Network: NetworkHost}},
		{name: "no default deny", p: Policy{Workspace: ws, NoDefaultDeny: true, DenyNames: []string{"id_*"}}},
		{name: "allow-list", p: Policy{Workspace: ws, Network: NetworkAllow, AllowDomains: []string{"example.com"}, PackageManagers: []string{"go"}}},

		{name: "no workspace", p: Policy{}, field: "Workspace"},
		{name: "relative workspace", p: Policy{Workspace: "ws"}, field: "Workspace"},
		{name: "missing workspace", p: Policy{Workspace: ws + "/missing"}, field: "Workspace"},
		{name: "workspace is a file", p: Policy{Workspace: file}, field: "Workspace"},
		{name: "workspace is /", p: Policy{Workspace: "/"}, field: "Workspace"},
		{name: "workspace is home", p: Policy{Workspace: home}, field: "Workspace"},
		{name: "workspace under a default-denied path", p: Policy{Workspace: home + "/.ssh/work"}, field: "Workspace"},
		{name: "workspace in /dev", p: Policy{Workspace: "/dev/shm"}, field: "Workspace"},

		{name: "NODE_OPTIONS", p: Policy{Workspace: ws, Env: []string{"OK=1", "NODE_OPTIONS=--require /x.js"}}, field: "Env[NODE_OPTIONS]"},
		{name: "PYTHONPATH", p: Policy{Workspace: ws, Env: []string{"PYTHONPATH=/x"}}, field: "Env[PYTHONPATH]"},
		{name: "env not KEY=VALUE", p: Policy{Workspace: ws, Env: []string{"NOEQUALS"}}, field: "Env"},

		{name: "writable through a symlink out", p: Policy{Workspace: ws, Writable: []string{"out/share"}}, field: "Writable[0]"},
		{name: "writable missing", p: Policy{Workspace: ws, Writable: []string{"missing"}}, field: "Writable[0]"},
		{name: "writable home", p: Policy{Workspace: ws, Writable: []string{home}}, field: "Writable[0]"},
		{name: "writable under a denied path", p: Policy{Workspace: ws, Deny: []string{"secret"}, Writable: []string{"secret/inner"}}, field: "Writable[0]"},
		{name: "writable /", p: Policy{Workspace: ws, Writable: []string{"/"}}, field: "Writable[0]"},
		{name: "writable in /dev", p: Policy{Workspace: ws, Writable: []string{"/dev/shm"}}, field: "Writable[0]"},
		{name: "writable in /proc", p: Policy{Workspace: ws, Writable: []string{"/proc/self"}}, field: "Writable[0]"},
		{name: "writable /run", p: Policy{Workspace: ws, Writable: []string{"/run"}}, field: "Writable[0]", differs: true},

		{name: "deny the workspace", p: Policy{Workspace: ws, Deny: []string{"."}}, field: "Deny[0]"},
		{name: "deny through a symlink out", p: Policy{Workspace: ws, Deny: []string{"elsewhere/x"}}, field: "Deny[0]"},
		{name: "deny with a control character", p: Policy{Workspace: ws, Deny: []string{"a\nb"}}, field: "Deny[0]"},

		{name: "unknown read scope", p: Policy{Workspace: ws, Reads: "some"}, field: "Reads"},
		{name: "read without listed reads", p: Policy{Workspace: ws, Read: []string{"/opt"}}, field: "Read"},
		{name: "relative read", p: Policy{Workspace: ws, Reads: ReadsListed, Read: []string{"opt"}}, field: "Read[0]"},
		{name: "missing read", p: Policy{Workspace: ws, Reads: ReadsListed, Read: []string{"/usr", "/nonexistent-hutch-read"}}, field: "Read[1]"},
		{name: "read /", p: Policy{Workspace: ws, Reads: ReadsListed, Read: []string{"/"}}, field: "Read[0]"},
		{name: "read in /proc", p: Policy{Workspace: ws, Reads: ReadsListed, Read: []string{"/proc/self"}}, field: "Read[0]"},
		{name: "read under a denied path", p: Policy{Workspace: ws, Reads: ReadsListed, Deny: []string{"/usr/share"}, Read: []string{"/usr/share/doc"}}, field: "Read[0]"},

		{name: "bind relative host", p: Policy{Workspace: ws, Binds: []Bind{{Host: "sub", Path: "/tmp/b"}}}, field: "Binds[0].Host"},
		{name: "bind missing host", p: Policy{Workspace: ws, Binds: []Bind{{Host: "/nonexistent-hutch-bind", Path: "/tmp/b"}}}, field: "Binds[0].Host"},
		{name: "bind writable system tree", p: Policy{Workspace: ws, Binds: []Bind{{Host: "/etc", Path: "/tmp/b"}}}, field: "Binds[0].Host"},
		{name: "bind under a denied path", p: Policy{Workspace: ws, Deny: []string{"secret"}, Binds: []Bind{{Host: ws + "/secret/inner", Path: "/tmp/b", ReadOnly: true}}}, field: "Binds[0].Host"},
		{name: "bind relative path", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "b"}}}, field: "Binds[0].Path"},
		{name: "bind at /", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/"}}}, field: "Binds[0].Path"},
		{name: "bind unclean path", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/tmp/../b"}}}, field: "Binds[0].Path"},
		{name: "bind over the workspace", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: ws}}}, field: "Binds[0].Path"},
		{name: "bind holding the workspace", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: filepath.Dir(ws)}}}, field: "Binds[0].Path"},
		{name: "bind over a mask", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: home + "/.ssh/work"}}}, field: "Binds[0].Path"},
		{name: "bind in /proc", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/proc/b"}}}, field: "Binds[0].Path"},
		{name: "bind missing on the host", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/nonexistent-hutch-bind"}}}, field: "Binds[0].Path"},
		{name: "bind of a directory onto a file", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/etc/hostname", ReadOnly: true}}}, field: "Binds[0].Path"},
		{name: "binds overlapping", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: "/tmp/b"}, {Host: other, Path: "/tmp/b/c", ReadOnly: true}}}, field: "Binds[1].Path"},
		{name: "bind over the sandbox's home", p: Policy{Workspace: ws, Binds: []Bind{{Host: other, Path: Home + "/x"}}}, field: "Binds[0].Path", differs: true, darwin: ""},
		{name: "bind missing in a listed tree", p: Policy{Workspace: ws, Reads: ReadsListed, Binds: []Bind{{Host: other, Path: "/usr/hutch-no-such"}}}, field: "Binds[0].Path"},
		{name: "bind anywhere with listed reads", p: Policy{Workspace: ws, Reads: ReadsListed, Binds: []Bind{{Host: other, Path: "/home/agent"}}}},

		{name: "relative tools", p: Policy{Workspace: ws, Tools: "bin"}, field: "Tools"},
		{name: "missing tools", p: Policy{Workspace: ws, Tools: "/nonexistent-hutch-tools"}, field: "Tools"},
		{name: "tools is a file", p: Policy{Workspace: ws, Tools: file}, field: "Tools"},
		{name: "skip an unknown layer", p: Policy{Workspace: ws, SkipLayers: []Layer{"filesystem"}}, field: "SkipLayers[0]"},
		{name: "degrade an unknown layer", p: Policy{Workspace: ws, AllowDegraded: []Layer{LayerUserNS}}, field: "AllowDegraded[0]"},
		{name: "deny name is a path", p: Policy{Workspace: ws, DenyNames: []string{"ok", "a/b"}}, field: "DenyNames[1]"},
		{name: "deny name with a class", p: Policy{Workspace: ws, DenyNames: []string{"id_[rd]sa"}}, differs: true, darwin: "DenyNames[0]"},
		{name: "unknown level", p: Policy{Workspace: ws, MinLevel: "strong"}, field: "MinLevel"},
		{name: "unknown network mode", p: Policy{Workspace: ws, Network: "some"}, field: "Network"},
		{name: "allow-list without allow", p: Policy{Workspace: ws, AllowDomains: []string{"example.com"}}, field: "AllowDomains"},
		{name: "bad domain", p: Policy{Workspace: ws, Network: NetworkAllow, AllowDomains: []string{"exa mple.com"}}, field: "AllowDomains[0]"},
		{name: "bad CPUs", p: Policy{Workspace: ws, CPUs: -2}, field: "CPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, linuxErr := New(tt.p)
			if sb != nil {
				defer sb.Close()
			}
			dp, dpol, darwinErr := resolveSeatbelt(tt.p, home)
			wantDarwin := tt.field
			if tt.differs {
				wantDarwin = tt.darwin
			}
			if f := errField(linuxErr); f != tt.field {
				t.Errorf("Linux: %v, want a refusal of %q", linuxErr, tt.field)
			}
			if f := errField(darwinErr); f != wantDarwin {
				t.Errorf("macOS: %v, want a refusal of %q", darwinErr, wantDarwin)
			}
			if tt.differs {
				return
			}
			if linuxErr != nil || darwinErr != nil {
				if linuxErr == nil || darwinErr == nil || linuxErr.Error() != darwinErr.Error() {
					t.Errorf("refused in other words:\nLinux %v\nmacOS %v", linuxErr, darwinErr)
				}
				return
			}
			lp := sb.Policy()
			for _, c := range []struct {
				what          string
				linux, darwin []string
			}{
				{"Workspace", []string{lp.Workspace}, []string{dpol.Workspace}},
				{"mapped Workspace", []string{lp.Workspace}, []string{dp.Workspace}},
				{"Writable", lp.Writable, dpol.Writable},
				{"mapped Writable", lp.Writable, dp.Writable},
				{"Deny", lp.Deny, dpol.Deny},
				{"deny-list", sb.spec.Deny, dp.Deny},
				{"deny names", sb.names, dp.DenyNames},
				{"Network", []string{string(lp.Network)}, []string{string(dpol.Network)}},
			} {
				if !slices.Equal(c.linux, c.darwin) {
					t.Errorf("%s: Linux %q, macOS %q", c.what, c.linux, c.darwin)
				}
			}
		})
	}
}

// errField is the field a *PolicyError names, "" for no error, and the
// error's text for any other.
func errField(err error) string {
	if err == nil {
		return ""
	}
	if pe, ok := err.(*PolicyError); ok {
		return pe.Field
	}
	return err.Error()
}
