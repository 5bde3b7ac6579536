//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonClient runs the Python client's own tests
// (clients/python/test_hutch_client.py) against `hutch serve` of the CLI
// under test, which they start themselves, as whatever user runs the
// suite. The client is copied to a scratch directory: the checkout may
// lie where the unprivileged uid cannot enter ($HUTCH_PYTHON_CLIENT names
// the copy make test-unprivileged made).
func TestPythonClient(t *testing.T) {
	src := os.Getenv("HUTCH_PYTHON_CLIENT")
	if src == "" {
		src = filepath.Join("..", "clients", "python")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the Python client's tests: ", err)
	}
	dst := dir(t, "pyclient-")
	for _, name := range []string{"hutch_client.py", "test_hutch_client.py"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("the Python client (set HUTCH_PYTHON_CLIENT to its directory): %v", err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := exec.Command(py, "-B", "-m", "unittest", "-v", "test_hutch_client")
	c.Dir = dst
	c.Env = append(os.Environ(), "HUTCH_BIN="+hutchBin, "HUTCH_TEST_SCRATCH="+scratchBase)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_hutch_client: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
