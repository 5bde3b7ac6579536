//go:build linux && cgo

package nsinit

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain runs the re-executed test binary's jobs: a child that applies
// C steps to itself for a test that judges the result from outside.
func TestMain(m *testing.M) {
	if job := os.Getenv(landlockChildEnv); job != "" {
		os.Exit(runLandlockChild(job))
	}
	if job := os.Getenv(confineChildEnv); job != "" {
		os.Exit(runConfineChild(job))
	}
	if os.Getenv(mountsChildEnv) != "" {
		os.Exit(mountsChild())
	}
	os.Exit(m.Run())
}

// childCommand is the test binary again, to do job as the child of env.
func childCommand(t *testing.T, env string, job any) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(b))
	return cmd
}

// pipe returns a non-blocking pipe, closed at the test's end.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(p[0])
		unix.Close(p[1])
	})
	return p[0], p[1]
}
