package images

import (
	"slices"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

func TestParseRef(t *testing.T) {
	for _, tt := range []struct{ in, layout, tag string }{
		{"img", "img", ""},
		{"img:v1", "img", "v1"},
		{"/srv/images/debian:12", "/srv/images/debian", "12"},
		{"./a:b/c", "./a:b/c", ""},
		{"/x/y:", "/x/y", ""},
	} {
		if l, tag := ParseRef(tt.in); l != tt.layout || tag != tt.tag {
			t.Errorf("ParseRef(%q) = %q, %q; want %q, %q", tt.in, l, tag, tt.layout, tt.tag)
		}
	}
}

// TestApply: the image's root becomes the policy's; its Env goes under
// the policy's own, without what the sandbox sets itself or refuses.
func TestApply(t *testing.T) {
	im := &Image{Root: "/cache/abc/rootfs", Env: []string{"PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", "HOME=/root", "LD_PRELOAD=/x.so", "GOPATH=/go", "BROKEN"}}
	p := runtime.DefaultPolicy("/w")
	p.Env = []string{"LANG=en_US.UTF-8"}
	left := im.Apply(&p)
	if p.Root != im.Root {
		t.Errorf("Root %q, want %q", p.Root, im.Root)
	}
	if want := []string{"PATH=/usr/local/bin:/usr/bin", "LANG=en_US.UTF-8"}; !slices.Equal(p.Env, want) {
		t.Errorf("Env %q, want %q", p.Env, want)
	}
	if len(left) != 3 || left[0] != "HOME: the sandbox sets it" || left[2] != "GOPATH: the sandbox sets it" || !slices.ContainsFunc(left, func(s string) bool { return len(s) > 11 && s[:11] == "LD_PRELOAD:" }) {
		t.Errorf("left out %q", left)
	}
}
