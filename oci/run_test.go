//go:build linux

package oci_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

// fakeRuntime writes an OCI runtime that hutch's Run drives as it drives
// runc: "run" starts its container (a process whose pid it writes to
// container, which writes late after life seconds) only delay seconds after it is
// asked to, as runsc does on a loaded host; "kill" fails while there is
// no container, or always when killable is false.
func fakeRuntime(t *testing.T, delay, life string, killable bool) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	kill := `[ -s "$dir/container" ] || exit 1; kill -s "$3" "$(cat "$dir/container")"`
	if !killable {
		kill = "exit 1"
	}
	script := `#!/bin/sh
dir=` + dir + `
case "$1" in
run)
	sleep ` + delay + `
	python3 -c 'import sys, time; time.sleep(float(sys.argv[2])); open(sys.argv[1], "w")' "$dir/late" ` + life + ` &
	echo $! > "$dir/container"
	wait $!
	exit $? ;;
kill) ` + kill + ` ;;
esac
exit 0
`
	path = filepath.Join(dir, "fakert")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// TestRunTimeoutReachesLateContainer: a --timeout whose kills find no
// container yet (the runtime makes it later) still ends the command: Run
// sends SIGKILL until the runtime exits. The host sees the container's
// process gone and its file never written once Run returns, and the
// Result says killed by the timeout, with SIGKILL's status. A runtime
// that says success for a command the timeout could not reach reads as
// killed, never as exit 0.
func TestRunTimeoutReachesLateContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("oci.Run needs root")
	}
	p := runtime.DefaultPolicy(t.TempDir())
	p.Backend = runtime.BackendOCI
	checked, err := runtime.Check(p)
	if err != nil {
		t.Fatal(err)
	}
	form, err := oci.Export(checked, []string{"true"}, oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	form.Timeout, form.Grace = 200*time.Millisecond, 200*time.Millisecond

	path, dir := fakeRuntime(t, "1", "5", true)
	r, err := oci.Run(context.Background(), form, path, oci.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "late")); err == nil {
		t.Error("host: the container made after the timeout ran to its end")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "container")); err != nil {
		t.Errorf("host: the fake runtime made no container: %v", err)
	} else if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || syscall.Kill(pid, 0) == nil {
		t.Errorf("host: container %q still runs after Run returned", b)
	}
	if !r.Killed || r.KillReason != runtime.KilledTimeout || r.ExitCode != 128+int(syscall.SIGKILL) || r.Signal != syscall.SIGKILL {
		t.Errorf("Result: killed %v (%q), exit %d, signal %v; want killed by the timeout, 137, SIGKILL", r.Killed, r.KillReason, r.ExitCode, r.Signal)
	}

	path, _ = fakeRuntime(t, "0.3", "0.2", false)
	form.Timeout, form.Grace = 100*time.Millisecond, 100*time.Millisecond
	r, err = oci.Run(context.Background(), form, path, oci.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Killed || r.ExitCode == 0 {
		t.Errorf("a runtime that exits 0 after the timeout: Result killed %v, exit %d; want killed, not 0", r.Killed, r.ExitCode)
	}
}
