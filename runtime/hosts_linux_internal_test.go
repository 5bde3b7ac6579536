//go:build linux

package runtime

import (
	"os"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/mounts"
)

// TestViewHosts: the view's /etc/hosts is the host's with the sandbox's
// hostname added, and there is none where the view does not show the
// host's read-only at its path, or where the sandbox keeps the host's
// hostname.
func TestViewHosts(t *testing.T) {
	host, err := os.ReadFile("/etc/hosts")
	fi, lerr := os.Lstat("/etc/hosts")
	if err != nil || lerr != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 || namesHost(host, sandboxHostname) {
		t.Skipf("this host's /etc/hosts is not a file readable by all that names no hutch: %v %v", err, lerr)
	}
	ws := t.TempDir()
	tests := []struct {
		name string
		spec mounts.Spec
		uts  bool
		want bool
	}{
		{"host's view", mounts.Spec{Workspace: ws}, true, true},
		{"the host's hostname kept", mounts.Spec{Workspace: ws}, false, false},
		{"/etc writable", mounts.Spec{Workspace: ws, Writable: []string{"/etc"}}, true, false},
		{"/etc/hosts masked", mounts.Spec{Workspace: ws, Deny: []string{"/etc/hosts"}}, true, false},
		{"/etc hidden", mounts.Spec{Workspace: ws, HideDirs: []string{"/etc"}}, true, false},
		{"a listed view without /etc", mounts.Spec{Workspace: ws, Listed: &mounts.Listed{Trees: []string{"/usr"}}}, true, false},
		{"a listed view with /etc", mounts.Spec{Workspace: ws, Listed: &mounts.Listed{Trees: []string{"/usr", "/etc"}}}, true, true},
	}
	// A root of an image's: its /etc/hosts as the image has it.
	image := func(mode os.FileMode, link bool) mounts.Spec {
		root := t.TempDir()
		must(t, os.MkdirAll(root+"/etc", 0o755))
		if link {
			must(t, os.WriteFile(root+"/etc/hosts.real", host, 0o644))
			must(t, os.Symlink("hosts.real", root+"/etc/hosts"))
		} else {
			must(t, os.WriteFile(root+"/etc/hosts", host, mode))
			must(t, os.Chmod(root+"/etc/hosts", mode))
		}
		return mounts.Spec{Workspace: ws, Binds: []mounts.Bind{{Source: root + "/etc", Target: "/etc"}}}
	}
	tests = append(tests, []struct {
		name string
		spec mounts.Spec
		uts  bool
		want bool
	}{
		{"another tree's, readable by all", image(0o644, false), true, true},
		{"another tree's, readable by its owner only", image(0o600, false), true, false},
		{"another tree's, a symlink", image(0o644, true), true, false},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := viewHosts(tt.spec, tt.uts)
			if (len(got) == 1) != tt.want {
				t.Fatalf("viewHosts = %+v; want one: %v", got, tt.want)
			}
			if !tt.want {
				return
			}
			f := got[0]
			if f.Path != "/etc/hosts" || !strings.HasPrefix(f.Content, string(host)) || !strings.HasSuffix(f.Content, "\n127.0.1.1\thutch\n") {
				t.Errorf("viewHosts = %q at %s; want the host's, then 127.0.1.1 hutch", f.Content, f.Path)
			}
			if !namesHost([]byte(f.Content), sandboxHostname) {
				t.Errorf("%q does not name hutch", f.Content)
			}
		})
	}
}

func TestNamesHost(t *testing.T) {
	tests := []struct {
		file string
		want bool
	}{
		{"127.0.0.1 localhost\n", false},
		{"127.0.1.1 hutch\n", true},
		{"127.0.1.1\thutch.example hutch # the sandbox\n", true},
		{"127.0.1.1 hutch.example\n", false},
		{"# 127.0.1.1 hutch\n", false},
		{"127.0.1.1 other # hutch\n", false},
		{"hutch 127.0.0.1\n", false}, // an address field, not a name
		{"", false},
	}
	for _, tt := range tests {
		if got := namesHost([]byte(tt.file), "hutch"); got != tt.want {
			t.Errorf("namesHost(%q) = %v; want %v", tt.file, got, tt.want)
		}
	}
}
