//go:build linux

// Package integration drives the real hutch CLI and the runtime library
// and checks every verdict from the host side: the host's files, processes,
// sockets and mounts, never what the sandboxed command says about itself.
//
// The suite runs as whatever user starts it; `make test` runs it as root
// and again as an unprivileged uid.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// hutchBin is the CLI under test: $HUTCH_BIN, or built by TestMain.
var hutchBin string

// scratchBase is where workspaces and "outside" directories are made. It
// is deliberately not /tmp: the sandbox has a private /tmp, so a host path
// under /tmp is invisible inside, and a write there would prove nothing.
var scratchBase string

// fakeHome replaces $HOME for the suite: it holds planted secrets that the
// default deny-list must mask.
var fakeHome string

const sshSecret = "HUTCH-IT-SSH-PRIVATE-KEY-7f3a"

func TestMain(m *testing.M) {
	if os.Getenv(durableHostEnv) != "" {
		os.Exit(durableHost())
	}
	if os.Getenv(orphansEnv) != "" {
		os.Exit(orphansHelper())
	}
	os.Exit(func() int {
		sweepScratch()
		base, err := os.MkdirTemp("/var/tmp", fmt.Sprintf("%s%d-", scratchPrefix, os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			return 1
		}
		defer os.RemoveAll(base)
		_ = os.Chmod(base, 0o755)
		scratchBase = base

		// The CLI is built before $HOME changes: go keeps its module and
		// build caches under $HOME, and a fresh home would fetch and
		// compile everything again (and fail offline).
		hutchBin = os.Getenv("HUTCH_BIN")
		if hutchBin == "" {
			hutchBin = filepath.Join(base, "hutch")
			// Its helpers beside it, where hutch looks for them first.
			for _, pkg := range []string{"hutch", "hutch-image", "hutch-grants"} {
				out, err := exec.Command("go", "build", "-o", filepath.Join(base, pkg), "github.com/hutchbox/hutch/cmd/"+pkg).CombinedOutput()
				if err != nil {
					fmt.Fprintf(os.Stderr, "integration: build %s: %v\n%s", pkg, err, out)
					return 1
				}
			}
		}

		fakeHome = filepath.Join(base, "home")
		must(os.MkdirAll(filepath.Join(fakeHome, ".ssh"), 0o700))
		must(os.WriteFile(filepath.Join(fakeHome, ".ssh", "id_ed25519"), []byte(sshSecret+"\n"), 0o600))
		must(os.WriteFile(filepath.Join(fakeHome, ".netrc"), []byte("machine x login y password "+sshSecret+"\n"), 0o600))
		must(os.MkdirAll(filepath.Join(fakeHome, ".aws"), 0o700))
		must(os.WriteFile(filepath.Join(fakeHome, ".aws", "credentials"), []byte(sshSecret+"\n"), 0o600))
		os.Setenv("HOME", fakeHome)

		return m.Run()
	}())
}

// scratchPrefix names the suite's scratch directories in /var/tmp, with
// the pid of the run that made them.
const scratchPrefix = "hutch-it-"

// sweepScratch removes the scratch directories of earlier runs that died
// without cleaning up (a test timeout panics past every deferred call):
// those whose pid is gone, or that carry none.
func sweepScratch() {
	old, _ := filepath.Glob(filepath.Join("/var/tmp", scratchPrefix+"*"))
	for _, d := range old {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), scratchPrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && syscall.Kill(n, 0) != syscall.ESRCH {
			continue // still running, or not ours to tell
		}
		_ = os.RemoveAll(d)
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// dir makes a fresh directory under scratchBase.
func dir(t *testing.T, prefix string) string {
	t.Helper()
	// The VM harness must never report green when a guest test failed:
	// HUTCH_TEST_BREAK=TestName makes that test fail on purpose, to prove
	// it (see integration/vm).
	if os.Getenv("HUTCH_TEST_BREAK") == t.Name() {
		t.Errorf("HUTCH_TEST_BREAK=%s: failing on purpose", t.Name())
	}
	d, err := os.MkdirTemp(scratchBase, prefix)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// cliResult is one run of the CLI.
type cliResult struct {
	code           int
	stdout, stderr string
	result         *runtime.Result
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runCLI runs `hutch run --workspace ws [flags] -- cmd...` and reads back
// its --result-json.
func runCLI(t *testing.T, ws string, flags []string, cmd ...string) cliResult {
	t.Helper()
	rj := filepath.Join(t.TempDir(), "result.json")
	args := append([]string{"run", "--workspace", ws, "--result-json", rj}, flags...)
	r := runCLIArgs(t, append(append(args, "--"), cmd...)...)
	if b, err := os.ReadFile(rj); err == nil {
		r.result = new(runtime.Result)
		if err := json.Unmarshal(b, r.result); err != nil {
			t.Fatalf("result json: %v", err)
		}
	}
	return r
}

// runCLIArgs runs hutch with exactly args (five minutes at most: a guard
// against a hang, longer than any --timeout a test gives, on a host
// loaded by another job).
func runCLIArgs(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIArgsEnv(t, nil, args...)
}

// runCLIArgsEnv is runCLIArgs with env added to the test's environment.
func runCLIArgsEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, hutchBin, args...)
	if env != nil {
		c.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("hutch: %v", err)
	}
	return r
}

// sh runs a shell script through the CLI.
func sh(t *testing.T, ws, script string, flags ...string) cliResult {
	t.Helper()
	return runCLI(t, ws, flags, "sh", "-c", script)
}

// newSandbox makes a library Sandbox on the default policy.
func newSandbox(t *testing.T, ws string, mod ...func(*runtime.Policy)) *runtime.Sandbox {
	t.Helper()
	p := runtime.DefaultPolicy(ws)
	for _, f := range mod {
		f(&p)
	}
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// procsWithArg lists host pids whose command line contains arg.
func procsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uniqueSleep returns a sleep duration argument no other test uses, so
// that its processes can be found on the host by command line.
var sleepSeq = 0

func uniqueSleep() string {
	sleepSeq++
	return fmt.Sprintf("%d.%03d%d", 900+sleepSeq, os.Getpid()%1000, sleepSeq)
}
