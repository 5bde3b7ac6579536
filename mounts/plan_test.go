package mounts

import (
	"slices"
	"strings"
	"testing"
)

// indexesOf returns the indexes of p's steps of kind k.
func indexesOf(p Plan, k Kind) []int {
	var out []int
	for i, m := range p.Mounts {
		if m.Kind == k {
			out = append(out, i)
		}
	}
	return out
}

// targetsOf returns the targets of p's steps of kind k, in plan order.
func targetsOf(p Plan, k Kind) []string {
	var out []string
	for _, m := range p.Mounts {
		if m.Kind == k {
			out = append(out, m.Target)
		}
	}
	return out
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		// Expected targets per kind, in plan order (nil: none of that kind).
		binds []string
		dirs  []string
		ro    []string
		hide  []string
		pins  []string
		masks []string
	}{
		{
			name:  "workspace only",
			spec:  Spec{Workspace: "/w"},
			binds: []string{"/w"},
		},
		{
			name:  "home under /tmp",
			spec:  Spec{Workspace: "/w", Home: "/tmp/home"},
			binds: []string{"/w"},
			dirs:  []string{"/tmp/home"},
		},
		{
			name:  "deep home under /tmp: one dir per component, shallow first",
			spec:  Spec{Workspace: "/w", Home: "/tmp/a/b/c"},
			binds: []string{"/w"},
			dirs:  []string{"/tmp/a", "/tmp/a/b", "/tmp/a/b/c"},
		},
		{
			name:  "home is /tmp itself: no dir",
			spec:  Spec{Workspace: "/w", Home: "/tmp"},
			binds: []string{"/w"},
		},
		{
			name:  "home outside /tmp: no dir",
			spec:  Spec{Workspace: "/w", Home: "/w/home"},
			binds: []string{"/w"},
		},
		{
			name:  "home in a sibling of /tmp: no dir",
			spec:  Spec{Workspace: "/w", Home: "/tmpx/home"},
			binds: []string{"/w"},
		},
		{
			name:  "writable binds sorted and deduplicated",
			spec:  Spec{Workspace: "/w", Writable: []string{"/z", "/a", "/w", "/z", ""}},
			binds: []string{"/a", "/w", "/z"},
		},
		{
			name:  "mask outside every writable tree: no pin",
			spec:  Spec{Workspace: "/w", Deny: []string{"/etc/shadow", "/home/u/.ssh"}},
			binds: []string{"/w"},
			masks: []string{"/etc/shadow", "/home/u/.ssh"},
		},
		{
			// The inner masks are in the outer one's empty tmpfs: hidden
			// already, and no target to mount on (hutch serve hides its
			// data directory, a durable process's manager its records
			// below it). /srv/a-b sorts between /srv/a and /srv/a/b.
			name:  "masks within a mask are dropped",
			spec:  Spec{Workspace: "/w", Deny: []string{"/srv/a/b/c", "/srv/a", "/srv/a-b", "/srv/a/b"}},
			binds: []string{"/w"},
			masks: []string{"/srv/a", "/srv/a-b"},
		},
		{
			name:  "mask directly in the workspace: no pin",
			spec:  Spec{Workspace: "/w", Deny: []string{"/w/.env"}},
			binds: []string{"/w"},
			masks: []string{"/w/.env"},
		},
		{
			name:  "mask deep in the workspace: every ancestor pinned, shallow first",
			spec:  Spec{Workspace: "/w", Deny: []string{"/w/a/b/c/.env"}},
			binds: []string{"/w"},
			pins:  []string{"/w/a", "/w/a/b", "/w/a/b/c"},
			masks: []string{"/w/a/b/c/.env"},
		},
		{
			name:  "shared ancestors pinned once, shallow first then by name",
			spec:  Spec{Workspace: "/w", Deny: []string{"/w/z/y/.env", "/w/a/b/.env", "/w/a/.env.local", "/w/z/k"}},
			binds: []string{"/w"},
			pins:  []string{"/w/a", "/w/z", "/w/a/b", "/w/z/y"},
			masks: []string{"/w/a/.env.local", "/w/a/b/.env", "/w/z/k", "/w/z/y/.env"},
		},
		{
			name:  "workspace whose name prefixes another path: no pin for the sibling",
			spec:  Spec{Workspace: "/w", Deny: []string{"/wx/a/secret"}},
			binds: []string{"/w"},
			masks: []string{"/wx/a/secret"},
		},
		{
			name:  "mask in a nested writable tree is pinned from the deepest root",
			spec:  Spec{Workspace: "/w", Writable: []string{"/w/sub"}, Deny: []string{"/w/sub/a/secret"}},
			binds: []string{"/w", "/w/sub"},
			pins:  []string{"/w/sub/a"},
			masks: []string{"/w/sub/a/secret"},
		},
		{
			name:  "mask in a further writable tree",
			spec:  Spec{Workspace: "/w", Writable: []string{"/data"}, Deny: []string{"/data/x/y/key"}},
			binds: []string{"/data", "/w"},
			pins:  []string{"/data/x", "/data/x/y"},
			masks: []string{"/data/x/y/key"},
		},
		{
			name:  "hidden dirs and read-only paths",
			spec:  Spec{Workspace: "/w", HideDirs: []string{"/run", "/run"}, ReadOnly: []string{"/w/.git/hooks", "/w/.git/config"}},
			binds: []string{"/w"},
			hide:  []string{"/run"},
			pins:  []string{"/w/.git"},
			ro:    []string{"/w/.git/config", "/w/.git/hooks"},
		},
		{
			name:  "a read-only repository deep in a tree: its ancestors pinned",
			spec:  Spec{Workspace: "/w", ReadOnly: []string{"/w/a/b/.git", "/w/.git"}},
			binds: []string{"/w"},
			pins:  []string{"/w/a", "/w/a/b"},
			ro:    []string{"/w/.git", "/w/a/b/.git"},
		},
		{
			name:  "pinned directories and their ancestors, never a root",
			spec:  Spec{Workspace: "/w", Writable: []string{"/data"}, Pins: []string{"/w/a/.git", "/w", "/data/.git", "/elsewhere"}, ReadOnly: []string{"/w/a/.git/config"}},
			binds: []string{"/data", "/w"},
			pins:  []string{"/data/.git", "/w/a", "/w/a/.git"},
			ro:    []string{"/w/a/.git/config"},
		},
		{
			name: "everything together",
			spec: Spec{
				Workspace: "/w", Writable: []string{"/data"}, Home: "/tmp/home",
				Deny: []string{"/w/a/.env", "/etc/shadow", "/data/s/key"}, ReadOnly: []string{"/w/.git/hooks"},
				HideDirs: []string{"/run"},
			},
			binds: []string{"/data", "/w"},
			dirs:  []string{"/tmp/home"},
			hide:  []string{"/run"},
			ro:    []string{"/w/.git/hooks"},
			pins:  []string{"/data/s", "/w/.git", "/w/a"},
			masks: []string{"/data/s/key", "/etc/shadow", "/w/a/.env"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(tt.spec)
			if err := p.Validate(); err != nil {
				t.Fatalf("Validate of a built plan: %v", err)
			}
			if len(p.Mounts) < 4 {
				t.Fatalf("plan too short: %v", p.Mounts)
			}
			// The host root comes first, then the private mounts.
			want := []Mount{
				{Kind: HostRoot, Source: "/", Target: "/"},
				{Kind: Dev, Target: "/dev"},
				{Kind: Proc, Target: "/proc"},
				{Kind: Tmpfs, Target: "/tmp", Mode: 0o1777, SizeBytes: tt.spec.TmpSizeBytes},
			}
			if !slices.Equal(p.Mounts[:4], want) {
				t.Errorf("first steps = %v, want %v", p.Mounts[:4], want)
			}
			if n := len(indexesOf(p, HostRoot)); n != 1 {
				t.Errorf("%d host-root steps, want 1", n)
			}

			check := func(k Kind, want []string) {
				t.Helper()
				if got := targetsOf(p, k); !slices.Equal(got, want) {
					t.Errorf("%s targets = %q, want %q", k, got, want)
				}
			}
			check(BindRW, tt.binds)
			check(Dir, tt.dirs)
			check(ReadOnly, tt.ro)
			check(EmptyRO, tt.hide)
			check(Pin, tt.pins)
			check(Mask, tt.masks)
			check(BindRO, nil)

			for _, m := range p.Mounts {
				switch m.Kind {
				case BindRW:
					if m.Source != m.Target {
						t.Errorf("%v: bound at another path", m)
					}
				case Mask, Pin, EmptyRO, ReadOnly:
					if !m.Optional {
						t.Errorf("%v: not optional", m)
					}
				case Dir:
					if m.Mode != 0o700 {
						t.Errorf("%v: mode %#o, want 0700", m, m.Mode)
					}
				}
			}

			// Order: hide dirs after /tmp, binds after that, then dirs,
			// pins, read-only rebinds, and masks last of all.
			order := []Kind{HostRoot, Dev, Proc, Tmpfs, EmptyRO, BindRW, Dir, Pin, ReadOnly, Mask}
			rank := func(k Kind) int { return slices.Index(order, k) }
			for i := 1; i < len(p.Mounts); i++ {
				if rank(p.Mounts[i-1].Kind) > rank(p.Mounts[i].Kind) {
					t.Errorf("step %d (%v) comes after step %d (%v)", i, p.Mounts[i], i-1, p.Mounts[i-1])
				}
			}
			lastBind := slices.Max(append(indexesOf(p, BindRW), indexesOf(p, BindRO)...))
			for _, i := range indexesOf(p, Mask) {
				if i < lastBind {
					t.Errorf("mask %v at step %d precedes bind at step %d", p.Mounts[i], i, lastBind)
				}
			}
			for _, i := range indexesOf(p, Pin) {
				for _, j := range indexesOf(p, Mask) {
					if j < i {
						t.Errorf("mask at step %d precedes pin at step %d", j, i)
					}
				}
			}
			// Pins: shallow first, so no pin is buried under a later pin of
			// an ancestor.
			pins := targetsOf(p, Pin)
			for i := range pins {
				for j := i + 1; j < len(pins); j++ {
					if Within(pins[i], pins[j]) {
						t.Errorf("pin %s comes after its descendant %s", pins[j], pins[i])
					}
				}
			}
		})
	}
}

