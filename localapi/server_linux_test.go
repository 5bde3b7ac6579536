//go:build linux

package localapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// The test binary is also the other end of the peer-credential tests:
// started as another uid with helperEnv set, it dials or serves a socket.
const helperEnv = "HUTCH_LOCALAPI_HELPER"

func TestMain(m *testing.M) {
	processes.SupervisorMain() // TestProcessRoutes' supervisors
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

// helper is "dial PATH" (GET /v1/health, print the status or the error)
// or "serve PATH [UID]" (serve it, allowing UID, printing "ready").
func helper(h string) int {
	f := strings.Fields(h)
	switch f[0] {
	case "dial":
		fmt.Println(health(f[1]))
		return 0
	case "serve":
		var allow []int
		if len(f) > 2 {
			var uid int
			fmt.Sscan(f[2], &uid)
			allow = append(allow, uid)
		}
		ln, err := Listen(f[1], allow, nil)
		if err != nil {
			fmt.Println("listen:", err)
			return 1
		}
		fmt.Println("ready")
		http.Serve(ln, okHandler)
		return 0
	}
	return 2
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// health is the status GET /v1/health gets on the socket, or the error.
func health(sock string) string {
	resp, err := unixClient(sock).Get("http://hutch/v1/health")
	if err != nil {
		return "error: " + err.Error()
	}
	resp.Body.Close()
	return resp.Status
}

func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// server serves a Handler over a Sandbox of the default policy on a
// socket made by Listen, and returns the socket and the workspace.
func server(t *testing.T, adjust ...func(*runtime.Policy, *Options)) (string, string) {
	t.Helper()
	return serverOn(t, nil, adjust...)
}

// serverOn is server with its listener wrapped by wrap, unless wrap is
// nil.
func serverOn(t *testing.T, wrap func(net.Listener) net.Listener, adjust ...func(*runtime.Policy, *Options)) (string, string) {
	t.Helper()
	ws := t.TempDir()
	p := runtime.DefaultPolicy(ws)
	p.Prewarm = 1
	opts := Options{Version: "test", WaitDelay: time.Second}
	for _, a := range adjust {
		a(&p, &opts)
	}
	sb, err := runtime.New(p)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s", "hutch.sock")
	ln, err := Listen(sock, nil, nil)
	if err != nil {
		sb.Close()
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	srv := &http.Server{Handler: NewHandler(sb, opts)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		sb.Close()
	})
	return sock, sb.Policy().Workspace
}

// post sends body to path and returns the status and the body.
func post(t *testing.T, sock, path, body string) (int, string) {
	t.Helper()
	resp, err := unixClient(sock).Post("http://hutch"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// execEvents runs an exec and returns its output streams and result event.
func execEvents(t *testing.T, sock, body string) (stdout, stderr string, res Event) {
	t.Helper()
	code, out := post(t, sock, "/v1/exec", body)
	if code != 200 {
		t.Fatalf("exec %s: %d %s", body, code, out)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		switch ev.Type {
		case "stdout":
			stdout += ev.Data
		case "stderr":
			stderr += ev.Data
		case "result":
			res = ev
		}
	}
	if res.Result == nil || res.ExitStatus == nil {
		t.Fatalf("exec %s: no result event in %s", body, out)
	}
	return stdout, stderr, res
}

func TestExec(t *testing.T) {
	sock, ws := server(t)
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	for _, tt := range []struct {
		name, body     string
		stdout, stderr string
		status         int
	}{
		{"argv", `{"argv":["echo","a b"]}`, "a b\n", "", 0},
		{"command", `{"command":"echo out; echo err >&2; exit 3"}`, "out\n", "err\n", 3},
		{"cwd", `{"command":"pwd","cwd":"sub"}`, ws + "/sub\n", "", 0},
		{"env", `{"command":"echo $GREETING","env":{"GREETING":"hi"}}`, "hi\n", "", 0},
		{"stdin", `{"argv":["cat"],"stdin":"from stdin"}`, "from stdin", "", 0},
		{"not found", `{"argv":["no-such-command-here"]}`, "", "", 127},
		{"signal", `{"command":"kill -9 $$"}`, "", "", 137},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, res := execEvents(t, sock, tt.body)
			if out != tt.stdout || errOut != tt.stderr || *res.ExitStatus != tt.status {
				t.Errorf("got stdout %q stderr %q status %d (%s), want %q %q %d", out, errOut, *res.ExitStatus, res.Error, tt.stdout, tt.stderr, tt.status)
			}
		})
	}

	// A write in the workspace lands on the host; one outside does not.
	outside := filepath.Join(outsideDir(t), "outside")
	body, _ := json.Marshal(ExecRequest{CommandRequest: CommandRequest{Command: ptr(fmt.Sprintf("echo in > %s/in.txt; echo out > %s", ws, outside))}})
	execEvents(t, sock, string(body))
	if b, err := os.ReadFile(filepath.Join(ws, "in.txt")); string(b) != "in\n" {
		t.Errorf("host: workspace file %q, %v", b, err)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("host: %s written from the sandbox", outside)
	}

	// timeout_ms stops the command, reported as a timeout.
	start := time.Now()
	_, _, res := execEvents(t, sock, `{"command":"sleep 30","timeout_ms":300}`)
	if !res.Result.Killed || res.Result.KillReason != runtime.KilledTimeout || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: %+v after %v", res.Result, time.Since(start))
	}

	// explain adds the command's refusals to its stderr after its own
	// output; without it they are in the result alone.
	etc := fmt.Sprintf("/etc/hutch-localapi-%d", os.Getpid())
	for _, explain := range []bool{false, true} {
		body, _ := json.Marshal(ExecRequest{CommandRequest: CommandRequest{Argv: []string{"touch", etc}}, Explain: explain})
		_, errOut, res := execEvents(t, sock, string(body))
		touch := "touch: cannot touch '" + etc + "': Read-only file system\n"
		want := touch
		if explain {
			want += "hutch: refused write " + etc + ": "
		}
		if !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "hutch: refused") != explain {
			t.Errorf("explain %v: stderr %q; want %q and a summary only with explain", explain, errOut, want)
		}
		if len(res.Result.Denials) != 1 || res.Result.Denials[0].Rule != runtime.RuleOutsideWritable {
			t.Errorf("explain %v: denials %+v; want the write to %s", explain, res.Result.Denials, etc)
		}
		if _, err := os.Stat(etc); err == nil {
			os.Remove(etc)
			t.Errorf("host: %s written from the sandbox", etc)
		}
	}

	// A cwd outside the workspace is the request's fault: 400 naming cwd.
	if code, out := post(t, sock, "/v1/exec", `{"command":"true","cwd":"/etc"}`); code != 400 || !strings.Contains(out, `"field":"cwd"`) {
		t.Errorf("cwd /etc: %d %s", code, out)
	}
}

