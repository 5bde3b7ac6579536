//go:build linux

package integration

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// homeAtStart is $HOME before TestMain points it at the fake home: npm
// keeps its cache there, and a fresh one would fetch every package again.
var homeAtStart = os.Getenv("HOME")

// TestTypeScriptClient runs the TypeScript client's own tests
// (clients/typescript/test/client.test.ts, compiled) against `hutch serve`
// of the CLI under test, which they start themselves, as whatever user
// runs the suite. From the checkout ($HUTCH_TS_CLIENT unset) the client is
// copied to a scratch directory and built there (npm ci, tsc): the
// checkout is left as it is. make test-unprivileged builds it as root
// before it switches users (uid 65534 has no home for npm's cache) and
// names the built copy, its package.json and dist/, in $HUTCH_TS_CLIENT.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (.ci/run installs Debian's nodejs and npm): the TypeScript client's tests need Node 18 or later")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	built := os.Getenv("HUTCH_TS_CLIENT")
	if built == "" {
		built = buildTSClient(t, ctx)
	} else if _, err := os.Stat(built); os.IsNotExist(err) {
		t.Skipf("HUTCH_TS_CLIENT=%s was not built: make test-unprivileged builds it only where node and npm are installed", built)
	}
	tests := filepath.Join("dist", "test", "client.test.js")
	if _, err := os.Stat(filepath.Join(built, tests)); err != nil {
		t.Fatalf("HUTCH_TS_CLIENT=%s holds no built client (npm ci && npm run build in clients/typescript, then copy package.json and dist/): %v", built, err)
	}
	c := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", tests)
	c.Dir = built
	c.Env = append(os.Environ(), "HUTCH_BIN="+hutchBin, "HUTCH_TEST_SCRATCH="+scratchBase)
	out, err := c.CombinedOutput()
	if err != nil {
		// The failures' names on the first line: make test-unprivileged
		// shows no more of it.
		t.Fatalf("node --test %s: %v; failed: %s\n%s", tests, err, strings.Join(failedTAP(out), "; "), out)
	}
	t.Logf("%s", out)
}

// failedTAP names the failed tests of node --test's TAP output, each
// with what its diagnostics say of the failure (error, expected, actual):
// make test-unprivileged shows only the first line of the message, so a
// failure seen once must say why there.
func failedTAP(out []byte) []string {
	var failed []string
	notOK := regexp.MustCompile(`^\s*not ok \d+ - (.*)$`)
	diag := regexp.MustCompile(`^\s*(error|expected|actual): (.*)$`)
	lines := strings.Split(string(out), "\n")
	for i := 0; i < len(lines); i++ {
		m := notOK.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		var why []string
		for j := i + 1; j < len(lines) && strings.TrimSpace(lines[j]) != "..." && !notOK.MatchString(lines[j]); j++ {
			if d := diag.FindStringSubmatch(lines[j]); d != nil {
				why = append(why, d[1]+": "+d[2])
			}
		}
		name := m[1]
		if len(why) > 0 {
			name += " (" + strings.Join(why, ", ") + ")"
		}
		failed = append(failed, name)
	}
	return failed
}

// buildTSClient copies the client's sources from the checkout to a
// scratch directory and builds them there: npm ci (the pinned
// typescript and @types/node of package-lock.json), then tsc.
func buildTSClient(t *testing.T, ctx context.Context) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (.ci/run installs Debian's nodejs and npm): the TypeScript client is built with it")
	}
	dst := dir(t, "tsclient-")
	copyTSClient(t, dst)
	for _, args := range [][]string{{"ci", "--loglevel=error"}, {"run", "build"}} {
		runNPM(t, ctx, npm, dst, args...)
	}
	return dst
}

// tsClientDir is the TypeScript client in the checkout.
var tsClientDir = filepath.Join("..", "clients", "typescript")

// copyTSClient copies the client's sources from the checkout to dst: all
// of clients/typescript but what a build there would have left
// (node_modules, dist, a packed tarball), so that the scratch copy is
// what a fresh checkout is.
func copyTSClient(t *testing.T, dst string) {
	t.Helper()
	err := filepath.WalkDir(tsClientDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(tsClientDir, p)
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
			return nil
		case d.IsDir() && (rel == "node_modules" || rel == "dist"):
			return filepath.SkipDir
		case d.IsDir():
			return os.Mkdir(filepath.Join(dst, rel), 0o755)
		case strings.HasSuffix(rel, ".tgz") || !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("the TypeScript client (set HUTCH_TS_CLIENT to a built copy): %v", err)
	}
}

// runNPM runs npm args in dir with npm's cache at the home the suite
// started with, and fails the test with npm's output if it fails.
func runNPM(t *testing.T, ctx context.Context, npm, dir string, args ...string) []byte {
	t.Helper()
	c := exec.CommandContext(ctx, npm, args...)
	c.Dir = dir
	c.Env = os.Environ()
	if homeAtStart != "" {
		c.Env = append(c.Env, "HOME="+homeAtStart)
	}
	c.Env = append(c.Env, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("npm %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

func TestFailedTAP(t *testing.T) {
	out := []byte(`TAP version 13
# Subtest: hutch serve through the TypeScript client
    # Subtest: kills a command at timeoutMs
    not ok 3 - kills a command at timeoutMs
      ---
      duration_ms: 3210.5
      failureType: 'testCodeFailure'
      error: 'Expected values to be strictly equal'
      code: 'ERR_ASSERTION'
      expected: 143
      actual: 137
      ...
    ok 4 - stops the command
not ok 1 - hutch serve through the TypeScript client
  ---
  error: '1 subtest failed'
  ...
`)
	got := failedTAP(out)
	want := []string{
		"kills a command at timeoutMs (error: 'Expected values to be strictly equal', expected: 143, actual: 137)",
		"hutch serve through the TypeScript client (error: '1 subtest failed')",
	}
	if !slices.Equal(got, want) {
		t.Errorf("failedTAP = %q; want %q", got, want)
	}
}
