//go:build linux

package runtime_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPipes: StdoutPipe streams what the command writes while it runs
// (judged on the host: the command waits for a file the test makes only
// after reading the first line), ends in EOF before Wait, and StdinPipe
// feeds the command as written; the rules are os/exec's.
func TestPipes(t *testing.T) {
	sb, ws := newSandbox(t)
	ctx := context.Background()

	c := sb.Command(ctx, "sh", "-c", "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; echo err >&2")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StdoutPipe(); err == nil {
		t.Error("a second StdoutPipe: no error")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	done := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		done <- line
	}()
	select {
	case line := <-done:
		if line != "first\n" {
			t.Errorf("first line %q", line)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing came through StdoutPipe while the command ran")
	}
	// The command is still waiting for this file: what came was streamed.
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Errorf("the rest %q, %v", rest, err)
	}
	stderr, err := io.ReadAll(errPipe)
	if err != nil || string(stderr) != "err\n" {
		t.Errorf("stderr %q, %v", stderr, err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if _, err := out.Read(make([]byte, 1)); err == nil {
		t.Error("StdoutPipe still reads after Wait")
	}

	c = sb.Command(ctx, "sh", "-c", "tr a-z A-Z")
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(in, strings.Repeat("hello\n", 10000))
		in.Close()
	}()
	got, err := io.ReadAll(outPipe)
	if err != nil || string(got) != strings.Repeat("HELLO\n", 10000) {
		t.Errorf("tr through the pipes: %d bytes, %v", len(got), err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}

	// A command that stops reading: writes fail instead of blocking.
	c = sb.Command(ctx, "true")
	in, err = c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := in.Write([]byte(strings.Repeat("x", 1<<20)))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("a write to the stdin of a command that ended succeeded")
		}
	case <-time.After(time.Minute):
		t.Error("a write to the stdin of a command that ended blocked")
	}
}