func TestBuildTmpSize(t *testing.T) {
	p := Build(Spec{Workspace: "/w", TmpSizeBytes: 64 << 20})
	for _, m := range p.Mounts {
		if m.Kind == Tmpfs && m.Target == "/tmp" {
			if m.SizeBytes != 64<<20 || m.Mode != 0o1777 {
				t.Fatalf("/tmp = %+v, want size 64MiB mode 1777", m)
			}
			return
		}
	}
	t.Fatal("no /tmp tmpfs in plan")
}

func TestBuildNoProc(t *testing.T) {
	for _, noProc := range []bool{false, true} {
		var kind Kind
		for _, m := range Build(Spec{Workspace: "/w", NoProc: noProc}).Mounts {
			if m.Target == "/proc" {
				kind = m.Kind
			}
		}
		want := Proc
		if noProc {
			want = EmptyRO
		}
		if kind != want {
			t.Errorf("NoProc %v: /proc is %q, want %q", noProc, kind, want)
		}
	}
}

// TestBuildDoesNotAliasSpec checks that Build leaves the caller's slices
// as they were.
func TestBuildDoesNotAliasSpec(t *testing.T) {
	deny := make([]string, 2, 10)
	deny[0], deny[1] = "/w/b/x", "/w/a/y"
	writable := []string{"/z", "/a"}
	s := Spec{Workspace: "/w", Deny: deny, Writable: writable}
	Build(s)
	if !slices.Equal(deny, []string{"/w/b/x", "/w/a/y"}) || !slices.Equal(deny[:3], []string{"/w/b/x", "/w/a/y", ""}) {
		t.Errorf("Build changed Spec.Deny: %q", deny[:3])
	}
	if !slices.Equal(writable, []string{"/z", "/a"}) {
		t.Errorf("Build changed Spec.Writable: %q", writable)
	}
}

