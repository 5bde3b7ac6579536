//go:build linux

package cgroups

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRlimits(t *testing.T) {
	base := []Rlimit{
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_NOFILE, NoFileCap, NoFileCap},
	}
	tests := []struct {
		name string
		l    Limits
		want []Rlimit
	}{
		{"none", Limits{}, base},
		{"memory", Limits{MemoryBytes: 256 << 20}, append(slices.Clone(base), Rlimit{unix.RLIMIT_DATA, 256 << 20, 256 << 20})},
		{"pids", Limits{Pids: 64}, append(slices.Clone(base), Rlimit{unix.RLIMIT_NPROC, 64, 64})},
		{"file size", Limits{FileSizeBytes: 1 << 30}, append(slices.Clone(base), Rlimit{unix.RLIMIT_FSIZE, 1 << 30, 1 << 30})},
		// CPUs is a rate: no RLIMIT_CPU. Swap and io weight have no rlimit.
		{"cpus, swap, io", Limits{CPUs: 1.5, SwapBytes: 1 << 20, IOWeight: 50}, base},
		{"all", Limits{MemoryBytes: 1 << 30, Pids: 100, CPUs: 2, FileSizeBytes: 10 << 20}, append(slices.Clone(base),
			Rlimit{unix.RLIMIT_DATA, 1 << 30, 1 << 30},
			Rlimit{unix.RLIMIT_NPROC, 100, 100},
			Rlimit{unix.RLIMIT_FSIZE, 10 << 20, 10 << 20})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rlimits(tt.l)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Rlimits(%+v) =\n %v\nwant\n %v", tt.l, got, tt.want)
			}
			for _, r := range got {
				if r.Resource == unix.RLIMIT_CPU {
					t.Errorf("RLIMIT_CPU set from %+v", tt.l)
				}
			}
		})
	}
}