// outsideDir is a directory of the host outside the workspace, not in
// /tmp: a command's /tmp is its own, so a write there proves nothing.
func outsideDir(t *testing.T) string {
	d, err := os.MkdirTemp("/var/tmp", "hutch-localapi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func ptr[T any](v T) *T { return &v }

// TestExecChunks: output that is not UTF-8 comes as base64; a character
// cut between two writes comes whole, as text.
func TestExecChunks(t *testing.T) {
	sock, _ := server(t)
	code, out := post(t, sock, "/v1/exec", `{"command":"printf '\\303'; sleep 0.2; printf '\\251\\n'; sleep 0.2; printf '\\377'"}`)
	if code != 200 {
		t.Fatal(code, out)
	}
	var texts, b64 []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev Event
		json.Unmarshal([]byte(l), &ev)
		if ev.Type == "stdout" && ev.Base64 {
			b64 = append(b64, ev.Data)
		} else if ev.Type == "stdout" {
			texts = append(texts, ev.Data)
		}
	}
	if strings.Join(texts, "") != "é\n" || strings.Join(b64, "") != "/w==" {
		t.Errorf("text %q, base64 %q\n%s", texts, b64, out)
	}
}

func TestFiles(t *testing.T) {
	sock, ws := server(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("SECRET=hutch-localapi-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(outsideDir(t), "outside.txt")
	for _, tt := range []struct {
		name, path, body string
		status           int
		want             string // in the response
	}{
		{"write", "/v1/files/write", `{"path":"` + ws + `/d/a.txt","content":"héllo"}`, 200, `"writable":true`},
		{"write base64", "/v1/files/write", `{"path":"` + ws + `/b.bin","content_base64":"AP8="}`, 200, `"size":2`},
		{"read", "/v1/files/read", `{"path":"d/a.txt"}`, 200, `"content":"héllo"`},
		{"read binary", "/v1/files/read", `{"path":"b.bin"}`, 200, `"content_base64":"AP8="`},
		{"stat", "/v1/files/stat", `{"path":"d/a.txt"}`, 200, `"size":6`},
		{"list", "/v1/files/list", `{}`, 200, `"denied":true`},
		{"write outside", "/v1/files/write", `{"path":"` + outside + `","content":"x"}`, 403, `"denied"`},
		{"write relative", "/v1/files/write", `{"path":"rel.txt","content":"x"}`, 400, `"field":"path"`},
		{"read .env", "/v1/files/read", `{"path":".env"}`, 403, `"denied"`},
		{"read /etc/shadow", "/v1/files/read", `{"path":"/etc/shadow"}`, 403, `"denied"`},
		{"read private", "/v1/files/read", `{"path":"/tmp/x"}`, 403, `"private"`},
		{"read missing", "/v1/files/read", `{"path":"nope"}`, 404, `"not_found"`},
		{"read no path", "/v1/files/read", `{}`, 400, `"field":"path"`},
		{"bad perm", "/v1/files/write", `{"path":"` + ws + `/p","content":"x","perm":"rw"}`, 400, `"field":"perm"`},
	} {
		code, out := post(t, sock, tt.path, tt.body)
		if code != tt.status || !strings.Contains(out, tt.want) {
			t.Errorf("%s: %d %s, want %d with %s", tt.name, code, out, tt.status, tt.want)
		}
		if strings.Contains(out, "hutch-localapi-secret") {
			t.Errorf("%s: the secret came back: %s", tt.name, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "d", "a.txt")); string(b) != "héllo" {
		t.Errorf("host: %q, %v", b, err)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("host: %s written", outside)
	}
}

// TestExplainRoute: POST /v1/explain answers the Sandbox's Explain as
// JSON, and a write it refuses is one the file door refuses too, nothing
// reaching the host; a bad path or access is a 400 naming it.
func TestExplainRoute(t *testing.T) {
	sock, ws := server(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("SECRET=hutch-localapi-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(outsideDir(t), "outside.txt")
	for _, tt := range []struct {
		name, body string
		status     int
		want       []string // in the response
	}{
		{"read .env", `{"path":".env"}`, 200, []string{`"allowed":false`, `"rule":"deny-name"`, `"flag":"--no-default-deny`}},
		{"write in the workspace", `{"path":"a.txt","access":"write"}`, 200, []string{`"allowed":true`, `"rule":"writable-tree"`, `"host_path":"` + ws + `/a.txt"`}},
		{"write outside", `{"path":"` + outside + `","access":"write"}`, 200, []string{`"allowed":false`, `"rule":"outside-writable"`, `"flag":"--write `}},
		{"private tmp", `{"path":"/tmp/x","access":"write"}`, 200, []string{`"allowed":true`, `"rule":"private-tmp"`}},
		{"execute in /proc", `{"path":"/proc/self/exe","access":"execute"}`, 200, []string{`"allowed":false`, `"rule":"kernel-tree"`}},
		{"bad access", `{"path":"a.txt","access":"exec"}`, 400, []string{`"field":"access"`}},
		{"no path", `{"access":"read"}`, 400, []string{`"field":"path"`}},
		{"NUL in path", `{"path":"a\u0000b"}`, 400, []string{`"field":"path"`}},
		{"unknown field", `{"path":"a.txt","acces":"write"}`, 400, []string{`"field":"acces"`}},
	} {
		code, out := post(t, sock, "/v1/explain", tt.body)
		for _, w := range tt.want {
			if code != tt.status || !strings.Contains(out, w) {
				t.Errorf("%s: %d %s, want %d with %s", tt.name, code, out, tt.status, w)
			}
		}
		if strings.Contains(out, "hutch-localapi-secret") {
			t.Errorf("%s: the secret came back: %s", tt.name, out)
		}
	}
	if code, out := post(t, sock, "/v1/files/write", `{"path":"`+outside+`","content":"x"}`); code != 403 {
		t.Errorf("the file door wrote what Explain refuses: %d %s", code, out)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("host: %s written", outside)
	}
}

// TestMalformedBesideGood: malformed requests on other connections (bad
// JSON, garbage that is not HTTP) get their errors while a command runs,
// and the command's response is whole.
func TestMalformedBesideGood(t *testing.T) {
	sock, _ := server(t)
	var wg sync.WaitGroup
	var out string
	var res Event
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, _, res = execEvents(t, sock, `{"command":"echo one; sleep 1; echo two"}`)
	}()
	time.Sleep(200 * time.Millisecond)
	for _, body := range []string{`{"argv":`, `{"argv":["ls"],"x":1}`, "\xff\xfe", `[]`} {
		if code, resp := post(t, sock, "/v1/exec", body); code != 400 || !strings.Contains(resp, `"bad_request"`) {
			t.Errorf("%q: %d %s", body, code, resp)
		}
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "NOT HTTP AT ALL\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !strings.HasPrefix(string(b), "HTTP/1.1 400") {
		t.Errorf("garbage: %q", b)
	}
	wg.Wait()
	if out != "one\ntwo\n" || *res.ExitStatus != 0 {
		t.Errorf("the good request: %q, %+v", out, res)
	}
}

// TestListenCleansUp: Close removes the socket, and the directory when
// Listen made it; an existing directory stays.
func TestListenCleansUp(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o700)
	made := filepath.Join(base, "made", "s.sock")
	kept := filepath.Join(base, "s.sock")
	for _, path := range []string{made, kept} {
		ln, err := Listen(path, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v", path, fi, err)
		}
		ln.Close()
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s is still there after Close", path)
		}
	}
	if _, err := os.Stat(filepath.Dir(made)); err == nil {
		t.Errorf("the directory Listen made is still there after Close")
	}
	if _, err := os.Stat(base); err != nil {
		t.Errorf("the directory that was there went with Close: %v", err)
	}
}

func TestListenRefuses(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	notSock := filepath.Join(base, "priv", "file")
	os.Mkdir(filepath.Dir(notSock), 0o700)
	os.WriteFile(notSock, []byte("keep"), 0o600)
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(open, "s.sock"), "lets group or others in"},
		{notSock, "not a socket"},
		{filepath.Join(base, "missing", "deeper", "s.sock"), "no such file"},
	} {
		ln, err := Listen(tt.path, nil, nil)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%s) accepted", tt.path)
		} else if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Listen(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
	if b, _ := os.ReadFile(notSock); string(b) != "keep" {
		t.Errorf("the file at the socket's path was replaced")
	}

	// A stale socket is replaced; a live one is not, and closing the
	// listener removes the socket.
	sock := filepath.Join(base, "priv", "s.sock")
	ln, err := Listen(sock, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", fi.Mode())
	}
	if _, err := Listen(sock, nil, nil); err == nil || !strings.Contains(err.Error(), "already answers") {
		t.Errorf("second Listen on a live socket: %v", err)
	}
	ln.Close()
	if _, err := os.Lstat(sock); err == nil {
		t.Error("socket left after Close")
	}
}

// asNobody runs this test binary, copied where uid 65534 can run it, as
// 65534 with helperEnv set to h; started, for a server, or waited for.
func asNobody(t *testing.T, h string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hutch-localapi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "localapi.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin)
	c.Dir = "/"
	c.Env = []string{helperEnv + "=" + h, "PATH=/usr/bin:/bin"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return c
}

// TestPeerCredentials: a root-owned server refuses a client running as
// uid 65534, even when the directory and socket permissions are opened to
// it (so that SO_PEERCRED alone stands), and accepts it once it is
// allowed; a server of uid 65534 refuses root, which no file permission
// keeps out.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to uid 65534 needs root")
	}
	dial := func(sock string) string {
		t.Helper()
		out, err := asNobody(t, "dial "+sock).CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tt := range []struct {
		name  string
		allow []int
		open  bool
		want  string
	}{
		{"directory wall", nil, false, "permission denied"},
		{"peer refused", nil, true, "error: "},
		{"peer allowed", []int{65534}, true, "200 OK"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "hutch-peer-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			os.Chmod(base, 0o755)
			sock := filepath.Join(base, "s", "hutch.sock")
			ln, err := Listen(sock, tt.allow, nil)
			if err != nil {
				t.Fatal(err)
			}
			go http.Serve(ln, okHandler)
			defer ln.Close()
			if tt.open {
				os.Chmod(filepath.Dir(sock), 0o711)
				os.Chmod(sock, 0o666)
			}
			if got := dial(sock); !strings.Contains(got, tt.want) {
				t.Errorf("uid 65534 dialing: %s, want %q", got, tt.want)
			}
			if got := health(sock); got != "200 OK" {
				t.Errorf("the owner dialing: %s", got)
			}
		})
	}

	for _, tt := range []struct {
		name, allow, want string
	}{
		{"root refused", "", "error: "},
		{"root allowed", "0", "200 OK"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "hutch-peer-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(base)
			os.Chown(base, 65534, 65534)
			sock := filepath.Join(base, "s", "hutch.sock")
			c := asNobody(t, strings.TrimSpace("serve "+sock+" "+tt.allow))
			stdout, _ := c.StdoutPipe()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { c.Process.Kill(); c.Wait() }()
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			if line != "ready\n" {
				t.Fatalf("helper server: %q", line)
			}
			if got := health(sock); !strings.Contains(got, tt.want) {
				t.Errorf("root dialing a server of uid 65534: %s, want %q", got, tt.want)
			}
		})
	}
}

