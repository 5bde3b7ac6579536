package landlock

import (
	"slices"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	spec := Spec{
		ReadOnly:    []string{"/"},
		Writable:    []string{"/work", "/tmp"},
		Devices:     []string{"/dev"},
		Deny:        []string{"/root/.ssh", "/work/.env"},
		RestrictTCP: true,
		ConnectTCP:  []uint16{3128},
		Scope:       true,
	}
	tests := []struct {
		abi            int
		handledFS      uint64
		handledNet     uint64
		scoped         uint64
		ports          int
		wantUnenforced []string
	}{
		{abi: 0, wantUnenforced: []string{"no Landlock"}},
		{abi: 1, handledFS: 1<<13 - 1, wantUnenforced: []string{"REFER", "TCP", "scoped", "/work/.env"}},
		{abi: 2, handledFS: 1<<14 - 1, wantUnenforced: []string{"TCP", "scoped", "/work/.env"}},
		{abi: 4, handledFS: 1<<15 - 1, handledNet: 3, ports: 1, wantUnenforced: []string{"scoped", "/work/.env"}},
		{abi: 6, handledFS: 1<<16 - 1, handledNet: 3, scoped: 3, ports: 1, wantUnenforced: []string{"/work/.env"}},
		{abi: 11, handledFS: 1<<17 - 1, handledNet: 3, scoped: 3, ports: 1, wantUnenforced: []string{"/work/.env"}},
	}
	for _, tt := range tests {
		r, err := Build(spec, tt.abi)
		if err != nil {
			t.Fatalf("ABI %d: %v", tt.abi, err)
		}
		if r.HandledFS != tt.handledFS || r.HandledNet != tt.handledNet || r.Scoped != tt.scoped || len(r.Ports) != tt.ports {
			t.Errorf("ABI %d: handled fs %#x net %#x scoped %#x ports %v; want %#x %#x %#x %d",
				tt.abi, r.HandledFS, r.HandledNet, r.Scoped, r.Ports, tt.handledFS, tt.handledNet, tt.scoped, tt.ports)
		}
		all := strings.Join(r.Unenforced, "\n")
		for _, w := range tt.wantUnenforced {
			if !strings.Contains(all, w) {
				t.Errorf("ABI %d: Unenforced %q lacks %q", tt.abi, r.Unenforced, w)
			}
		}
		if len(r.Unenforced) != len(tt.wantUnenforced) {
			t.Errorf("ABI %d: Unenforced = %q, want %d entries", tt.abi, r.Unenforced, len(tt.wantUnenforced))
		}
		if tt.abi == 0 {
			continue
		}
		// "/" holds a denied path: expanded at Restrict time, not granted whole.
		if len(r.ExpandDeny) != 1 || r.ExpandDeny[0].Path != "/" {
			t.Errorf("ABI %d: ExpandDeny = %v", tt.abi, r.ExpandDeny)
		}
		for _, p := range r.Paths {
			if p.Path == "/" {
				t.Errorf("ABI %d: / granted whole although /root/.ssh is denied", tt.abi)
			}
			if p.Access&^r.HandledFS != 0 {
				t.Errorf("ABI %d: %s granted %#x, beyond the handled %#x", tt.abi, p.Path, p.Access, r.HandledFS)
			}
			if p.Path == "/dev" && p.Access&(1<<8) != 0 { // MAKE_REG
				t.Errorf("ABI %d: /dev may create files", tt.abi)
			}
		}
	}
}

func TestBuildRefusesBadPaths(t *testing.T) {
	for _, s := range []Spec{
		{ReadOnly: []string{"relative"}},
		{Writable: []string{"/a/../b"}},
		{Deny: []string{"/a\x00b"}},
		{Devices: []string{"/dev/"}},
	} {
		if _, err := Build(s, 6); err == nil || !strings.Contains(err.Error(), "landlock: ") {
			t.Errorf("Build(%+v) = %v, want an error naming the field", s, err)
		}
	}
}

func TestUnder(t *testing.T) {
	got := under([]string{"/a/b", "/ab", "/a", "/c"}, "/a")
	if !slices.Equal(got, []string{"/a/b", "/a"}) {
		t.Errorf("under = %q", got)
	}
	if got := under([]string{"/x/y"}, "/"); !slices.Equal(got, []string{"/x/y"}) {
		t.Errorf("under / = %q", got)
	}
}