func TestValidate(t *testing.T) {
	root := Mount{Kind: HostRoot, Source: "/", Target: "/"}
	tests := []struct {
		name    string
		plan    Plan
		wantErr string // substring; "" means valid
	}{
		{"empty plan", Plan{}, "must start with host-root or empty-root"},
		{"host root not first", Plan{Mounts: []Mount{{Kind: Tmpfs, Target: "/tmp"}, root}}, "must start with host-root"},
		{"host root only", Plan{Mounts: []Mount{root}}, ""},
		{"relative target", Plan{Mounts: []Mount{root, {Kind: Mask, Target: "etc/shadow"}}}, `target "etc/shadow"`},
		{"empty target", Plan{Mounts: []Mount{root, {Kind: Tmpfs, Target: ""}}}, `target ""`},
		{"target with ..", Plan{Mounts: []Mount{root, {Kind: Mask, Target: "/w/../etc"}}}, `target "/w/../etc"`},
		{"target with trailing slash", Plan{Mounts: []Mount{root, {Kind: Mask, Target: "/etc/"}}}, `target "/etc/"`},
		{"target with double slash", Plan{Mounts: []Mount{root, {Kind: Mask, Target: "//etc"}}}, `target "//etc"`},
		{"target with dot", Plan{Mounts: []Mount{root, {Kind: Mask, Target: "/./etc"}}}, `target "/./etc"`},
		{"relative source", Plan{Mounts: []Mount{root, {Kind: BindRW, Source: "w", Target: "/w"}}}, `source "w"`},
		{"unclean source", Plan{Mounts: []Mount{root, {Kind: BindRO, Source: "/w/./x", Target: "/w/x"}}}, `source "/w/./x"`},
		{"bind-rw without source", Plan{Mounts: []Mount{root, {Kind: BindRW, Target: "/w"}}}, "no source"},
		{"bind-ro without source", Plan{Mounts: []Mount{root, {Kind: BindRO, Target: "/w"}}}, "no source"},
		{"step index in message", Plan{Mounts: []Mount{root, {Kind: Proc, Target: "/proc"}, {Kind: Mask, Target: "x"}}}, "step 2 (mask)"},
		{"good plan", Build(Spec{Workspace: "/w", Deny: []string{"/w/a/.env"}, Home: "/tmp/home"}), ""},
		{"empty root only", Plan{Mounts: []Mount{{Kind: EmptyRoot, Target: "/"}}}, ""},
		{"two roots", Plan{Mounts: []Mount{root, {Kind: EmptyRoot, Target: "/"}}}, "step 1: empty-root only comes first"},
		{"root elsewhere", Plan{Mounts: []Mount{{Kind: EmptyRoot, Target: "/x"}}}, `target "/x" is not /`},
		{"symlink without content", Plan{Mounts: []Mount{root, {Kind: Symlink, Target: "/bin"}}}, "a link's content"},
		{"content without symlink", Plan{Mounts: []Mount{root, {Kind: BindRO, Source: "/a", Target: "/a", Link: "b"}}}, "a link's content"},
		{"symlink at the root", Plan{Mounts: []Mount{root, {Kind: Symlink, Target: "/", Link: "b"}}}, "target is /"},
		{"good listed plan", Build(Spec{Workspace: "/w", Home: "/tmp/home", Listed: &Listed{Trees: []string{"/usr"}, Links: []Link{{"/bin", "usr/bin"}}}}), ""},
		{"file", Plan{Mounts: []Mount{root, {Kind: File, Target: "/etc/hosts", Content: "127.0.1.1 hutch\n"}}}, ""},
		{"empty file", Plan{Mounts: []Mount{root, {Kind: File, Target: "/etc/hosts"}}}, ""},
		{"file over /", Plan{Mounts: []Mount{root, {Kind: File, Target: "/", Content: "x"}}}, "target / or content over"},
		{"file too big", Plan{Mounts: []Mount{root, {Kind: File, Target: "/etc/hosts", Content: strings.Repeat("x", MaxFileContent+1)}}}, "target / or content over"},
		{"file holding a NUL", Plan{Mounts: []Mount{root, {Kind: File, Target: "/etc/hosts", Content: "a\x00b"}}}, "holding a NUL"},
		{"content without a file", Plan{Mounts: []Mount{root, {Kind: BindRO, Source: "/a", Target: "/a", Content: "b"}}}, "content goes with a file"},
		{"good plan with a file", Build(Spec{Workspace: "/w", Files: []FileContent{{"/etc/hosts", "x"}}}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.plan.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate: nil, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Validate: %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
		rel    string
	}{
		{"/a", "/a", true, "."},
		{"/a/b", "/a", true, "b"},
		{"/a/b/c", "/a", true, "b/c"},
		{"/ab", "/a", false, ""},
		{"/a", "/ab", false, ""},
		{"/a", "/a/b", false, ""},
		{"/", "/a", false, ""},
		{"/", "/", true, "."},
		{"/a", "/", true, "a"},
		{"/a/b", "/", true, "a/b"},
		{"/tmp/home", "/tmp", true, "home"},
		{"/tmpx", "/tmp", false, ""},
		{"/proc", "/proc", true, "."},
		{"/proc/self", "/proc", true, "self"},
		{"/procfs", "/proc", false, ""},
		{"/b/c", "/a", false, ""}, // a slash where one would follow "/a", no prefix
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
		rel, ok := within(tt.p, tt.dir)
		if ok != tt.want || rel != tt.rel {
			t.Errorf("within(%q, %q) = %q, %v; want %q, %v", tt.p, tt.dir, rel, ok, tt.rel, tt.want)
		}
	}
}

func TestMountString(t *testing.T) {
	tests := []struct {
		m    Mount
		want string
	}{
		{Mount{Kind: HostRoot, Source: "/", Target: "/"}, "host-root /"},
		{Mount{Kind: BindRW, Source: "/w", Target: "/w"}, "bind-rw /w"},
		{Mount{Kind: BindRO, Source: "/h/x", Target: "/x"}, "bind-ro /x <- /h/x"},
		{Mount{Kind: Mask, Target: "/etc/shadow", Optional: true}, "mask /etc/shadow (optional)"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestLookup: what a path of the view is follows the mount table's rule,
// the last step covering it decides, on a plan built the way sandboxes
// build theirs.
func TestLookup(t *testing.T) {
	p := Build(Spec{
		Workspace: "/w",
		Writable:  []string{"/data", "/tmp/ws"},
		Deny:      []string{"/home/u/.ssh", "/w/.env", "/w/sub/.git/config"},
		ReadOnly:  []string{"/w/sub/.git"},
		Pins:      []string{"/w/sub"},
		HideDirs:  []string{"/run"},
		Files:     []FileContent{{"/etc/hosts", "127.0.1.1 hutch\n"}},
	})
	tests := []struct {
		path string
		want Place
	}{
		{"/", Place{Reach: OnHost, HostPath: "/"}},
		{"/etc/hosts", Place{Reach: Built}}, // made by the init, read-only, the same in every sandbox
		{"/etc/hostname", Place{Reach: OnHost, HostPath: "/etc/hostname"}},
		{"/etc/passwd", Place{Reach: OnHost, HostPath: "/etc/passwd"}},
		{"/home/u/notes", Place{Reach: OnHost, HostPath: "/home/u/notes"}},
		{"/home/u/.ssh", Place{Reach: Masked, Closed: true}},
		{"/home/u/.ssh/id", Place{Reach: Masked, Closed: true}},
		{"/home/u/.sshx", Place{Reach: OnHost, HostPath: "/home/u/.sshx"}},
		{"/w", Place{Reach: OnHost, HostPath: "/w", Writable: true}},
		{"/w/a/b", Place{Reach: OnHost, HostPath: "/w/a/b", Writable: true}},
		{"/w/.env", Place{Reach: Masked, Closed: true}},
		{"/w/.envrc", Place{Reach: OnHost, HostPath: "/w/.envrc", Writable: true}},
		{"/w/sub", Place{Reach: OnHost, HostPath: "/w/sub", Writable: true}},     // pinned: still writable
		{"/w/sub/.git/HEAD", Place{Reach: OnHost, HostPath: "/w/sub/.git/HEAD"}}, // read-only rebind
		{"/w/sub/.git/config", Place{Reach: Masked, Closed: true}},               // masked inside it
		{"/data/x", Place{Reach: OnHost, HostPath: "/data/x", Writable: true}},
		{"/tmp", Place{Reach: Private, Writable: true}},
		{"/tmp/x", Place{Reach: Private, Writable: true}},
		{"/tmp/ws/f", Place{Reach: OnHost, HostPath: "/tmp/ws/f", Writable: true}}, // a writable tree inside the private /tmp
		{"/dev/null", Place{Reach: Private}},
		{"/proc/self", Place{Reach: Private}},
		{"/run/dbus", Place{Reach: Masked}}, // hidden, but an empty directory one can enter
		{"/running", Place{Reach: OnHost, HostPath: "/running"}},
	}
	for _, tt := range tests {
		if got := p.Lookup(tt.path); got != tt.want {
			t.Errorf("Lookup(%q) = %+v; want %+v", tt.path, got, tt.want)
		}
	}
	for path, want := range map[string]bool{"/tmp": true, "/tmp/ws": false, "/": true, "/data": false, "/run": false} {
		if got := p.HostBelow(path); got != want {
			t.Errorf("HostBelow(%q) = %v", path, got)
		}
	}
	// App directories: an app sees its own, read-only, its data writable,
	// and nothing else of the workspace; an ordinary agent sees no app's
	// and the rest of the workspace as before.
	app := Build(Spec{Workspace: "/w", Writable: []string{"/out"}, Apps: &Apps{Dir: "/w/apps", ID: "a1"}})
	none := Build(Spec{Workspace: "/w", Apps: &Apps{Dir: "/w/apps"}})
	for _, tt := range []struct {
		plan     Plan
		path     string
		reach    Reach
		writable bool
	}{
		{app, "/w", Masked, false}, {app, "/w/other", Masked, false}, {app, "/w/apps", Masked, false},
		{app, "/w/apps/a2/x", Masked, false}, {app, "/w/apps/a1/x", OnHost, false},
		{app, "/w/apps/a1/data/x", OnHost, true}, {app, "/out/x", OnHost, true}, {app, "/etc/x", OnHost, false},
		{none, "/w/other", OnHost, true}, {none, "/w/apps", Masked, false}, {none, "/w/apps/a1/data/x", Masked, false},
	} {
		if got := tt.plan.Lookup(tt.path); got.Reach != tt.reach || got.Writable != tt.writable {
			t.Errorf("Lookup(%q) = %d writable %v; want %d writable %v", tt.path, got.Reach, got.Writable, tt.reach, tt.writable)
		}
	}
	for path, want := range map[string]bool{"/w": true, "/w/apps": true, "/w/apps/a2": false, "/w/other": false} {
		if got := app.HostBelow(path); got != want {
			t.Errorf("app a1: HostBelow(%q) = %v", path, got)
		}
	}
	// A later mount on an ancestor buries an earlier one beneath it.
	buried := Plan{Mounts: []Mount{{Kind: HostRoot, Source: "/", Target: "/"}, {Kind: BindRW, Source: "/a/b", Target: "/a/b"}, {Kind: Mask, Target: "/a"}}}
	if got := buried.Lookup("/a/b/c"); got.Reach != Masked {
		t.Errorf("a mask over /a left /a/b/c %d", got.Reach)
	}
	if buried.HostBelow("/a") {
		t.Error("a buried bind counts as a way below /a")
	}
}

// TestBuildApps: the steps Apps adds, and the masks, pins and read-only
// paths it drops where it hides the host's tree (a step there would only
// make its path appear in the empty directory).
func TestBuildApps(t *testing.T) {
	deny := []string{"/w/.env", "/w/apps/a1/.env", "/w/apps/a1/data/sub/.env", "/w/apps/a2/.env", "/etc/shadow"}
	readOnly := []string{"/w/.git", "/w/apps/a1/data/repo/.git"}
	for _, tt := range []struct {
		name string
		apps *Apps
		want []string // the plan's steps after the private mounts
	}{
		{"no apps", nil, []string{
			"bind-rw /w", "pin /w/apps (optional)", "pin /w/apps/a1 (optional)", "pin /w/apps/a2 (optional)", "pin /w/apps/a1/data (optional)",
			"pin /w/apps/a1/data/repo (optional)", "pin /w/apps/a1/data/sub (optional)", "read-only /w/.git (optional)", "read-only /w/apps/a1/data/repo/.git (optional)",
			"mask /etc/shadow (optional)", "mask /w/.env (optional)", "mask /w/apps/a1/.env (optional)",
			"mask /w/apps/a1/data/sub/.env (optional)", "mask /w/apps/a2/.env (optional)"}},
		{"ordinary agent", &Apps{Dir: "/w/apps"}, []string{
			"bind-rw /w", "empty-ro /w/apps (optional)", "read-only /w/.git (optional)",
			"mask /etc/shadow (optional)", "mask /w/.env (optional)"}},
		{"app a1", &Apps{Dir: "/w/apps", ID: "a1"}, []string{
			"empty-ro /w", "bind-ro /w/apps/a1 (optional)", "bind-rw /w/apps/a1/data (optional)",
			"pin /w/apps/a1/data/repo (optional)", "pin /w/apps/a1/data/sub (optional)", "read-only /w/apps/a1/data/repo/.git (optional)",
			"mask /etc/shadow (optional)", "mask /w/apps/a1/.env (optional)", "mask /w/apps/a1/data/sub/.env (optional)"}},
		{"app in a nested dir", &Apps{Dir: "/w/x/apps", ID: "a1"}, []string{
			"empty-ro /w", "bind-ro /w/x/apps/a1 (optional)", "bind-rw /w/x/apps/a1/data (optional)", "mask /etc/shadow (optional)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(Spec{Workspace: "/w", Deny: deny, ReadOnly: readOnly, Apps: tt.apps})
			var got []string
			for _, m := range p.Mounts[4:] {
				got = append(got, m.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestSpecTrees: the trees deny names are looked for in and the trees a
// command may write, for an ordinary agent and for an app.
func TestSpecTrees(t *testing.T) {
	for _, tt := range []struct {
		apps            *Apps
		trees, writable []string
	}{
		{nil, []string{"/w", "/out"}, []string{"/w", "/out"}},
		{&Apps{Dir: "/w/apps"}, []string{"/w", "/out"}, []string{"/w", "/out"}},
		{&Apps{Dir: "/w/apps", ID: "a1"}, []string{"/w/apps/a1", "/out"}, []string{"/w/apps/a1/data", "/out"}},
	} {
		s := Spec{Workspace: "/w", Writable: []string{"/out"}, Apps: tt.apps}
		if got := s.Trees(); !slices.Equal(got, tt.trees) {
			t.Errorf("%+v: Trees() = %v; want %v", tt.apps, got, tt.trees)
		}
		if got := s.WritableTrees(); !slices.Equal(got, tt.writable) {
			t.Errorf("%+v: WritableTrees() = %v; want %v", tt.apps, got, tt.writable)
		}
	}
}

// TestBuildListed: a listed view starts from an empty root, makes the
// host's links, binds the listed trees read-only after the private mounts
// (a tree listed in /tmp is not buried) and the outermost only; masks,
// hidden directories and guards outside what it shows are dropped, and
// Lookup finds nothing of the host there.
func TestBuildListed(t *testing.T) {
	s := Spec{
		Workspace: "/home/u/w", Writable: []string{"/srv/cache"}, Home: "/tmp/home",
		Deny:     []string{"/etc/shadow", "/root/.ssh", "/home/u/w/.env", "/home/other/.aws"},
		HideDirs: []string{"/run"}, ReadOnly: []string{"/home/u/w/.git"},
		Listed: &Listed{
			Trees: []string{"/usr", "/etc", "/usr/local/go", "/tmp/tools"},
			Links: []Link{{"/lib", "usr/lib"}, {"/bin", "usr/bin"}},
		},
	}
	p := Build(s)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Mounts[0].Kind != EmptyRoot {
		t.Fatalf("first step %v, want %s", p.Mounts[0], EmptyRoot)
	}
	if got, want := targetsOf(p, Symlink), []string{"/bin", "/lib"}; !slices.Equal(got, want) {
		t.Errorf("links %v, want %v", got, want)
	}
	if got, want := targetsOf(p, BindRO), []string{"/etc", "/tmp/tools", "/usr"}; !slices.Equal(got, want) {
		t.Errorf("read-only binds %v, want %v", got, want)
	}
	if tmp, tools := slices.Index(targetsOf(p, Tmpfs), "/tmp"), slices.IndexFunc(p.Mounts, func(m Mount) bool { return m.Target == "/tmp/tools" }); tmp < 0 || tools < indexesOf(p, Tmpfs)[0] {
		t.Errorf("/tmp/tools (step %d) is bound before the private /tmp: %v", tools, p.Mounts)
	}
	if got, want := targetsOf(p, Mask), []string{"/etc/shadow", "/home/u/w/.env"}; !slices.Equal(got, want) {
		t.Errorf("masks %v, want %v", got, want)
	}
	if got := targetsOf(p, EmptyRO); len(got) != 0 {
		t.Errorf("hidden directories %v, want none: /run is not in the view", got)
	}
	if got, want := targetsOf(p, ReadOnly), []string{"/home/u/w/.git"}; !slices.Equal(got, want) {
		t.Errorf("read-only %v, want %v", got, want)
	}
	for path, want := range map[string]Reach{
		"/": Built, "/root": Built, "/home/other": Built, "/var/lib": Built, "/bin": Built,
		"/usr/bin/sh": OnHost, "/etc/passwd": OnHost, "/home/u/w/x": OnHost, "/srv/cache/y": OnHost,
		"/tmp/x": Private, "/tmp/tools/t": OnHost,
	} {
		if got := p.Lookup(path).Reach; got != want {
			t.Errorf("Lookup(%s).Reach = %v, want %v", path, got, want)
		}
	}
	if pl := p.Lookup("/usr/bin/sh"); pl.Writable {
		t.Errorf("/usr/bin/sh is writable in the view")
	}
}

// TestBuildBinds: a bind shows its source at its target, after the trees
// at their own paths; what is masked, read-only or pinned inside its
// source is so at its target too (and still at its own path); the
// source is where deny names are looked for; a listed view keeps what
// lies in a target; Lookup gives the host's path.
func TestBuildBinds(t *testing.T) {
	s := Spec{
		Workspace: "/w",
		Deny:      []string{"/data/u1/.env", "/data/u1/a/b/key"},
		ReadOnly:  []string{"/data/u1/repo/.git"},
		Binds:     []Bind{{Source: "/data/u1", Target: "/home/agent", Writable: true}, {Source: "/srv/ref", Target: "/ref"}},
	}
	for _, listed := range []bool{false, true} {
		if listed {
			s.Listed = &Listed{Trees: []string{"/usr"}}
		}
		p := Build(s)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		wantMasks := []string{"/data/u1/.env", "/data/u1/a/b/key", "/home/agent/.env", "/home/agent/a/b/key"}
		if listed {
			wantMasks = wantMasks[2:] // the sources are not in a listed view
		}
		if got := targetsOf(p, Mask); !slices.Equal(got, wantMasks) {
			t.Errorf("listed %v: masks %v, want %v", listed, got, wantMasks)
		}
		if got := targetsOf(p, ReadOnly); !slices.Contains(got, "/home/agent/repo/.git") {
			t.Errorf("listed %v: read-only %v, want the bound repository's .git", listed, got)
		}
		if got := targetsOf(p, Pin); !slices.Contains(got, "/home/agent/a") || !slices.Contains(got, "/home/agent/a/b") {
			t.Errorf("listed %v: pins %v, want the bound mask's ancestors", listed, got)
		}
		if i, j := slices.Index(targetsOf(p, BindRW), "/home/agent"), slices.Index(targetsOf(p, BindRW), "/w"); i < j {
			t.Errorf("listed %v: the bind comes before the workspace: %v", listed, p.Mounts)
		}
		if pl := p.Lookup("/home/agent/x"); pl.Reach != OnHost || pl.HostPath != "/data/u1/x" || !pl.Writable {
			t.Errorf("listed %v: Lookup(/home/agent/x) = %+v", listed, pl)
		}
		if pl := p.Lookup("/ref/x"); pl.Reach != OnHost || pl.HostPath != "/srv/ref/x" || pl.Writable {
			t.Errorf("listed %v: Lookup(/ref/x) = %+v", listed, pl)
		}
	}
	if got, want := s.Trees(), []string{"/w", "/data/u1", "/srv/ref"}; !slices.Equal(got, want) {
		t.Errorf("Trees() = %v, want %v", got, want)
	}
	if got, want := s.WritableView(), []string{"/w", "/home/agent"}; !slices.Equal(got, want) {
		t.Errorf("WritableView() = %v, want %v", got, want)
	}
}