// TestGrants: a call's allowed_domains, package_managers and grant are
// given only within the policy's Grantable, and a refusal names the
// request's field; nothing runs (its command would leave a file on the
// host).
func TestGrants(t *testing.T) {
	sock, ws := server(t, func(p *runtime.Policy, _ *Options) {
		p.Grantable = runtime.Grant{Network: true, Domains: []string{"example.com"}}
	})
	for i, tt := range []struct {
		name, fields string
		status       int
		field        string
		net          runtime.NetworkMode
	}{
		{"domain beyond the ceiling", `"allowed_domains":["evil.com"]`, 403, "allowed_domains", ""},
		{"a package manager's registry beyond it", `"package_managers":["python"]`, 403, "package_managers", ""},
		{"host network beyond it", `"grant":["@host-network"]`, 403, "grant", ""},
		{"not a tag", `"grant":["network"]`, 400, "grant", ""},
		{"an empty domain", `"allowed_domains":[""]`, 400, "allowed_domains", ""},
		{"within it", `"allowed_domains":["example.com"]`, 200, "", runtime.NetworkAllow},
		{"an empty list is no network", `"allowed_domains":[]`, 200, "", runtime.NetworkNone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(ws, fmt.Sprintf("ran-%d", i))
			body := fmt.Sprintf(`{"argv":["touch",%q],%s}`, file, tt.fields)
			if tt.status == 200 {
				_, _, res := execEvents(t, sock, body)
				if _, err := os.Stat(file); err != nil || res.Result.Network != tt.net {
					t.Errorf("host file: %v; network %q, want %q", err, res.Result.Network, tt.net)
				}
				return
			}
			code, out := post(t, sock, "/v1/exec", body)
			var e struct{ Error Error }
			if json.Unmarshal([]byte(out), &e); code != tt.status || e.Error.Field != tt.field {
				t.Errorf("%d %s; want %d naming %q", code, out, tt.status, tt.field)
			}
			if _, err := os.Stat(file); err == nil {
				t.Errorf("a refused call ran: %s is on the host", file)
			}
		})
	}
}

