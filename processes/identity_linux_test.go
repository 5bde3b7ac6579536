//go:build linux

package processes

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestIdentifySelf(t *testing.T) {
	id, err := Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if id.StartTime == 0 || id.BootID == "" || id.BootID+"\n" != string(boot) {
		t.Errorf("identity %+v (boot_id %q)", id, boot)
	}
	if live, err := id.Live(); err != nil || !live {
		t.Errorf("this process is not live: %v, %v", live, err)
	}
	fd, err := id.Open()
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

// TestIdentityNeverHitsAnotherProcess: an identity whose pid now names
// another process (another start time), or that ran in another boot, is
// not live, opens nothing, and signals nothing: the process at that pid
// still runs, checked from /proc.
func TestIdentityNeverHitsAnotherProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	real, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	reused := real
	reused.StartTime-- // the record of an earlier process with the same pid
	otherBoot := real
	otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
	for name, id := range map[string]Identity{"reused pid": reused, "other boot": otherBoot} {
		if live, err := id.Live(); err != nil || live {
			t.Errorf("%s: live %v, %v", name, live, err)
		}
		if _, err := id.Open(); !errors.Is(err, ErrGone) {
			t.Errorf("%s: Open: %v, want ErrGone", name, err)
		}
		if err := id.Signal(unix.SIGKILL); !errors.Is(err, ErrGone) {
			t.Errorf("%s: Signal: %v, want ErrGone", name, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if live, err := real.Live(); err != nil || !live {
		t.Fatalf("the process at that pid was hit: live %v, %v", live, err)
	}
	// The right identity does reach it.
	if err := real.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if live, _ := real.Live(); live {
		t.Error("live after it was killed and reaped")
	}
	if err := real.Signal(unix.SIGTERM); !errors.Is(err, ErrGone) {
		t.Errorf("Signal to a reaped process: %v, want ErrGone", err)
	}
}

// TestZombieIsGone: a process that ended but is not reaped yet counts as
// gone: it runs nothing, and its pid is about to be free.
func TestZombieIsGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	id := Identity{Pid: cmd.Process.Pid}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := startTime(id.Pid)
		if errors.Is(err, ErrGone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie: %v", id.Pid, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStartTimeParsesOddNames(t *testing.T) {
	// A command name with spaces and parentheses must not shift fields.
	dir := t.TempDir()
	odd := dir + "/a) b (c"
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	plain := exec.Command("sleep", "60") // started right after it
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	id, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Identify(plain.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Clock ticks are 10 ms: the two started within a second of each other.
	if d := int64(ref.StartTime) - int64(id.StartTime); d < 0 || d > 100 {
		t.Errorf("start times %d (odd name) and %d (plain, started after it): fields misread", id.StartTime, ref.StartTime)
	}
}
