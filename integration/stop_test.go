//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// TestSignalsPassedOn: SIGINT and SIGTERM sent to `hutch run` reach the
// command first (its handler runs: the host finds what it wrote in the
// workspace), and hutch exits as a shell would with the command's status,
// 128+N for the signal that ended it; a command that ignores the signal
// is SIGKILLed with its whole sandbox after --kill-after (the host sees
// it alive during the grace and nothing of it after). --result-json says
// that the command was stopped and by which signal it ended.
func TestSignalsPassedOn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sig    syscall.Signal
		script string // %ARG% is a unique sleep argument
		code   int
		ended  syscall.Signal
		file   string // left by the command's handler, if it has one
	}{
		{"SIGINT", syscall.SIGINT,
			`trap 'echo int > got-sig; trap - INT; kill -INT $$' INT; : > ready; while :; do sleep 0.1; done`,
			130, syscall.SIGINT, "got-sig"},
		{"SIGTERM", syscall.SIGTERM,
			`trap 'echo term > got-sig; trap - TERM; kill -TERM $$' TERM; : > ready; while :; do sleep 0.1; done`,
			143, syscall.SIGTERM, "got-sig"},
		{"SIGTERM handled, exit 0", syscall.SIGTERM,
			`trap 'echo term > got-sig; exit 0' TERM; : > ready; while :; do sleep 0.1; done`,
			0, 0, "got-sig"},
		{"SIGTERM ignored", syscall.SIGTERM,
			`trap '' TERM; : > ready; exec sleep %ARG%`,
			137, syscall.SIGKILL, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := dir(t, "ws-")
			arg := uniqueSleep()
			rj := filepath.Join(t.TempDir(), "r.json")
			c := exec.Command(hutchBin, "run", "--workspace", ws, "--result-json", rj, "--kill-after", "2s", "--",
				"sh", "-c", strings.ReplaceAll(tt.script, "%ARG%", arg))
			var out bytes.Buffer
			c.Stdout, c.Stderr = &out, &out
			c.WaitDelay = 5 * time.Second // a test that fails must not hang on hutch's pipes
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				_ = c.Wait()
				close(done)
			}()
			defer func() {
				select {
				case <-done:
				default:
					_ = c.Process.Kill()
					<-done
				}
			}()
			if !waitFor(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(ws, "ready")); return err == nil }) {
				t.Fatalf("host: the command never started\n%s", out.String())
			}
			if err := c.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			if tt.file == "" {
				time.Sleep(300 * time.Millisecond)
				if len(procsWithArg(arg)) == 0 {
					t.Error("host: the command was gone within 0.3s of the signal: no grace")
				}
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("hutch still runs 30s after %v\n%s", tt.sig, out.String())
			}
			if code := c.ProcessState.ExitCode(); code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, out.String())
			}
			if tt.file != "" {
				if _, err := os.Stat(filepath.Join(ws, tt.file)); err != nil {
					t.Errorf("host: the command's handler did not run: %v", err)
				}
			}
			if pids := procsWithArg(arg); len(pids) != 0 {
				t.Errorf("host: the command survived its sandbox: %v", pids)
			}
			b, err := os.ReadFile(rj)
			if err != nil {
				t.Fatalf("host: no --result-json: %v", err)
			}
			var r runtime.Result
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if !r.Killed || r.KillReason != runtime.KilledStopped || r.Signal != tt.ended {
				t.Errorf("--result-json: %s\nwant killed, %q, signal %d", b, runtime.KilledStopped, tt.ended)
			}
		})
	}
}

// TestKillAfterRefused: a --kill-after that leaves no grace is refused
// before anything runs.
func TestKillAfterRefused(t *testing.T) {
	ws := dir(t, "ws-")
	for _, v := range []string{"0", "-1s"} {
		r := runCLIArgs(t, "run", "--workspace", ws, "--kill-after", v, "--", "touch", filepath.Join(ws, "ran"))
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil || r.code != 125 || !strings.Contains(r.stderr, "--kill-after") {
			t.Errorf("--kill-after %s: exit %d, ran %v\n%s", v, r.code, err == nil, r)
		}
	}
}

// TestSignalDuringSetup: SIGTERM sent to `hutch run` at any point of its
// start (while the policy is checked, while the sandbox is built, once
// the command runs) ends the run as a shell's command dying of it would:
// exit 143, nothing of the command left on the host, and a --result-json
// that is whole and says the command was killed whenever hutch had got
// as far as creating it (a signal before hutch's main leaves no file,
// never an empty one).
func TestSignalDuringSetup(t *testing.T) {
	ws := dir(t, "ws-")
	for delay := 5 * time.Millisecond; delay <= 160*time.Millisecond; delay += 5 * time.Millisecond {
		arg := uniqueSleep()
		rj := filepath.Join(t.TempDir(), "r.json")
		c := exec.Command(hutchBin, "run", "--workspace", ws, "--result-json", rj, "--", "sleep", arg)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		c.WaitDelay = 5 * time.Second
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-done
			t.Fatalf("after %v: hutch still runs 30s after SIGTERM\n%s", delay, out.String())
		}
		if code := c.ProcessState.ExitCode(); code != 143 && !(c.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
			t.Errorf("after %v: exit %v, want 143\n%s", delay, c.ProcessState, out.String())
		}
		if pids := procsWithArg(arg); len(pids) != 0 {
			t.Errorf("after %v: host: the command outlived hutch: %v", delay, pids)
		}
		b, err := os.ReadFile(rj)
		if os.IsNotExist(err) {
			continue // the signal came before hutch had made anything
		}
		var r runtime.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("after %v: --result-json is not whole: %v\n%q", delay, err, b)
			continue
		}
		if !r.Killed || r.Success() {
			t.Errorf("after %v: --result-json says the command was not killed: %s", delay, b)
		}
	}
}
