//go:build linux && cgo

package seccomp

import (
	"bytes"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// TestPrecompiled: each embedded program is, byte for byte, what
// libseccomp compiles from its profile now. A change to a profile, or
// another libseccomp, makes them differ until go generate runs again.
func TestPrecompiled(t *testing.T) {
	if goruntime.GOARCH != precompiledArch {
		t.Skipf("the programs are embedded for %s; this is %s", precompiledArch, goruntime.GOARCH)
	}
	major, minor, micro := libseccomp.GetLibraryVersion()
	for _, b := range Builtins() {
		t.Run(string(b), func(t *testing.T) {
			want, err := b.Compile()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := b.Precompiled()
			if !ok {
				t.Fatalf("%s is not embedded: run go generate ./seccomp", b.file())
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s (%d bytes) is not what libseccomp %d.%d.%d compiles from its profile now (%d bytes): run go generate ./seccomp",
					b.file(), len(got), major, minor, micro, len(want))
			}
		})
	}
}

// TestPrecompiledNothingElse: no program is embedded but the built-ins',
// and a name that is no Builtin has neither a program nor a profile.
func TestPrecompiledNothingElse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("precompiled", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(Builtins(), func(b Builtin) bool { return b.file() == filepath.ToSlash(f) }) {
			t.Errorf("%s is no built-in filter's program: run go generate ./seccomp", f)
		}
	}
	for _, b := range []Builtin{"", "custom", "../profile.go", "default+adjusted"} {
		if _, ok := b.Precompiled(); ok {
			t.Errorf("Builtin(%q).Precompiled(): a program", b)
		}
		if b.Profile() != nil {
			t.Errorf("Builtin(%q).Profile(): a profile", b)
		}
		if _, err := b.Compile(); err == nil {
			t.Errorf("Builtin(%q).Compile(): no error", b)
		}
	}
}
