//go:build linux

package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// TestPolicyOwnedBySandbox: changing the caller's policy slices, or those
// Policy() returns, after New changes nothing; and no configuration lets
// the filesystem layer degrade, since a failed view leaves the host tree
// reachable.
func TestPolicyOwnedBySandbox(t *testing.T) {
	extra := t.TempDir()
	outside := t.TempDir()
	p := runtime.DefaultPolicy(t.TempDir())
	p.Writable = []string{extra}
	p.AllowDegraded = []runtime.Layer{runtime.LayerLoopback}
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	p.AllowDegraded[0] = runtime.LayerFilesystem
	sb.Policy().AllowDegraded[0] = runtime.LayerFilesystem
	if err := os.RemoveAll(extra); err != nil {
		t.Fatal(err)
	}
	c := sb.Command(context.Background(), "/.oldroot/usr/bin/touch", "/.oldroot"+outside+"/escaped")
	err = c.Run()
	var se *runtime.SetupError
	if !errors.As(err, &se) || se.Layer != runtime.LayerFilesystem {
		t.Errorf("want a filesystem SetupError, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Fatal("host: the command wrote outside the sandbox")
	}
}

func TestKernelTreesNeverWritable(t *testing.T) {
	for _, w := range []string{"/proc/sys/vm", "/sys/kernel", "/dev/shm"} {
		p := runtime.DefaultPolicy(t.TempDir())
		p.Writable = []string{w}
		_, err := runtime.New(p)
		var pe *runtime.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Writable[0]" {
			t.Errorf("Writable %s: got %v", w, err)
		}
	}
}

// TestDirThroughSymlinkIntoProc: a workspace symlink cannot make /proc the
// command's working directory: Start refuses it on the host.
func TestDirThroughSymlinkIntoProc(t *testing.T) {
	sb, ws := newSandbox(t)
	if err := os.Symlink("/proc/self", filepath.Join(ws, "p")); err != nil {
		t.Fatal(err)
	}
	c := sb.Command(context.Background(), "pwd")
	c.Dir = "p"
	noSpawn(t, func() { wantPolicyError(t, c.Run(), "Cmd.Dir") })
	if err := c.Wait(); err == nil {
		t.Error("Wait after a failed Start succeeded")
	}
}

// TestStartupPhases: a Result says where the startup went.
func TestStartupPhases(t *testing.T) {
	sb, _ := newSandbox(t)
	c := sb.Command(context.Background(), "true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	var names []string
	var sum time.Duration
	for _, p := range c.Result.Phases {
		names = append(names, p.Name)
		if p.Nanos < 0 {
			t.Errorf("phase %s: %d ns", p.Name, p.Nanos)
		}
		sum += time.Duration(p.Nanos)
	}
	want := []string{"spawn", "config", "keyring-uts-loopback", "filesystem", "confine", "wait-command", "exec"}
	if !slices.Equal(names, want) {
		t.Errorf("phases %v, want %v", names, want)
	}
	if sum <= 0 || sum > c.Result.Startup+time.Millisecond {
		t.Errorf("phases add up to %v, startup %v", sum, c.Result.Startup)
	}
}

// TestHomeNeverWritable: a workspace or writable path that contains the
// home directory is refused: shell start-up files and a not-yet-existing
// ~/.ssh would be writable, and run on the host at the next login.
func TestHomeNeverWritable(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	p := runtime.DefaultPolicy(home)
	_, err := runtime.New(p)
	var pe *runtime.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Workspace" {
		t.Errorf("workspace = home: %v", err)
	}
	p = runtime.DefaultPolicy(t.TempDir())
	p.Writable = []string{filepath.Dir(home)}
	if _, err := runtime.New(p); !errors.As(err, &pe) || pe.Field != "Writable[0]" {
		t.Errorf("writable parent of home: %v", err)
	}
}
