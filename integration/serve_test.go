//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/processes"
)

// served is a `hutch serve` the test started.
type served struct {
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer
}

// startServe starts `hutch serve --socket S --workspace ws --data-dir
// data [flags]` and waits until it answers on its socket.
func startServe(t *testing.T, ws, data string, flags ...string) *served {
	t.Helper()
	sock := filepath.Join(dir(t, "serve-sock-"), "s", "hutch.sock")
	args := append([]string{"serve", "--socket", sock, "--workspace", ws, "--data-dir", data, "--prewarm", "1"}, flags...)
	s := &served{cmd: exec.Command(hutchBin, args...), sock: sock, stderr: new(bytes.Buffer)}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
	})
	if !waitFor(30*time.Second, func() bool { return s.health() == nil }) {
		t.Fatalf("hutch serve does not answer on %s: %v\n%s", sock, s.health(), s.stderr)
	}
	return s
}

func (s *served) health() error {
	resp, err := unixHTTP(s.sock).Get("http://hutch/v1/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("health: %s", resp.Status)
	}
	return nil
}

// call posts body to path with no client timeout and decodes the JSON
// answer into v, returning the HTTP status.
func (s *served) call(t *testing.T, method, path, body string, v any) int {
	t.Helper()
	c := unixHTTP(s.sock)
	c.Timeout = 2 * time.Minute
	req, err := http.NewRequest(method, "http://hutch"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// identities are pids' identities (a pid may be reused once its process
// is gone), of those still there.
func identities(pids []int) map[int]processes.Identity {
	out := map[int]processes.Identity{}
	for _, pid := range pids {
		if id, err := processes.Identify(pid); err == nil {
			out[pid] = id
		}
	}
	return out
}

// TestServeKill9 (issue 21, must show 3): `kill -9` of hutch serve. Every
// sandbox it ran for a call (a command still running, the prewarmed
// inits, everything below the server in the host's process table) is gone
// within a second; the durable process it started runs on, and the next
// server over the same data directory lists it, running, with the same
// pid, and stops it.
func TestServeKill9(t *testing.T) {
	ws, data := dir(t, "serve-ws-"), dir(t, "serve-data-")
	s := startServe(t, ws, data)

	// A durable process, and a call's command still running.
	durableSleep, callSleep := uniqueSleep(), uniqueSleep()
	var rec processes.Process
	if code := s.call(t, "POST", "/v1/processes/start", fmt.Sprintf(`{"argv":["sleep",%q],"name":"kept"}`, durableSleep), &rec); code != 200 || rec.Status != processes.StatusRunning || rec.Supervisor == nil {
		t.Fatalf("start: %d %+v", code, rec)
	}
	go func() {
		resp, err := unixHTTP(s.sock).Post("http://hutch/v1/exec", "application/json", strings.NewReader(fmt.Sprintf(`{"argv":["sleep",%q]}`, callSleep)))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if !waitFor(30*time.Second, func() bool { return len(procsWithArg(callSleep)) == 1 }) {
		t.Fatalf("the call's sleep %s never ran", callSleep)
	}
	callPid := procsWithArg(callSleep)[0]
	kept := identities(append(descendants(rec.Supervisor.Pid), rec.Supervisor.Pid))
	below := identities(descendants(s.cmd.Process.Pid))
	for pid := range kept {
		delete(below, pid)
	}
	// The sandboxes are what runs in a pid namespace of its own; the
	// rest below the server is hutch's own (its spawn helper).
	hostNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	sandboxed, helpers := map[int]processes.Identity{}, map[int]processes.Identity{}
	for pid, id := range below {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && ns != hostNS {
			sandboxed[pid] = id
		} else {
			helpers[pid] = id
		}
	}
	if _, ok := below[callPid]; !ok {
		t.Fatalf("the call's sleep (pid %d) is not below the server (pid %d) in the host's process table: %v", callPid, s.cmd.Process.Pid, below)
	}
	if _, ok := kept[rec.Pid]; !ok {
		t.Fatalf("the durable process (pid %d) is not below its supervisor: %v", rec.Pid, kept)
	}

	if _, ok := sandboxed[callPid]; !ok {
		t.Fatalf("the call's sleep (pid %d) is not in a pid namespace of its own", callPid)
	}
	killed := time.Now()
	s.cmd.Process.Signal(syscall.SIGKILL)
	allGone := func(ids map[int]processes.Identity) func() bool {
		return func() bool {
			for _, id := range ids {
				if live(id) {
					return false
				}
			}
			return true
		}
	}
	gone := waitFor(time.Second, allGone(sandboxed))
	tookSandboxes := time.Since(killed)
	s.cmd.Wait()
	if !gone {
		for pid, id := range sandboxed {
			if live(id) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				t.Errorf("1 s after the server's SIGKILL, pid %d (%q) of a sandbox still runs", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			}
		}
	}
	// hutch's helpers die with it too (PR_SET_PDEATHSIG); on a loaded
	// host a many-threaded process can take a moment to be torn down.
	if !waitFor(10*time.Second, allGone(helpers)) {
		t.Errorf("10 s after the server's SIGKILL, its helpers still run: %v", helpers)
	}
	t.Logf("after the server's SIGKILL: its %d sandboxed processes (the call's, prewarmed inits) were gone in %v, its %d helpers in %v",
		len(sandboxed), tookSandboxes.Round(time.Millisecond), len(helpers), time.Since(killed).Round(time.Millisecond))
	for pid, id := range kept {
		if !live(id) {
			t.Errorf("the durable process's pid %d died with the server", pid)
		}
	}

	// The next server adopts it.
	s2 := startServe(t, ws, data)
	var list struct{ Processes []processes.Process }
	if code := s2.call(t, "GET", "/v1/processes", "", &list); code != 200 || len(list.Processes) != 1 {
		t.Fatalf("the next server lists %d: %+v", code, list)
	}
	if got := list.Processes[0]; got.ID != rec.ID || got.Pid != rec.Pid || got.Status != processes.StatusRunning {
		t.Fatalf("the next server lists %+v; want %s running as pid %d", got, rec.ID, rec.Pid)
	}
	var stopped processes.Process
	if code := s2.call(t, "POST", "/v1/processes/stop", fmt.Sprintf(`{"id":%q}`, rec.ID), &stopped); code != 200 || stopped.Status != processes.StatusStopped {
		t.Fatalf("stop through the next server: %d %+v", code, stopped)
	}
	for pid, id := range kept {
		if live(id) {
			t.Errorf("after the stop, pid %d of the durable process still runs", pid)
		}
	}
	if left := procsWithArg(durableSleep); len(left) > 0 {
		t.Errorf("after the stop, its sleep still runs: %v", left)
	}
}

// TestServeSocketHidden: a command the server runs cannot reach the
// server's socket, which would make it a client with every grant of the
// server's ceiling. The server may grant writes to a directory outside
// the workspace; from the host, a call asking for that grant writes
// there (the control). From inside a sandbox, the same call through the
// socket's path does not: nothing appears on the host.
func TestServeSocketHidden(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the client inside the sandbox")
	}
	ws, data, extra := dir(t, "serve-ws-"), dir(t, "serve-data-"), dir(t, "serve-extra-")
	s := startServe(t, ws, data, "--grantable", "write:"+extra)
	// The call: exec `touch EXTRA/NAME` with the grant to write there.
	call := func(name string) string {
		return fmt.Sprintf(`{"argv":["touch",%q],"grant":[%q]}`, filepath.Join(extra, name), "write:"+extra)
	}

	// The control, from the host: the grant works.
	resp, err := unixHTTP(s.sock).Post("http://hutch/v1/exec", "application/json", strings.NewReader(call("from-host")))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(extra, "from-host")); err != nil {
		t.Fatalf("the control: a granted write from the host did not land: %v", err)
	}

	// From inside: the same request through the socket's path.
	client := fmt.Sprintf(`
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(%q)
except OSError as e:
    print("connect:", e); sys.exit(3)
body = %q.encode()
s.sendall(b"POST /v1/exec HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %%d\r\nConnection: close\r\n\r\n" %% len(body) + body)
print(s.recv(65536).decode(errors="replace"))
`, s.sock, call("from-sandbox"))
	out, status := s.exec(t, mustJSON(map[string]any{"argv": []string{"python3", "-c", client}}))
	if _, err := os.Stat(filepath.Join(extra, "from-sandbox")); err == nil {
		t.Fatalf("a command reached the server's socket and was granted a write outside its workspace (exit %d: %s)", status, out)
	}
	if status != 3 {
		t.Errorf("the client inside the sandbox connected to the socket (exit %d): %s", status, out)
	}
	// And the socket's directory cannot even be listed.
	if out, status := s.exec(t, mustJSON(map[string]any{"argv": []string{"ls", filepath.Dir(s.sock)}})); status == 0 {
		t.Errorf("ls of the socket's directory inside the sandbox: exit 0: %s", out)
	}
}

// exec runs body through POST /v1/exec and returns the command's stdout
// and hutch run's exit status from the result event.
func (s *served) exec(t *testing.T, body string) (string, int) {
	t.Helper()
	c := unixHTTP(s.sock)
	c.Timeout = 2 * time.Minute
	resp, err := c.Post("http://hutch/v1/exec", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("exec %s: %s %s", body, resp.Status, b)
	}
	var stdout strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type       string `json:"type"`
			Data       string `json:"data"`
			ExitStatus *int   `json:"exit_status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Bytes(), err)
		}
		switch ev.Type {
		case "stdout":
			stdout.WriteString(ev.Data)
		case "result":
			return stdout.String(), *ev.ExitStatus
		}
	}
	t.Fatalf("exec %s: no result event (%v)", body, sc.Err())
	return "", 0
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestServeRefusesWritableSocketDir: the socket's directory and the data
// directory may not lie in a tree the server's commands can write (they
// could put their own socket in the server's place); serve refuses to
// start, naming the flag, and runs nothing.
func TestServeRefusesWritableSocketDir(t *testing.T) {
	ws := dir(t, "serve-ws-")
	for _, tt := range []struct {
		flag string
		args []string
	}{
		{"--socket", []string{"--socket", filepath.Join(ws, "run", "hutch.sock"), "--data-dir", dir(t, "serve-data-")}},
		{"--data-dir", []string{"--socket", filepath.Join(dir(t, "serve-sock-"), "s", "hutch.sock"), "--data-dir", filepath.Join(ws, "state")}},
	} {
		r := runCLIArgs(t, append([]string{"serve", "--workspace", ws, "--prewarm", "0"}, tt.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.flag) || !strings.Contains(r.stderr, "writable") {
			t.Errorf("serve %v: %s", tt.args, r)
		}
	}
	// Nothing half-made stays: the socket's directory, made for it,
	// goes with it.
	if ents, _ := os.ReadDir(ws); len(ents) > 0 {
		t.Errorf("the workspace after the refusals holds %v", ents)
	}
}

// runVia runs hutch with args, HUTCH_SOCKET=sock ("" for none) and
// stdin, and returns its result and pid.
func runVia(t *testing.T, sock string, stdin io.Reader, args ...string) (cliResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, hutchBin, args...)
	c.Env = append(os.Environ(), "HUTCH_SOCKET="+sock)
	var out, errb bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = stdin, &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	err := c.Wait()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("hutch: %v", err)
	}
	return r, pid
}

// TestRunThroughServer: with HUTCH_SOCKET naming a server of the same
// policy, hutch run's command runs in the server's sandbox (below the
// server in the host's process table, not below hutch run), with the
// same output and exit status as without; flags the server cannot honour
// (another limit, a grant beyond its ceiling) run the command here
// instead, with stdin intact; a stdin nobody closes does not hold the
// run.
func TestRunThroughServer(t *testing.T) {
	ws, data := dir(t, "serve-ws-"), dir(t, "serve-data-")
	s := startServe(t, ws, data, "--kill-after", "2s")
	flags := []string{"run", "--workspace", ws, "--kill-after", "2s"}
	// Not compared across runs: hutch's own lines name the run's sandbox.
	for _, tt := range []struct {
		name  string
		flags []string
		cmd   []string
		stdin string
	}{
		{"exit status and both streams", nil, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, ""},
		{"stdin", nil, []string{"sh", "-c", "tr a-z A-Z; exit 4"}, "piped in\n"},
		{"killed by a signal", nil, []string{"sh", "-c", "kill -9 $$"}, ""},
		{"not found", nil, []string{"no-such-command-hutch"}, ""},
		// Long enough for the command to start under load on both
		// paths: a timeout that fires before it runs kills it outright
		// (137), one after stops it with SIGTERM (143); with 1 s the CLI's
		// own cold start lost that race as uid 65534 beside make test-vm.
		{"timeout", []string{"--timeout", "6s"}, []string{"sleep", "60"}, ""},
		{"a variable", []string{"--env", "HUTCH_IT=via"}, []string{"sh", "-c", "echo $HUTCH_IT"}, ""},
		{"a write lands in the workspace", nil, []string{"sh", "-c", "echo w > written; cat written"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append(append(slices.Clone(flags), tt.flags...), "--"), tt.cmd...)
			here, _ := runVia(t, "", strings.NewReader(tt.stdin), args...)
			// What a command leaves in the workspace is judged in the
			// host's file, made again by the run through the server.
			written := filepath.Join(ws, "written")
			os.Remove(written)
			there, _ := runVia(t, s.sock, strings.NewReader(tt.stdin), args...)
			if b, err := os.ReadFile(written); tt.name == "a write lands in the workspace" && string(b) != "w\n" {
				t.Errorf("the host's %s after the run through the server: %q, %v", written, b, err)
			}
			if here.code != there.code || here.stdout != there.stdout {
				t.Errorf("here: %s\nthrough the server: %s", here, there)
			}
			if strings.Contains(there.stderr, "running the command here") {
				t.Errorf("the run did not go through the server: %s", there.stderr)
			}
		})
	}

	// Where the command runs, from the host's process table: below the
	// server, or below hutch run.
	where := func(extra ...string) (bool, bool) {
		arg := uniqueSleep()
		done := make(chan int, 1)
		go func() {
			_, pid := runVia(t, s.sock, nil, append(append(append(slices.Clone(flags), extra...), "--", "sleep"), arg)...)
			done <- pid
		}()
		// hutch run's own command line holds arg too.
		var pid int
		if !waitFor(30*time.Second, func() bool {
			for _, p := range procsWithArg(arg) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); string(b) == "sleep\x00"+arg+"\x00" {
					pid = p
					return true
				}
			}
			return false
		}) {
			t.Fatalf("the sleep %s never ran", arg)
		}
		underServer := slices.Contains(descendants(s.cmd.Process.Pid), pid)
		// hutch run's pid is known once it ends: the sleep's ancestry is
		// read now, and judged then.
		ancestors := map[int]bool{}
		for p := parentOf(pid); p > 1; p = parentOf(p) {
			ancestors[p] = true
		}
		syscall.Kill(pid, syscall.SIGKILL)
		runPid := <-done
		return underServer, ancestors[runPid]
	}
	if server, run := where(); !server || run {
		t.Errorf("with HUTCH_SOCKET and the server's flags: below the server %v, below hutch run %v", server, run)
	}
	if server, run := where("--memory", "64MiB"); server || !run {
		t.Errorf("with --memory the server does not have: below the server %v, below hutch run %v", server, run)
	}

	// A grant the server may not give: the command runs here, and gets
	// all of its stdin.
	r, _ := runVia(t, s.sock, strings.NewReader("all of it\n"), append(slices.Clone(flags), "--net", "allow", "--allow-domain", "example.com", "--", "cat")...)
	if r.code != 0 || r.stdout != "all of it\n" || !strings.Contains(r.stderr, "running the command here") {
		t.Errorf("a call beyond the server's ceiling: %s", r)
	}

	// A stdin pipe nobody closes: the command ends, and so does the run.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	start := time.Now()
	r, _ = runVia(t, s.sock, pr, append(slices.Clone(flags), "--", "echo", "done")...)
	pr.Close()
	if r.code != 0 || r.stdout != "done\n" {
		t.Errorf("with an open stdin: %s", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("with an open stdin the run took %v", d)
	}
}
