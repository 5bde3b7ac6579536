//go:build linux

package cgroups

import (
	"testing"
	"time"
)

func TestSplitCPU(t *testing.T) {
	for _, tt := range []struct {
		total, user, sys uint64
		wantU, wantS     time.Duration
	}{
		{1000, 3, 1, 750, 250},
		{1000, 0, 0, 1000, 0}, // no ticks sampled (a short command): all user
		{1000, 5, 0, 1000, 0},
		{1000, 0, 5, 0, 1000},
		{uint64(10 * time.Hour), 1 << 40, 1 << 40, 5 * time.Hour, 5 * time.Hour}, // no overflow
	} {
		u, s := splitCPU(tt.total, tt.user, tt.sys)
		if u != tt.wantU || s != tt.wantS {
			t.Errorf("splitCPU(%d, %d, %d) = %v, %v; want %v, %v", tt.total, tt.user, tt.sys, u, s, tt.wantU, tt.wantS)
		}
	}
}

func TestKeyed(t *testing.T) {
	oomControl := []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
	if v, ok := keyed(oomControl, "oom_kill"); !ok || v != 3 {
		t.Errorf("oom_kill = %d, %v", v, ok)
	}
	if _, ok := keyed(oomControl, "oom"); ok {
		t.Error("a key prefix matched")
	}
	if v, ok := keyed([]byte("max max\n"), "max"); !ok || v != ^uint64(0) {
		t.Errorf(`"max" = %d, %v`, v, ok)
	}
	if pids := parsePids([]byte("12\n345\n\n")); len(pids) != 2 || pids[0] != 12 || pids[1] != 345 {
		t.Errorf("parsePids = %v", pids)
	}
}
