//go:build linux

package seccomp

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestDefaultCompiles(t *testing.T) {
	prog, err := Compile(Default())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(prog) / 8; n > 4096 {
		t.Errorf("program has %d instructions, over the kernel's 4096", n)
	}
	t.Logf("default profile: %d BPF instructions", len(prog)/8)
}

func TestComplementCover(t *testing.T) {
	sets := [][]uint32{{0x5412, 0x541C}, {0, 8, 0x20000, 0x20008, 0xffffffff}, {1, 2, 10}, {0}, {0xffffffff}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, set := range sets {
		cover := complementCover(set)
		check := func(v uint32) {
			matches := 0
			for _, mv := range cover {
				if uint64(v)&mv[0] == mv[1] {
					matches++
				}
			}
			in := slices.Contains(set, v)
			if in && matches != 0 || !in && matches != 1 {
				t.Fatalf("set %#x: value %#x matched %d cover entries (member: %v)", set, v, matches, in)
			}
		}
		for _, v := range set {
			check(v)
			check(v + 1)
			check(v - 1)
			check(v ^ 0x80000000)
		}
		for range 100000 {
			check(rng.Uint32())
		}
	}
}

func TestRoundTrip(t *testing.T) {
	want, err := Compile(Default())
	if err != nil {
		t.Fatal(err)
	}
	js, err := Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(js)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("profile -> JSON -> profile compiles to a different program (%d vs %d bytes)", len(got), len(want))
	}
}

func TestBadProfiles(t *testing.T) {
	cases := []struct {
		name, json, want string
	}{
		{"not json", `{"defaultAction": `, "not valid OCI seccomp JSON"},
		{"unknown field", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}],"bogus":1}`, "bogus"},
		{"unknown action", `{"defaultAction":"SCMP_ACT_MAYBE","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`, "SCMP_ACT_MAYBE"},
		{"unknown rule action", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_PERHAPS"}]}`, "SCMP_ACT_PERHAPS"},
		{"no rules", `{"defaultAction":"SCMP_ACT_ERRNO"}`, "no rules"},
		{"bad index", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}`, "index 6"},
		{"bad op", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_ABOUT"}]}]}`, "SCMP_CMP_ABOUT"},
		{"bad arch", `{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_Z80"],"syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`, "SCMP_ARCH_Z80"},
		{"notify", `{"defaultAction":"SCMP_ACT_ERRNO","listenerPath":"/x","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`, "listenerPath"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	p, err := Parse([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","no_such_call"],"action":"SCMP_ACT_ALLOW"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(p); err == nil || !strings.Contains(err.Error(), `"no_such_call"`) {
		t.Errorf("Compile of an unknown system call: got %v", err)
	}
}

func TestAdjust(t *testing.T) {
	p := Adjust(Default(), []string{"bpf"}, []string{"mkdir"})
	var allowBPF, denyMkdir bool
	for _, s := range p.Syscalls {
		if slices.Contains(s.Names, "bpf") && s.Action != "SCMP_ACT_ALLOW" {
			t.Errorf("bpf still has rule %s", s.Action)
		}
		if slices.Contains(s.Names, "bpf") && s.Action == "SCMP_ACT_ALLOW" {
			allowBPF = true
		}
		if slices.Contains(s.Names, "mkdir") && s.Action == "SCMP_ACT_ALLOW" {
			t.Errorf("mkdir still allowed")
		}
		if slices.Contains(s.Names, "mkdir") && s.Action == "SCMP_ACT_ERRNO" {
			denyMkdir = true
		}
	}
	if !allowBPF || !denyMkdir {
		t.Errorf("adjustments missing: bpf allowed %v, mkdir denied %v", allowBPF, denyMkdir)
	}
	if _, err := Compile(p); err != nil {
		t.Fatal(err)
	}
}