// TestProcessRoutes: durable processes through the API, judged in the
// host's process table: start runs the command, logs hold its output,
// remove refuses a live one (409), stop ends it, and bad requests name
// their field.
func TestProcessRoutes(t *testing.T) {
	m, err := processes.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m.Supervisor, _ = os.Executable() // this binary: TestMain
	t.Cleanup(func() {
		m.StopAll(context.Background())
		m.Close()
	})
	sock, _ := server(t, func(_ *runtime.Policy, o *Options) { o.Processes = m })
	arg := fmt.Sprintf("%d.%d", 7000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	code, out := post(t, sock, "/v1/processes/start", fmt.Sprintf(`{"command":"echo up; exec sleep %s","name":"nap","restart":"never"}`, arg))
	var p processes.Process
	if json.Unmarshal([]byte(out), &p); code != 200 || p.Status != processes.StatusRunning || p.Pid == 0 {
		t.Fatalf("start: %d %s", code, out)
	}
	// The shell execs the sleep in a moment.
	var cmdline []byte
	for end := time.Now().Add(10 * time.Second); string(cmdline) != "sleep\x00"+arg+"\x00" && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		cmdline, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
	}
	if string(cmdline) != "sleep\x00"+arg+"\x00" {
		t.Fatalf("host: pid %d is %q, not the sleep", p.Pid, cmdline)
	}
	id := fmt.Sprintf(`{"id":%q}`, p.ID)
	for _, tt := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/processes/get", id, 200, `"status":"running"`},
		{"/v1/processes/logs", id, 200, `"content":"up\n"`},
		{"/v1/processes/logs", fmt.Sprintf(`{"id":%q,"tail_bytes":1}`, p.ID), 200, `"content":"\n"`},
		{"/v1/processes/remove", id, 409, `"code":"active"`},
		{"/v1/processes/get", `{"id":"000000000000"}`, 404, `"code":"not_found"`},
		{"/v1/processes/get", `{}`, 400, `"field":"id"`},
		{"/v1/processes/start", `{"command":"true","restart":"sometimes"}`, 400, `"field":"restart"`},
		{"/v1/processes/start", `{"command":"true","cwd":"/etc"}`, 400, `"field":"cwd"`},
		{"/v1/processes/start", `{"command":"true","allowed_domains":["example.com"]}`, 403, `"field":"allowed_domains"`},
		{"/v1/processes/logs", fmt.Sprintf(`{"id":%q,"tail_bytes":-1}`, p.ID), 400, `"field":"tail_bytes"`},
	} {
		code, out := post(t, sock, tt.path, tt.body)
		if code != tt.status || !strings.Contains(out, tt.want) {
			t.Errorf("%s %s: %d %s; want %d with %s", tt.path, tt.body, code, out, tt.status, tt.want)
		}
	}
	code, out = post(t, sock, "/v1/processes/stop", id)
	if json.Unmarshal([]byte(out), &p); code != 200 || p.Status != processes.StatusStopped {
		t.Fatalf("stop: %d %s", code, out)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.Runs[0].Pid)); err == nil {
		t.Errorf("host: the sleep (pid %d) runs on after stop", p.Runs[0].Pid)
	}
	if code, out := post(t, sock, "/v1/processes/remove", id); code != 200 {
		t.Errorf("remove after stop: %d %s", code, out)
	}
	resp, err := unixClient(sock).Get("http://hutch/v1/processes")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"processes":[]}`+"\n" {
		t.Errorf("list after remove: %s", b)
	}
}

// TestExecStdinStream: with StdinHeader, the body after the request is
// the command's stdin, sent while its output comes back (the client
// writes the second half only once it has seen the first echoed); a
// "stdin" field beside it is a 400.
func TestExecStdinStream(t *testing.T) {
	sock, _ := server(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://hutch/v1/exec", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(StdinHeader, "stream")
	go io.WriteString(pw, `{"argv":["sh","-c","while read l; do echo got $l; done"]}first`+"\n")
	resp, err := unixClient(sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var types []string
	var out string
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		out += ev.Data
		if out == "got first\n" {
			io.WriteString(pw, "second\n")
			pw.Close()
		}
		if ev.Type == "result" && *ev.ExitStatus != 0 {
			t.Errorf("result %+v", ev)
		}
	}
	if out != "got first\ngot second\n" || types[0] != "started" || types[len(types)-1] != "result" {
		t.Errorf("events %v, output %q", types, out)
	}

	req, _ = http.NewRequest(http.MethodPost, "http://hutch/v1/exec", strings.NewReader(`{"argv":["cat"],"stdin":"x"}y`))
	req.Header.Set(StdinHeader, "stream")
	resp2, err := unixClient(sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 400 || !strings.Contains(string(b), `"field":"stdin"`) {
		t.Errorf("stdin given twice: %d %s", resp2.StatusCode, b)
	}
}

// TestExecStdinUnreadDrained: a command that ends without reading the
// stdin streamed to it still lets the client send all of it: the server
// reads what is left (and drops it) before it closes the connection. A
// client whose write fails (EPIPE) when the server closes on unread
// stdin drops the whole exchange, its result included (Node's http
// does). Judged on the client's side of the socket: every byte of the
// body is written, and the result comes.
func TestExecStdinUnreadDrained(t *testing.T) {
	sock, _ := server(t)
	for round := range 5 {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		head := `{"argv":["true"]}`
		stdin := bytes.Repeat([]byte("x"), 4<<20)
		fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: hutch\r\n%s: stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", StdinHeader, len(head)+len(stdin), head)
		written := make(chan error, 1)
		go func() {
			// The command has long ended by the time most of this is
			// sent: it reads none of it.
			time.Sleep(200 * time.Millisecond)
			_, err := conn.Write(stdin)
			written <- err
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if err := <-written; err != nil {
			t.Errorf("round %d: the client could not send its whole stdin: %v", round, err)
		}
		if !bytes.Contains(b, []byte(`"type":"result"`)) {
			t.Errorf("round %d: no result in %q", round, b)
		}
		conn.Close()
	}
}

// TestExecRefusedStdinDrained: an exec refused before its command starts
// (a cwd outside the workspace, a body the API cannot read) answers its
// error and then reads what the client still streams, so the client's
// writes of its stdin do not fail and it gets the error, as a client of
// an exec that ran gets its result.
func TestExecRefusedStdinDrained(t *testing.T) {
	sock, _ := server(t)
	for _, tc := range []struct{ name, head, code string }{
		{"cwd outside the workspace", `{"argv":["true"],"cwd":"/etc"}`, "bad_request"},
		{"no argv", `{"argv":[]}`, "bad_request"},
	} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		stdin := bytes.Repeat([]byte("x"), 4<<20)
		fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: hutch\r\n%s: stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", StdinHeader, len(tc.head)+len(stdin), tc.head)
		written := make(chan error, 1)
		go func() {
			_, err := conn.Write(stdin)
			written <- err
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if err := <-written; err != nil {
			t.Errorf("%s: the client could not send its whole stdin: %v", tc.name, err)
		}
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":"`+tc.code+`"`)) {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, resp.StatusCode, b, tc.code)
		}
		conn.Close()
	}
}

