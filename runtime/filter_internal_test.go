//go:build linux

package runtime

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/seccomp"
)

// TestFilterPrecompiled: a policy whose profile is one of seccomp's
// built-in filters gets its precompiled program and compiles nothing; a
// profile of the caller's, or the default with calls allowed or denied,
// is compiled. The result names stay what they were.
func TestFilterPrecompiled(t *testing.T) {
	if _, ok := seccomp.BuiltinDefault.Precompiled(); !ok {
		t.Skip("no precompiled programs for this architecture")
	}
	tests := []struct {
		name     string
		policy   Policy
		level    Level
		builtin  seccomp.Builtin // "": compiled
		wantName string
	}{
		{"default", Policy{}, LevelNamespaces, seccomp.BuiltinDefault, "hutch-default"},
		{"default, landlock, host network", Policy{Network: NetworkHost}, LevelLandlock, seccomp.BuiltinDefault, "hutch-default"},
		{"default, landlock", Policy{}, LevelLandlock, seccomp.BuiltinDefaultNoSocket, "hutch-default+no-socket"},
		{"allow", Policy{SeccompAllow: []string{"ptrace"}}, LevelNamespaces, "", "hutch-default+adjusted"},
		{"deny", Policy{SeccompDeny: []string{"chdir"}}, LevelNamespaces, "", "hutch-default+adjusted"},
		{"deny, landlock", Policy{SeccompDeny: []string{"chdir"}}, LevelLandlock, "", "hutch-default+adjusted+no-socket"},
		{"custom default", Policy{Seccomp: seccomp.Default()}, LevelNamespaces, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var compiled [][]byte
			defer func(f func(*seccomp.Profile) ([]byte, error)) { compileProfile = f }(compileProfile)
			compileProfile = func(p *seccomp.Profile) ([]byte, error) {
				prog, err := seccomp.Compile(p)
				compiled = append(compiled, prog)
				return prog, err
			}
			sb := &Sandbox{policy: tt.policy, machine: machine{levelState: levelState{level: tt.level}}}
			if err := sb.compileFilter(); err != nil {
				t.Fatal(err)
			}
			if tt.wantName != "" && sb.filterName != tt.wantName {
				t.Errorf("filter name %q, want %q", sb.filterName, tt.wantName)
			}
			if tt.builtin != "" {
				want, _ := tt.builtin.Precompiled()
				if len(compiled) > 0 {
					t.Errorf("compiled %d programs, want the precompiled %s", len(compiled), tt.builtin)
				}
				if !bytes.Equal(sb.filter, want) {
					t.Errorf("filter is not the precompiled %s", tt.builtin)
				}
				return
			}
			if len(compiled) == 0 || !bytes.Equal(sb.filter, compiled[0]) {
				t.Errorf("filter was not compiled from the policy's profile")
			}
		})
	}
}

// TestUnixWallPrecompiled: the unix wall is the precompiled program.
func TestUnixWallPrecompiled(t *testing.T) {
	want, ok := seccomp.BuiltinUnixWall.Precompiled()
	if !ok {
		t.Skip("no precompiled programs for this architecture")
	}
	sb := &Sandbox{machine: machine{levelState: levelState{level: LevelNamespaces}}}
	if err := sb.compileFilter(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sb.unixWall, want) {
		t.Error("unix wall is not the precompiled program")
	}
}

