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

// TestRustClient runs the Rust client's own tests (clients/rust: its unit
// tests, and tests/server.rs, which start `hutch serve` of the CLI under
// test themselves) as whatever user runs the suite. From the checkout
// ($HUTCH_RUST_CLIENT_TESTS unset) the crate is copied to a scratch
// directory and `cargo test --offline` runs there, its target directory
// and cargo's home in scratch too: the checkout is left as it is. make
// test-unprivileged builds the test executables as root before it
// switches users (uid 65534 has no home for cargo, and cannot use root's
// rustup) and names their directory in $HUTCH_RUST_CLIENT_TESTS; they are
// run as they are.
func TestRustClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := append(os.Environ(), "HUTCH_BIN="+hutchBin, "HUTCH_TEST_SCRATCH="+scratchBase, "RUST_BACKTRACE=0")

	if built := os.Getenv("HUTCH_RUST_CLIENT_TESTS"); built != "" {
		runRustTests(t, ctx, built, env)
		return
	}
	cargo := findCargo()
	if cargo == "" {
		t.Skip("cargo is not installed (.ci/run installs Debian's cargo): the Rust client's tests are built with it")
	}
	src := filepath.Join("..", "clients", "rust")
	dst := dir(t, "rustclient-")
	for _, name := range []string{"Cargo.toml", "README.md"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("the Rust client (set HUTCH_RUST_CLIENT_TESTS to its built tests): %v", err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"src", "tests"} {
		if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(src, name))); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, rustEnv(cargo, dst)...)
	c := exec.CommandContext(ctx, cargo, "test", "--offline")
	c.Dir = dst
	c.Env = env
	out, err := c.CombinedOutput()
	if err != nil {
		// The failures' names on the first line: make test-unprivileged
		// shows no more of it.
		t.Fatalf("%s test --offline in %s: %v; failed: %s\n%s", cargo, dst, err, strings.Join(failedCargo(out), "; "), out)
	}
	t.Logf("%s", out)
}

// findCargo is cargo on $PATH, else rustup's in the home the suite
// started with (TestMain has pointed $HOME elsewhere since); "" if none.
func findCargo() string {
	if p, err := exec.LookPath("cargo"); err == nil {
		return p
	}
	if homeAtStart != "" {
		p := filepath.Join(homeAtStart, ".cargo", "bin", "cargo")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// rustEnv is cargo's environment for a build in dst: its target
// directory and its home there (the suite's $HOME is a fake one, and
// nothing of the crate's build belongs in the real one); cargo's own
// directory first on $PATH, where rustc lies beside it (rustup's proxies
// find each other through $CARGO_HOME/bin, moved here); and, for rustup's
// proxies, the toolchains of the home the suite started with.
func rustEnv(cargo, dst string) []string {
	env := []string{
		"CARGO_TARGET_DIR=" + filepath.Join(dst, "target"),
		"CARGO_HOME=" + filepath.Join(dst, "cargo-home"),
		"CARGO_TERM_COLOR=never",
		"PATH=" + filepath.Dir(cargo) + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	if os.Getenv("RUSTUP_HOME") == "" && homeAtStart != "" {
		if fi, err := os.Stat(filepath.Join(homeAtStart, ".rustup")); err == nil && fi.IsDir() {
			env = append(env, "RUSTUP_HOME="+filepath.Join(homeAtStart, ".rustup"))
		}
	}
	return env
}

// runRustTests runs each test executable in built, as cargo test would
// have.
func runRustTests(t *testing.T, ctx context.Context, built string, env []string) {
	t.Helper()
	ents, err := os.ReadDir(built)
	if os.IsNotExist(err) {
		t.Skipf("HUTCH_RUST_CLIENT_TESTS=%s was not built: make test-unprivileged builds it only where cargo is installed", built)
	}
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		ran++
		exe := filepath.Join(built, e.Name())
		c := exec.CommandContext(ctx, exe)
		c.Dir = built
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v; failed: %s\n%s", exe, err, strings.Join(failedCargo(out), "; "), out)
			continue
		}
		t.Logf("%s:\n%s", exe, out)
	}
	if ran == 0 {
		t.Fatalf("HUTCH_RUST_CLIENT_TESTS=%s holds no test executables (cargo test --no-run in clients/rust, then copy the executables it names)", built)
	}
}

// failedCargo names the failed tests of a Rust test harness's output.
func failedCargo(out []byte) []string {
	var failed []string
	for _, m := range regexp.MustCompile(`(?m)^test (\S+) \.\.\. FAILED$`).FindAllSubmatch(out, -1) {
		failed = append(failed, string(m[1]))
	}
	return failed
}