// TestExecResultEndsResponse: an exec's result goes out in the same write
// as the response's end, so a client reading the result finds the end
// there, without waiting for a write more; with a streamed stdin still
// coming, the result is written at once, before the server drains the
// rest. Judged by the writes the server makes on its connections.
func TestExecResultEndsResponse(t *testing.T) {
	var wl *writesListener
	sock, _ := serverOn(t, func(ln net.Listener) net.Listener {
		wl = &writesListener{Listener: ln}
		return wl
	})
	const end = "0\r\n\r\n"
	resultWrite := func() string {
		for _, w := range wl.taken() {
			if strings.Contains(w, `"type":"result"`) {
				return w
			}
		}
		return ""
	}

	execEvents(t, sock, `{"argv":["true"]}`)
	if w := resultWrite(); !strings.HasSuffix(w, end) {
		t.Errorf("the result and the response's end in separate writes: the result's write is %q", w)
	}

	// A streamed stdin the command does not read: the client sends the
	// rest only once it has the result.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head, rest := `{"argv":["true"]}`, "unread stdin"
	fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: hutch\r\n%s: stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", StdinHeader, len(head)+len(rest), head)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"type":"result"`) {
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if w := resultWrite(); w == "" || strings.HasSuffix(w, end) {
		t.Errorf("with stdin still coming, the result's write is %q", w)
	}
	io.WriteString(conn, rest)
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
		t.Errorf("after the result: %q, %v", b, err)
	}
}

// writesListener records the writes its connections make.
type writesListener struct {
	net.Listener
	mu     sync.Mutex
	writes []string
}

func (l *writesListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writesConn{Conn: c, l: l}, nil
}

// taken returns the writes recorded since the last call.
func (l *writesListener) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

type writesConn struct {
	net.Conn
	l *writesListener
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, string(p))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}