// BenchmarkCompileFilter is what a Sandbox pays for its filters, once, in
// New: nothing to compile for the default policy's, libseccomp for an
// adjusted one (and the mode wall, when calls are allowed).
func BenchmarkCompileFilter(b *testing.B) {
	for _, bb := range []struct {
		name   string
		policy Policy
	}{
		{"default", Policy{}},
		{"deny", Policy{SeccompDeny: []string{"chdir"}}},
		{"allow", Policy{SeccompAllow: []string{"ptrace"}}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for range b.N {
				sb := &Sandbox{policy: bb.policy, machine: machine{levelState: levelState{level: LevelNamespaces}}}
				if err := sb.compileFilter(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFilterOldKernelRefusesTracing: on a kernel where a tracer could
// carry a system call past the filter (before Linux 4.8), tracing is
// refused whatever the profile says, and the filter's name says so.
func TestFilterOldKernelRefusesTracing(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policy   Policy
		wantName string
	}{
		{"default", Policy{}, "hutch-default+no-tracing"},
		{"allowed by the caller", Policy{SeccompAllow: []string{"ptrace"}}, "hutch-default+adjusted+no-tracing"},
		{"custom", Policy{Seccomp: seccomp.Default()}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prof, builtin, name, err := filterProfile(&tt.policy, LevelNamespaces, true)
			if err != nil {
				t.Fatal(err)
			}
			if builtin != "" {
				t.Fatalf("the precompiled %s for an old kernel", builtin)
			}
			if tt.wantName != "" && name != tt.wantName {
				t.Errorf("name %q, want %q", name, tt.wantName)
			}
			for _, call := range seccomp.Tracing() {
				if got := callAction(prof, call); got != "SCMP_ACT_ERRNO" {
					t.Errorf("%s: %s, want SCMP_ACT_ERRNO", call, got)
				}
			}
			if _, err := seccomp.Compile(prof); err != nil {
				t.Fatal(err)
			}
		})
	}
	prof, builtin, _, _ := filterProfile(&Policy{}, LevelNamespaces, false)
	if builtin != seccomp.BuiltinDefault || prof != nil {
		t.Errorf("a kernel of 4.8 or later: builtin %q, profile %v; want the default's, precompiled", builtin, prof != nil)
	}
	if got := callAction(seccomp.Default(), "ptrace"); got != "SCMP_ACT_ALLOW" {
		t.Errorf("the default profile: ptrace %s, want SCMP_ACT_ALLOW", got)
	}
}

// callAction is the action of the last rule of p naming call.
func callAction(p *seccomp.Profile, call string) string {
	act := string(p.DefaultAction)
	for _, s := range p.Syscalls {
		if slices.Contains(s.Names, call) {
			act = string(s.Action)
		}
	}
	return act
}

func TestKernelBefore(t *testing.T) {
	for _, tt := range []struct {
		release string
		want    bool
	}{
		{"6.18.0-1-amd64", false},
		{"4.8.0", false},
		{"4.7.10-generic", true},
		{"3.19.0", true},
		{"5.10.0", false},
		{"garbage", true},
		{"", true},
	} {
		if got := kernelBefore(tt.release, 4, 8); got != tt.want {
			t.Errorf("kernelBefore(%q, 4, 8) = %v, want %v", tt.release, got, tt.want)
		}
	}
}

// TestFilterNested: Policy.AllowNested opens seccomp.Nested in whatever
// profile the policy has, before the caller's own adjustments (a call in
// SeccompDeny stays refused), and the filter's name says so.
func TestFilterNested(t *testing.T) {
	for _, tt := range []struct {
		name      string
		policy    Policy
		level     Level
		oldKernel bool
		wantName  string
		// refused are calls of seccomp.Nested that stay refused.
		refused []string
	}{
		{"default", Policy{AllowNested: true}, LevelNamespaces, false, "hutch-default+nested", nil},
		{"denied by the caller", Policy{AllowNested: true, SeccompDeny: []string{"setns"}}, LevelNamespaces, false, "hutch-default+nested+adjusted", []string{"setns"}},
		{"no network namespace", Policy{AllowNested: true}, LevelLandlock, false, "hutch-default+nested+no-socket", nil},
		{"old kernel", Policy{AllowNested: true}, LevelNamespaces, true, "hutch-default+nested+no-tracing", nil},
		{"custom", Policy{AllowNested: true, Seccomp: seccomp.Default()}, LevelNamespaces, false, "+nested", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prof, builtin, name, err := filterProfile(&tt.policy, tt.level, tt.oldKernel)
			if err != nil {
				t.Fatal(err)
			}
			if builtin != "" || prof == nil {
				t.Fatalf("builtin %q: the precompiled default for a nested policy", builtin)
			}
			if !strings.HasSuffix(name, tt.wantName) {
				t.Errorf("name %q, want %q", name, tt.wantName)
			}
			for _, call := range seccomp.Nested() {
				if slices.Contains(tt.refused, call) {
					if got := callAction(prof, call); got != "SCMP_ACT_ERRNO" {
						t.Errorf("%s: %s, want SCMP_ACT_ERRNO", call, got)
					}
				} else if !opened(prof, call) {
					t.Errorf("%s: not allowed (but for argument checks)", call)
				}
			}
			if got := callAction(prof, "mount"); got != "SCMP_ACT_ERRNO" {
				t.Errorf("mount: %s, want SCMP_ACT_ERRNO", got)
			}
			if _, err := seccomp.Compile(prof); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, builtin, name, _ := filterProfile(&Policy{}, LevelNamespaces, false); builtin != seccomp.BuiltinDefault || name != seccomp.DefaultName {
		t.Errorf("without AllowNested: builtin %q, name %q; want the default, precompiled", builtin, name)
	}
}

// TestCheckNested: where Policy.AllowNested is refused, and why.
func TestCheckNested(t *testing.T) {
	for _, tt := range []struct {
		name      string
		nested    bool
		level     Level
		euid      int
		oldKernel bool
		want      string // in the refusal; "" for none
	}{
		{"off", false, LevelLandlock, 0, true, ""},
		{"namespaces", true, LevelNamespaces, 1000, false, ""},
		{"namespaces as root", true, LevelNamespaces, 0, false, ""},
		{"no proc", true, LevelNamespacesNoProc, 1000, true, ""},
		{"landlock", true, LevelLandlock, 1000, false, "at level landlock is the host's"},
		{"root before 5.12", true, LevelNamespaces, 0, true, "before 5.12"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkNested(&Policy{AllowNested: tt.nested}, tt.level, tt.euid, tt.oldKernel)
			var pe *PolicyError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!errors.As(err, &pe) || pe.Field != "AllowNested" || !strings.Contains(pe.Reason, tt.want)):
				t.Errorf("got %v, want a refusal of AllowNested saying %q", err, tt.want)
			}
		})
	}
}

// opened says whether p allows call, refusing it only for some values of
// its arguments (unshare's CLONE_NEWTIME) if at all.
func opened(p *seccomp.Profile, call string) bool {
	allowed := false
	for _, s := range p.Syscalls {
		if !slices.Contains(s.Names, call) {
			continue
		}
		switch {
		case s.Action == "SCMP_ACT_ALLOW":
			allowed = true
		case len(s.Args) == 0:
			allowed = false
		}
	}
	return allowed
}

// TestNestedUserCounts: a sandbox whose commands may make namespaces caps
// how many its user namespace may hold, to a share of the host user's;
// the default sandbox writes only the shared counts, as before.
func TestNestedUserCounts(t *testing.T) {
	def := (&Sandbox{}).userCounts()
	nested := (&Sandbox{policy: Policy{AllowNested: true}}).userCounts()
	for _, n := range nestedCounts {
		if _, ok := def[n]; ok {
			t.Errorf("the default sandbox caps %s", n)
		}
		b, err := os.ReadFile("/proc/sys/user/" + n)
		if err != nil {
			continue // not on this kernel
		}
		host, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if got := nested[n]; got == 0 || got > max(1, host/userCountShare) {
			t.Errorf("%s: %d, want at most a %dth of the host's %d", n, got, userCountShare, host)
		}
	}
	for _, n := range sharedCounts {
		if def[n] != nested[n] {
			t.Errorf("%s: %d nested, %d by default", n, nested[n], def[n])
		}
	}
}
