package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The guest's console protocol (see init.sh). Each marker stands alone on
// a line:
//
//	@@HUTCH-VM BOOTED@@
//	@@HUTCH-VM LAYERS kernel=... landlock=... cgroup=...@@
//	@@HUTCH-VM BEGIN user=U test=T@@
//	... go test -v output of that one test ...
//	@@HUTCH-VM END user=U test=T rc=N secs=S@@
//	@@HUTCH-VM DONE passed=P failed=F skipped=S U=p/f/s...@@
//
// The host decides every verdict itself from the test's own output and
// exit status; the guest's DONE counts are only cross-checked.
var markerRE = regexp.MustCompile(`@@HUTCH-VM ([A-Z]+)((?: [^@ ]*)*)@@`)

const (
	statusPass = "pass"
	statusFail = "fail"
	statusSkip = "skip"
)

// testResult is one test in one guest as one user.
type testResult struct {
	User, Test string
	Status     string
	RC         int
	Secs       int
	// Why holds, for a failure, the lines that say what failed.
	Why []string
}

// guestResult is what one boot produced.
type guestResult struct {
	Layers  map[string]string
	Booted  bool
	Done    bool
	Results []testResult
	// Problems are failures of the guest as a whole: no end marker, a
	// kernel panic, a wall-clock timeout, counts that disagree.
	Problems []string
}

func (g *guestResult) count() (pass, fail, skip int) {
	for _, r := range g.Results {
		switch r.Status {
		case statusPass:
			pass++
		case statusSkip:
			skip++
		default:
			fail++
		}
	}
	return
}

func fields(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

var (
	testFileLine = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)
	kernelPanic  = regexp.MustCompile(`Kernel panic - not syncing|BUG: kernel NULL pointer|general protection fault`)
)

// parseConsole reads a guest's console log. users and tests are what the
// guest was asked to run: each pair must come back with an END marker and
// a verdict of its own, or it counts as failed.
func parseConsole(log string, users, tests []string) *guestResult {
	g := &guestResult{Layers: map[string]string{}}
	got := map[[2]string]int{} // (user, test) -> index in Results
	var cur *[2]string
	var block []string
	var doneFields map[string]string

	closeBlock := func(rc, secs int, ended bool) {
		if cur == nil {
			return
		}
		r := classify(cur[0], cur[1], block, rc, ended)
		r.Secs = secs
		got[*cur] = len(g.Results)
		g.Results = append(g.Results, r)
		cur, block = nil, nil
	}

	for _, line := range strings.Split(strings.ReplaceAll(log, "\r", ""), "\n") {
		if kernelPanic.MatchString(line) {
			g.Problems = append(g.Problems, "kernel: "+strings.TrimSpace(line))
		}
		m := markerRE.FindStringSubmatch(line)
		if m == nil {
			if cur != nil {
				block = append(block, line)
			}
			continue
		}
		f := fields(m[2])
		switch m[1] {
		case "BOOTED":
			g.Booted = true
		case "LAYERS":
			g.Layers = f
		case "BEGIN":
			closeBlock(-1, 0, false) // a BEGIN without END: the test was cut off
			key := [2]string{f["user"], f["test"]}
			cur = &key
		case "END":
			rc, err := strconv.Atoi(f["rc"])
			if err != nil {
				rc = -1
			}
			secs, _ := strconv.Atoi(f["secs"])
			if cur == nil || cur[0] != f["user"] || cur[1] != f["test"] {
				g.Problems = append(g.Problems, fmt.Sprintf("END marker for %s/%s without its BEGIN", f["user"], f["test"]))
				continue
			}
			closeBlock(rc, secs, true)
		case "DMESG":
			closeBlock(-1, 0, false)
		case "DONE":
			closeBlock(-1, 0, false)
			g.Done = true
			doneFields = f
		}
	}
	closeBlock(-1, 0, false)

	// Every requested test as every user must have come back.
	for _, u := range users {
		for _, t := range tests {
			if _, ok := got[[2]string{u, t}]; !ok {
				g.Results = append(g.Results, testResult{User: u, Test: t, Status: statusFail, RC: -1,
					Why: []string{"never ran: no BEGIN/END markers for it on the console"}})
			}
		}
	}
	if !g.Booted {
		g.Problems = append(g.Problems, "the guest never reached /init (no BOOTED marker)")
	}
	if !g.Done {
		g.Problems = append(g.Problems, "the guest never printed its end marker (DONE)")
	} else {
		// Cross-check the guest's own tally with the host's.
		p, fl, s := g.count()
		gp, _ := strconv.Atoi(doneFields["passed"])
		gf, _ := strconv.Atoi(doneFields["failed"])
		gs, _ := strconv.Atoi(doneFields["skipped"])
		if gp != p || gf != fl || gs != s {
			g.Problems = append(g.Problems, fmt.Sprintf("the guest counted %d passed, %d failed, %d skipped; the console shows %d, %d, %d", gp, gf, gs, p, fl, s))
		}
	}
	return g
}

