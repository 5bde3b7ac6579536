//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// failedTAP names the failed tests of node --test's TAP output.
func failedTAP(out []byte) []string {
	var failed []string
	for _, m := range regexp.MustCompile(`(?m)^\s*not ok \d+ - (.*)$`).FindAllSubmatch(out, -1) {
		failed = append(failed, string(m[1]))
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
	src := filepath.Join("..", "clients", "typescript")
	dst := dir(t, "tsclient-")
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("the TypeScript client (set HUTCH_TS_CLIENT to a built copy): %v", err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"src", "test"} {
		if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(src, name))); err != nil {
			t.Fatal(err)
		}
	}
	env := os.Environ()
	if homeAtStart != "" {
		env = append(env, "HOME="+homeAtStart)
	}
	env = append(env, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	for _, args := range [][]string{{"ci", "--loglevel=error"}, {"run", "build"}} {
		c := exec.CommandContext(ctx, npm, args...)
		c.Dir = dst
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("npm %v in %s: %v\n%s", args, dst, err, out)
		}
	}
	return dst
}
