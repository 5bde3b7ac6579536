//go:build linux

package integration

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pyWheels holds the wheels of setuptools and wheel, which build the
// client, as Debian installs them.
const pyWheels = "/usr/share/python-wheels"

// pyClientFiles are what an install of the Python client and its tests
// need: a copy (HUTCH_PYTHON_CLIENT) that lacks one fails here, by name.
var pyClientFiles = []string{
	"pyproject.toml", "README.md", "LICENSE",
	"hutch_client/__init__.py", "hutch_client/aio.py", "hutch_client/py.typed",
	"tests/serve_fixture.py", "tests/test_hutch_client.py", "tests/test_aio.py",
	"tests/test_installed.py", "tests/test_wire.py",
}

// TestPythonClient installs the Python client (clients/python, the package
// hutch-client) into a new venv with pip, offline, and runs its tests
// (clients/python/tests: sync, asyncio and the wire's) with that
// venv's python against `hutch serve` of the CLI under test, which they
// start themselves, as whatever user runs the suite. The client is copied
// to a scratch directory first: the checkout may lie where the
// unprivileged uid cannot enter ($HUTCH_PYTHON_CLIENT names the copy make
// test-unprivileged made), and nothing is built in it. The tests run from
// a directory that holds no sources, and check that hutch_client is
// imported from the venv.
func TestPythonClient(t *testing.T) {
	src := os.Getenv("HUTCH_PYTHON_CLIENT")
	if src == "" {
		src = filepath.Join("..", "clients", "python")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the Python client's tests: ", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	work := dir(t, "pyclient-")
	client := filepath.Join(work, "python")
	if err := copyPyClient(src, client); err != nil {
		t.Fatalf("the Python client (set HUTCH_PYTHON_CLIENT to its directory): %v", err)
	}
	for _, name := range pyClientFiles {
		if _, err := os.Stat(filepath.Join(client, name)); err != nil {
			t.Fatalf("the Python client in %s lacks %s: %v", src, name, err)
		}
	}
	// Tests run from here: no hutch_client on sys.path but the venv's.
	elsewhere := filepath.Join(work, "run")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	env := pyEnv()
	run := func(name string, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, name, args...)
		c.Dir = elsewhere
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// The interpreter itself, not a shim (pyenv's) in front of it.
	base := strings.Fields(run(py, "-c", "import sys; print(sys.executable, sys.version.split()[0])"))
	if len(base) != 2 {
		t.Fatalf("%s printed %q for its executable and version", py, base)
	}
	t.Logf("python3: %s (Python %s)", base[0], base[1])
	venv := filepath.Join(work, "venv")
	// ensurepip installs pip from the wheels the interpreter carries
	// (Debian's needs python3-venv for them).
	run(base[0], "-m", "venv", venv)
	vpy := filepath.Join(venv, "bin", "python")
	// setuptools builds it, with the wheel package. Offline, pip takes
	// them from a directory of links: the interpreter's own setuptools
	// (what its ensurepip carries: Debian's, in /usr/share/python-wheels,
	// has a Debian patch that only Debian's python runs), and the wheel
	// package Debian's python3-wheel-whl installs (.ci/run installs it).
	links := filepath.Join(work, "wheels")
	must(os.Mkdir(links, 0o755))
	bundled := strings.TrimSpace(run(vpy, "-c", "import ensurepip, os; print(os.path.join(os.path.dirname(ensurepip.__file__), '_bundled'))"))
	for _, w := range []struct{ glob, from string }{
		{"setuptools-*.whl", bundled},
		{"setuptools-*.whl", pyWheels},
		{"wheel-*.whl", pyWheels},
	} {
		m, _ := filepath.Glob(filepath.Join(w.from, w.glob))
		if have, _ := filepath.Glob(filepath.Join(links, w.glob)); len(m) == 0 || len(have) > 0 {
			continue
		}
		must(os.Symlink(m[len(m)-1], filepath.Join(links, filepath.Base(m[len(m)-1]))))
	}
	for _, w := range []string{"setuptools-*.whl", "wheel-*.whl"} {
		if m, _ := filepath.Glob(filepath.Join(links, w)); len(m) == 0 {
			t.Fatalf("no %s in %s or %s to build the client with offline: apt-get install python3-setuptools-whl python3-wheel-whl", w, bundled, pyWheels)
		}
	}
	out := run(vpy, "-m", "pip", "install", "--no-index", "--find-links", links, "--no-cache-dir", client)
	if !strings.Contains(out, "Successfully installed hutch-client-0.1.0") {
		t.Fatalf("pip install %s did not say it installed hutch-client 0.1.0:\n%s", client, out)
	}

	// Imported from the venv, whole, here as in the tests (test_installed
	// says so again from inside them).
	where := strings.Fields(run(vpy, "-B", "-c",
		"import hutch_client, hutch_client.aio, os; print(os.path.realpath(hutch_client.__file__), os.path.realpath(hutch_client.aio.__file__))"))
	realVenv, err := filepath.EvalSymlinks(venv)
	if err != nil {
		t.Fatal(err)
	}
	if len(where) != 2 {
		t.Fatalf("import hutch_client printed %q", where)
	}
	for _, f := range where {
		if !strings.HasPrefix(f, realVenv+"/") {
			t.Fatalf("hutch_client is imported from %s, not from the venv %s", f, realVenv)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(where[0]), "py.typed")); err != nil {
		t.Fatalf("py.typed was not installed: %v", err)
	}

	tests := filepath.Join(client, "tests")
	c := exec.CommandContext(ctx, vpy, "-B", "-m", "unittest", "discover", "-v", "-s", tests, "-t", tests)
	c.Dir = elsewhere
	c.Env = append(env, "HUTCH_BIN="+hutchBin, "HUTCH_TEST_SCRATCH="+scratchBase, "HUTCH_PY_VENV="+venv)
	out2, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest discover %s: %v\n%s", tests, err, out2)
	}
	if strings.Contains(string(out2), "skipped=") {
		t.Fatalf("python -m unittest discover %s skipped tests:\n%s", tests, out2)
	}
	for _, module := range []string{"test_hutch_client.", "test_aio.", "test_wire.", "test_installed."} {
		if !strings.Contains(string(out2), module) {
			t.Fatalf("python -m unittest discover %s ran nothing of %s:\n%s", tests, strings.TrimSuffix(module, "."), out2)
		}
	}
	t.Logf("%s", out2)
}

// pyEnv is the environment without what would make Python or pip use
// something else than the venv and the copy (PYTHONPATH, a pip.conf's
// index or find-links, a virtualenv of the caller's).
func pyEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "PIP_") || k == "VIRTUAL_ENV" || k == "__PYVENV_LAUNCHER__" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PIP_CONFIG_FILE="+os.DevNull, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1")
}

// copyPyClient copies the client's directory, its regular files and
// directories, less caches, builds and venvs a developer left there.
func copyPyClient(src, dst string) error {
	skip := map[string]bool{"__pycache__": true, ".venv": true, "venv": true, "build": true, "dist": true, ".mypy_cache": true}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && rel != "." && (skip[d.Name()] || strings.HasSuffix(d.Name(), ".egg-info")):
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