// classify turns one test's output and exit status into a verdict. A pass
// needs all of: the END marker, exit status 0, the test's own top-level
// "--- PASS" line, and no FAIL or panic anywhere in its output.
func classify(user, test string, block []string, rc int, ended bool) testResult {
	r := testResult{User: user, Test: test, RC: rc}
	var passed, skipped, failed, panicked, timedOut bool
	for _, l := range block {
		switch {
		case strings.HasPrefix(l, "--- PASS: "+test+" "):
			passed = true
		case strings.HasPrefix(l, "--- SKIP: "+test+" "):
			skipped = true
		case strings.Contains(l, "--- FAIL:"), l == "FAIL" || strings.HasPrefix(l, "FAIL\t"):
			failed = true
		case strings.HasPrefix(l, "panic: "):
			panicked = true
			if strings.Contains(l, "test timed out") {
				timedOut = true
			}
		}
	}
	switch {
	case !ended:
		r.Status = statusFail
		r.Why = append(r.Why, "cut off: no END marker (the guest died, hung or ran out of time during this test)")
	case rc != 0:
		r.Status = statusFail
		switch {
		case timedOut:
			r.Why = append(r.Why, "timed out (-test.timeout)")
		case rc == 137:
			r.Why = append(r.Why, "killed by the guest's watchdog (timeout -s KILL)")
		case panicked:
			r.Why = append(r.Why, "panicked")
		}
		r.Why = append(r.Why, fmt.Sprintf("exit status %d", rc))
	case failed || panicked:
		r.Status = statusFail
		r.Why = append(r.Why, "exit status 0 but the output reports a failure or panic")
	case passed:
		r.Status = statusPass
	case skipped:
		r.Status = statusSkip
		for _, l := range block {
			if testFileLine.MatchString(l) {
				r.Why = append(r.Why, strings.TrimSpace(l))
			}
		}
		return r
	default:
		r.Status = statusFail
		r.Why = append(r.Why, "exit status 0 but no verdict line for the test (did it run?)")
	}
	if r.Status == statusFail {
		r.Why = append(r.Why, failureLines(block, 60)...)
	}
	return r
}

// failureLines picks what explains a failure from a test's output: the
// t.Error lines with their continuation lines, FAIL lines, panics (with a
// few lines of the trace).
func failureLines(block []string, max int) []string {
	var out []string
	inMsg := 0 // indentation of the message being continued, or 0
	panicLines := 0
	for _, l := range block {
		indent := len(l) - len(strings.TrimLeft(l, " \t"))
		switch {
		case testFileLine.MatchString(l):
			out = append(out, l)
			inMsg = indent
		case inMsg > 0 && indent > inMsg && strings.TrimSpace(l) != "":
			out = append(out, l)
		case strings.Contains(l, "--- FAIL:"):
			out = append(out, l)
			inMsg = 0
		case strings.HasPrefix(l, "panic: "):
			out = append(out, l)
			panicLines = 8
			inMsg = 0
		case panicLines > 0:
			out = append(out, l)
			panicLines--
		default:
			inMsg = 0
		}
		if len(out) >= max {
			out = append(out, "...")
			break
		}
	}
	return out
}
