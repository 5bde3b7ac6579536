//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// echoServer is a plain TCP echo server: python3 echo.py PORT.
const echoServer = `import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
`

// publishWorkspace makes a workspace holding the echo server and a page
// for http.server to serve, with a token only this test knows.
func publishWorkspace(t *testing.T) (ws, token string) {
	t.Helper()
	ws = dir(t, "publish-ws-")
	token = fmt.Sprintf("page-%d", time.Now().UnixNano())
	must(os.WriteFile(filepath.Join(ws, "echo.py"), []byte(echoServer), 0o644))
	must(os.WriteFile(filepath.Join(ws, "page.txt"), []byte(token), 0o644))
	return ws, token
}

// getPage polls http://addr/page.txt from the host until it answers (the
// server inside may still be starting: the forwarder then closes the
// connection), and returns the body.
func getPage(t *testing.T, addr string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var body string
	var last error
	if !waitFor(60*time.Second, func() bool {
		resp, err := client.Get("http://" + addr + "/page.txt")
		if err != nil {
			last = err
			return false
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %d, %v", resp.StatusCode, err)
			return false
		}
		body = string(b)
		return true
	}) {
		t.Fatalf("GET http://%s/page.txt from the host: %v", addr, last)
	}
	return body
}

// echo sends msg through the published echo port from the host, polling
// until the server inside answers, and returns what came back.
func echo(t *testing.T, addr, msg string) string {
	t.Helper()
	var got string
	var last error
	if !waitFor(60*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			last = err
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, msg); err != nil {
			last = err
			return false
		}
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		if err != nil || len(b) == 0 {
			last = fmt.Errorf("read %q, %v", b, err)
			return false
		}
		got = string(b)
		return true
	}) {
		t.Fatalf("echo through %s from the host: %v", addr, last)
	}
	return got
}

// refused says a host-side connection to addr is refused outright.
func refused(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s accepts a connection", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: %v, not refused", addr, err)
	}
	return nil
}

// freePort is a host loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPublishRun: hutch run --publish, the servers in the background of
// the command: a Python http.server and a TCP echo inside answer host
// sockets on the published loopback ports (host ports chosen by hutch,
// said on stderr and in the Result); a port the sandbox listens on but
// did not publish stays unreachable from the host; the published ports
// close with the run; the Result counts the connections.
func TestPublishRun(t *testing.T) {
	ws, token := publishWorkspace(t)
	private := freePort(t) // the sandbox listens on it too, unpublished
	rj := filepath.Join(dir(t, "publish-result-"), "result.json")
	script := fmt.Sprintf(`python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &
python3 echo.py 9000 &
python3 echo.py %d &
while [ ! -e stop ]; do sleep 0.1; done`, private)
	cmd := exec.Command(hutchBin, "run", "--workspace", ws, "--result-json", rj,
		"--publish", "0:8000", "--publish", "127.0.0.1:0:9000/tcp", "--", "sh", "-c", script)
	cmd.Dir = ws
	stderr, err := cmd.StderrPipe()
	must(err)
	must(cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	published := map[string]string{} // sandbox port -> host address
	re := regexp.MustCompile(`^hutch: published 127\.0\.0\.1:(\d+):(\d+)/tcp$`)
	sc := bufio.NewScanner(stderr)
	var said []string
	for len(published) < 2 && sc.Scan() {
		said = append(said, sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			published[m[2]] = "127.0.0.1:" + m[1]
		}
	}
	if len(published) != 2 {
		t.Fatalf("hutch run said %q; want both published ports", said)
	}
	go io.Copy(io.Discard, stderr)

	if got := getPage(t, published["8000"]); got != token {
		t.Errorf("GET page.txt through %s: %q, want %q", published["8000"], got, token)
	}
	msg := strings.Repeat("echo-"+token, 1000)
	if got := echo(t, published["9000"], msg); got != msg {
		t.Errorf("echo through %s: %d bytes back, want the %d sent", published["9000"], len(got), len(msg))
	}
	// The sandbox's own listener on the same number is not the host's.
	if err := refused(fmt.Sprintf("127.0.0.1:%d", private)); err != nil {
		t.Errorf("the sandbox's unpublished port: %v", err)
	}

	must(os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hutch run: %v (%q)", err, said)
	}
	for port, addr := range published {
		if err := refused(addr); err != nil {
			t.Errorf("after the run, published port %s: %v", port, err)
		}
	}
	b, err := os.ReadFile(rj)
	must(err)
	var r runtime.Result
	must(json.Unmarshal(b, &r))
	if len(r.Published) != 2 || r.Published[0].Port != 8000 || "127.0.0.1:"+strconv.Itoa(r.Published[0].HostPort) != published["8000"] {
		t.Errorf("Result.Published = %+v; want the ports said on stderr %v", r.Published, published)
	}
	var echoed bool
	for _, e := range r.Ingress {
		if e.Port == 9000 && e.BytesIn == int64(len(msg)) && e.BytesOut == int64(len(msg)) && strings.HasPrefix(e.Peer, "127.0.0.1:") {
			echoed = true
		}
	}
	if !echoed {
		t.Errorf("Result.Ingress = %+v; want the echo's connection, %d bytes each way", r.Ingress, len(msg))
	}
}

// TestPublishDurable: hutch process start --publish: the record (and
// process get and list) holds the chosen host port; http.server inside
// answers it; killed on the host, the server is restarted and answers on
// the same port (the supervisor holds the listener); after stop the port
// is closed.
func TestPublishDurable(t *testing.T) {
	ws, token := publishWorkspace(t)
	data := dir(t, "publish-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	out, stderr, code := hutchProcess(t, data, "start", "--workspace", ws, "--name", "web", "--kill-after", "2s",
		"--restart-delay", "100ms", "--publish", "0:8000", "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1")
	var p processes.Process
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("start: exit %d, %s%s", code, out, stderr)
	}
	if len(p.Published) != 1 || p.Published[0].Port != 8000 || p.Published[0].HostIP != "127.0.0.1" || p.Published[0].HostPort == 0 {
		t.Fatalf("start's record publishes %+v; want 127.0.0.1:<chosen>:8000", p.Published)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Published[0].HostPort))
	for _, args := range [][]string{{"get", p.ID}, {"list"}} {
		out, _, _ := hutchProcess(t, data, args...)
		if !strings.Contains(out, fmt.Sprintf(`"host_port": %d`, p.Published[0].HostPort)) {
			t.Errorf("process %v does not show the published port: %s", args, out)
		}
	}
	if got := getPage(t, addr); got != token {
		t.Fatalf("GET through %s: %q, want %q", addr, got, token)
	}

	// Killed from the host, the server is started again behind the same
	// host port.
	first := p.Pid
	must(syscall.Kill(first, syscall.SIGKILL))
	var rec processes.Process
	if !waitFor(60*time.Second, func() bool {
		out, _, _ := hutchProcess(t, data, "get", p.ID)
		rec = processes.Process{}
		return json.Unmarshal([]byte(out), &rec) == nil && rec.Restarts >= 1 && rec.Status == processes.StatusRunning && rec.Pid != first
	}) {
		t.Fatalf("no restart after the kill: %+v", rec)
	}
	if got := getPage(t, addr); got != token {
		t.Errorf("after the restart, GET through %s: %q, want %q", addr, got, token)
	}
	if len(rec.Runs) == 0 || rec.Runs[0].IngressTotal < 1 {
		t.Errorf("the first run's record counts no ingress: %+v", rec.Runs)
	}

	out, _, code = hutchProcess(t, data, "stop", p.ID)
	if code != 0 {
		t.Fatalf("stop: exit %d, %s", code, out)
	}
	if err := refused(addr); err != nil {
		t.Errorf("after stop: %v", err)
	}
}

