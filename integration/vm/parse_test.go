package main

import (
	"strings"
	"testing"
	"time"
)

// console builds a guest console from marker and output lines.
func console(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n" }

func TestParseConsole(t *testing.T) {
	const (
		booted = "@@HUTCH-VM BOOTED@@"
		layers = "@@HUTCH-VM LAYERS kernel=6.1.0 landlock=2 cgroup=v2@@"
	)
	begin := func(test string) string { return "@@HUTCH-VM BEGIN user=root test=" + test + "@@" }
	end := func(test, rc string) string {
		return "@@HUTCH-VM END user=root test=" + test + " rc=" + rc + " secs=1@@"
	}
	tests := []struct {
		name         string
		log          string
		tests        []string
		wantPass     int
		wantFail     int
		wantSkip     int
		wantProblems int
		wantWhy      string // in a failure's explanation
	}{{
		name: "pass",
		log: console(booted, layers, begin("TestA"), "=== RUN   TestA", "--- PASS: TestA (0.01s)", "PASS", end("TestA", "0"),
			"@@HUTCH-VM DONE passed=1 failed=0 skipped=0 root=1/0/0@@"),
		tests: []string{"TestA"}, wantPass: 1,
	}, {
		name: "skip",
		log: console(booted, begin("TestA"), "=== RUN   TestA", "    a_test.go:3: no cgroups here", "--- SKIP: TestA (0.00s)", "PASS", end("TestA", "0"),
			"@@HUTCH-VM DONE passed=0 failed=0 skipped=1@@"),
		tests: []string{"TestA"}, wantSkip: 1,
	}, {
		name: "failure is named with its message",
		log: console(booted, begin("TestA"), "=== RUN   TestA", "    a_test.go:9: host: file written", "--- FAIL: TestA (0.01s)", "FAIL", end("TestA", "1"),
			"@@HUTCH-VM DONE passed=0 failed=1 skipped=0@@"),
		tests: []string{"TestA"}, wantFail: 1, wantWhy: "a_test.go:9: host: file written",
	}, {
		name: "exit 0 without a verdict line is a failure",
		log: console(booted, begin("TestA"), "=== RUN   TestA", end("TestA", "0"),
			"@@HUTCH-VM DONE passed=0 failed=1 skipped=0@@"),
		tests: []string{"TestA"}, wantFail: 1, wantWhy: "no verdict line",
	}, {
		name: "a PASS line with a panic after it is a failure",
		log: console(booted, begin("TestA"), "--- PASS: TestA (0.01s)", "panic: runtime error", end("TestA", "2"),
			"@@HUTCH-VM DONE passed=0 failed=1 skipped=0@@"),
		tests: []string{"TestA"}, wantFail: 1, wantWhy: "panicked",
	}, {
		name:  "cut off mid-test: no END, no DONE",
		log:   console(booted, begin("TestA"), "=== RUN   TestA"),
		tests: []string{"TestA", "TestB"}, wantFail: 2, wantProblems: 1, wantWhy: "cut off",
	}, {
		name:  "never booted",
		log:   console("Kernel panic - not syncing: VFS: Unable to mount root fs"),
		tests: []string{"TestA"}, wantFail: 1, wantProblems: 3, wantWhy: "never ran",
	}, {
		name: "the guest's tally must agree with the host's",
		log: console(booted, begin("TestA"), "--- FAIL: TestA (0.01s)", end("TestA", "1"),
			"@@HUTCH-VM DONE passed=1 failed=0 skipped=0@@"),
		tests: []string{"TestA"}, wantFail: 1, wantProblems: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := parseConsole(tt.log, []string{"root"}, tt.tests)
			p, f, s := g.count()
			if p != tt.wantPass || f != tt.wantFail || s != tt.wantSkip || len(g.Problems) != tt.wantProblems {
				t.Errorf("got %d passed, %d failed, %d skipped, problems %q; want %d, %d, %d, %d problems",
					p, f, s, g.Problems, tt.wantPass, tt.wantFail, tt.wantSkip, tt.wantProblems)
			}
			if tt.wantWhy != "" {
				var why []string
				for _, r := range g.Results {
					why = append(why, r.Why...)
				}
				if !strings.Contains(strings.Join(why, "\n"), tt.wantWhy) {
					t.Errorf("failure explanation %q lacks %q", why, tt.wantWhy)
				}
			}
		})
	}
}

func TestReportExitStatus(t *testing.T) {
	k := []*kernel{{Spec: kernelSpec{Name: "6.1"}}}
	ok := &guestResult{Layers: map[string]string{}, Results: []testResult{{User: "root", Test: "TestA", Status: statusPass}}}
	bad := &guestResult{Layers: map[string]string{}, Results: []testResult{{User: "root", Test: "TestA", Status: statusFail}}}
	lost := &guestResult{Layers: map[string]string{}, Results: []testResult{{User: "root", Test: "TestA", Status: statusPass}}, Problems: []string{"no DONE"}}
	for _, tt := range []struct {
		name string
		g    *guestResult
		code int
	}{{"all passed", ok, 0}, {"a test failed", bad, 1}, {"the guest failed", lost, 1}} {
		_, _, _, code := report(k, []*guestResult{tt.g}, make([]time.Duration, 1), []string{"log"}, nil, []string{"root"})
		if code != tt.code {
			t.Errorf("%s: exit status %d, want %d", tt.name, code, tt.code)
		}
	}
}
