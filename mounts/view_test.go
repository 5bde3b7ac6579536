package mounts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestResolveView resolves paths of a view whose links are the host's (in
// a bind whose target is not its source) and the plan's own (a listed
// view's): each is followed where the view has it, and the resolution
// stops at what the host cannot read further (the private /tmp, a mask).
func TestResolveView(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"rel": "dir", "abs": "/etc", "up": "../outside", "loop": "loop"} {
		if err := os.Symlink(to, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}
	p := Build(Spec{
		Workspace: "/w",
		Binds:     []Bind{{Source: src, Target: "/mnt/b"}},
		Deny:      []string{"/w/secret"},
		Listed:    &Listed{Trees: []string{"/usr"}, Links: []Link{{Path: "/bin", Target: "usr/bin"}}},
	})
	tests := []struct{ in, want string }{
		{"/mnt/b/rel/x", "/mnt/b/dir/x"},                     // the bind's link, relative to where the view has it
		{"/mnt/b/abs/passwd", "/etc/passwd"},                 // absolute: from the view's root
		{"/mnt/b/up", "/mnt/outside"},                        // ..: in the view, not in src's parent
		{"/bin/no-such-program", "/usr/bin/no-such-program"}, // the plan's own link
		{"/tmp/x/../y", "/tmp/y"},                            // private: kept as written, cleaned
		{"/w/secret/../a", "/w/a"},
	}
	for _, tt := range tests {
		if got, ok := p.ResolveView(tt.in); !ok || got != tt.want {
			t.Errorf("ResolveView(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	if got, ok := p.ResolveView("/mnt/b/loop"); ok {
		t.Errorf("ResolveView of a loop = %q, true", got)
	}
}

// TestDecider names the step that makes a path what Lookup says, and a
// ReadOnly step after it; Holds says what a listed root holds.
func TestDecider(t *testing.T) {
	p := Build(Spec{Workspace: "/w", ReadOnly: []string{"/w/repo/.git"}, Deny: []string{"/w/.env"}, Listed: &Listed{Trees: []string{"/usr"}}})
	tests := []struct {
		in       string
		kind, ro Kind
	}{
		{"/w/a", BindRW, ""},
		{"/w/repo/.git/hooks", BindRW, ReadOnly},
		{"/w/.env", Mask, ""},
		{"/usr/lib", BindRO, ""},
		{"/home", EmptyRoot, ""},
		{"/tmp/x", Tmpfs, ""},
	}
	for _, tt := range tests {
		if step, ro := p.Decider(tt.in); step.Kind != tt.kind || ro.Kind != tt.ro {
			t.Errorf("Decider(%q) = %s, %s; want %s, %s", tt.in, step.Kind, ro.Kind, tt.kind, tt.ro)
		}
	}
	for in, want := range map[string]bool{"/": true, "/w": true, "/usr": true, "/home": false, "/var": false} {
		if got := p.Holds(in); got != want {
			t.Errorf("Holds(%q) = %v, want %v", in, got, want)
		}
	}
}