// TestPublishLibrary: Policy.Publish in Go: Sandbox.Published reports the
// chosen port, the echo inside answers a host socket on it, the Result
// counts the connection, and Close closes the port.
func TestPublishLibrary(t *testing.T) {
	ws, _ := publishWorkspace(t)
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Publish = []runtime.Publish{{Port: 9000}} })
	defer sb.Close()
	pub := sb.Published()
	if len(pub) != 1 || pub[0].HostIP != "127.0.0.1" || pub[0].HostPort == 0 || pub[0].Port != 9000 {
		t.Fatalf("Published() = %+v", pub)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(pub[0].HostPort))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := sb.Command(ctx, "python3", "echo.py", "9000")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := echo(t, addr, "hello from the host"); got != "hello from the host" {
		t.Errorf("echo: %q", got)
	}
	cancel()
	cmd.Wait()
	if r := cmd.Result; r == nil || len(r.Ingress) == 0 || r.Ingress[len(r.Ingress)-1].BytesOut != int64(len("hello from the host")) {
		t.Errorf("Result.Ingress: %+v", cmd.Result)
	}
	sb.Close()
	if err := refused(addr); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestPublishRefusals: bad --publish values are refused naming the value
// and the reason, and nothing runs.
func TestPublishRefusals(t *testing.T) {
	ws := dir(t, "publish-bad-")
	for _, tc := range []struct{ value, why string }{
		{"99999:80", "host port 99999 is out of range"},
		{"abc", "not [HOST_IP:]HOST_PORT:PORT"},
		{"localhost:8080:80", `host address "localhost" is not an IP address`},
		{"8080:0", "port 0 is out of range"},
		{"8080:80/udp", "udp is not forwarded yet"},
	} {
		r := runCLI(t, ws, []string{"--publish", tc.value}, "touch", "ran")
		want := "--publish " + tc.value + ": " + tc.why
		if r.code != 125 || !strings.Contains(r.stderr, want) {
			t.Errorf("--publish %s: %v\nwant exit 125 and %q", tc.value, r, want)
		}
	}
	r := runCLI(t, ws, []string{"--net", "host", "--publish", "0:80"}, "touch", "ran")
	if r.code != 125 || !strings.Contains(r.stderr, "--publish 0:80: needs a network namespace") {
		t.Errorf("--net host --publish: %v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("a refused command ran")
	}
}

// TestReachDurable (the agent loop): a durable dev server publishes its
// port 8000; a later hutch run --reach ID:8000 fetches its page as
// localhost:8000 (the page it wrote to the workspace is read on the
// host), while the same command reaches neither a host loopback listener
// (which counts no connection) nor the network.
func TestReachDurable(t *testing.T) {
	ws, token := publishWorkspace(t)
	data := dir(t, "reach-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	out, stderr, code := hutchProcess(t, data, "start", "--workspace", ws, "--name", "web", "--kill-after", "2s",
		"--publish", "0:8000", "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1")
	var p processes.Process
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("start: exit %d, %s%s", code, out, stderr)
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer host.Close()
	var hostConns sync.WaitGroup
	hits := make(chan struct{}, 100)
	hostConns.Add(1)
	go func() {
		defer hostConns.Done()
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			hits <- struct{}{}
			c.Close()
		}
	}()
	hostPort := host.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`import socket, time, urllib.request
body, err = None, None
for _ in range(600):
    try:
        body = urllib.request.urlopen("http://localhost:8000/page.txt", timeout=10).read().decode()
        break
    except Exception as e:
        err = e
        time.sleep(0.1)
open("got.txt", "w").write(body if body is not None else "failed: %%s" %% err)
for name, addr in (("host", ("127.0.0.1", %d)), ("net", ("1.1.1.1", 80))):
    try:
        socket.create_connection(addr, 5).close()
        open(name + ".txt", "w").write("connected")
    except OSError as e:
        open(name + ".txt", "w").write("refused: %%s" %% e)
`, hostPort)
	must(os.WriteFile(filepath.Join(ws, "reach.py"), []byte(script), 0o644))
	r := runCLIArgsEnv(t, []string{"HUTCH_DATA_DIR=" + data}, "run", "--workspace", ws, "--reach", p.ID+":8000", "--", "python3", "reach.py")
	if r.code != 0 {
		t.Fatalf("hutch run --reach: %v", r)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "got.txt"))
	if string(got) != token {
		t.Errorf("the command fetched %q through localhost:8000; want the page %q", got, token)
	}
	for _, name := range []string{"host", "net"} {
		b, _ := os.ReadFile(filepath.Join(ws, name+".txt"))
		if !strings.HasPrefix(string(b), "refused") {
			t.Errorf("the command's connection to the %s: %q", name, b)
		}
	}
	// The same through the local API: POST /v1/exec with reach, from a
	// server over the same data directory.
	for _, f := range []string{"got.txt", "host.txt", "net.txt"} {
		os.Remove(filepath.Join(ws, f))
	}
	srv := startServe(t, ws, data)
	if _, status := srv.exec(t, `{"argv":["python3","reach.py"],"reach":["`+p.ID+`:8000"]}`); status != 0 {
		t.Fatalf("/v1/exec with reach: exit %d", status)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "got.txt")); string(got) != token {
		t.Errorf("/v1/exec: the command fetched %q through localhost:8000; want the page %q", got, token)
	}
	for _, name := range []string{"host", "net"} {
		if b, _ := os.ReadFile(filepath.Join(ws, name+".txt")); !strings.HasPrefix(string(b), "refused") {
			t.Errorf("/v1/exec: the command's connection to the %s: %q", name, b)
		}
	}
	var apiErr struct {
		Error struct {
			Code, Field, Message string
		} `json:"error"`
	}
	if status := srv.call(t, "POST", "/v1/exec", `{"argv":["true"],"reach":["`+p.ID+`:9999"]}`, &apiErr); status != 400 || apiErr.Error.Field != "reach" || !strings.Contains(apiErr.Error.Message, "does not publish port 9999") {
		t.Errorf("/v1/exec with a port the process does not publish: %d %+v", status, apiErr)
	}
	host.Close()
	hostConns.Wait()
	if len(hits) != 0 {
		t.Errorf("the host listener on 127.0.0.1:%d counted %d connections from the command", hostPort, len(hits))
	}

	// Refusals name the value: an id that is not a process, a port the
	// process does not publish, a stopped process.
	for i, tc := range []struct{ value, why string }{
		{"nope:8000", "not a process id"},
		{p.ID + ":9999", "does not publish port 9999"},
		{p.ID, "not ID:PORT"},
		{p.ID + ":8000", "the process is stopped"}, // after the stop below
	} {
		if i == 3 {
			hutchProcess(t, data, "stop", p.ID)
		}
		r := runCLIArgsEnv(t, []string{"HUTCH_DATA_DIR=" + data}, "run", "--workspace", ws, "--reach", tc.value, "--", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "--reach "+tc.value+": ") || !strings.Contains(r.stderr, tc.why) {
			t.Errorf("--reach %s: %v; want exit 125 naming it and %q", tc.value, r, tc.why)
		}
	}
}
