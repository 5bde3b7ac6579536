//go:build linux && cgo

package nsinit

import (
	"debug/elf"
	"os"
	"testing"
)

// TestStageBindsNow checks that a binary linking the stage binds every
// symbol when it starts (stage_linux.go's -z now): the zygote's forks
// then never enter ld.so to bind one. A static binary binds nothing at
// run time and passes.
func TestStageBindsNow(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".dynamic") == nil {
		t.Skip("a static binary: nothing is bound at run time")
	}
	flags, err := f.DynValue(elf.DT_FLAGS)
	if err != nil {
		t.Fatal(err)
	}
	flags1, err := f.DynValue(elf.DT_FLAGS_1)
	if err != nil {
		t.Fatal(err)
	}
	now := false
	for _, v := range flags {
		now = now || elf.DynFlag(v)&elf.DF_BIND_NOW != 0
	}
	for _, v := range flags1 {
		now = now || elf.DynFlag1(v)&elf.DF_1_NOW != 0
	}
	if !now {
		t.Errorf("%s binds lazily (DT_FLAGS %v, DT_FLAGS_1 %v): each init would bind libc again", exe, flags, flags1)
	}
}
