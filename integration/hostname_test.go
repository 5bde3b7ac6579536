//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestOwnHostnameResolves: a command resolving the sandbox's own host
// name (Java's InetAddress.getLocalHost, Python's getfqdn, git's ident do)
// finds it in the view's /etc/hosts, with no DNS server asked: the run
// records no refusal (it recorded a refused connect to port 53 before).
// The view's /etc/hosts is the host's with the name added, read-only, as
// the file door reads it too; the host's is untouched.
func TestOwnHostnameResolves(t *testing.T) {
	before, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skipf("no /etc/hosts on this host: %v", err)
	}
	if fi, err := os.Lstat("/etc/hosts"); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 || bytes.Contains(before, []byte("hutch")) {
		t.Skip("this host's /etc/hosts is not a file readable by all that names no hutch: the view keeps it as it is")
	}
	ws := dir(t, "ws-")

	// Python, which the guests of make test-vm have (getent they do not).
	res := runCLI(t, ws, nil, "python3", "-c", "import socket; print(socket.gethostbyname(socket.gethostname()))")
	if res.code != 0 || res.result == nil || len(res.result.Denials) != 0 {
		t.Fatalf("resolving the sandbox's hostname: exit %d, result %+v; want 0 and no denial\n%s", res.code, res.result, res)
	}
	if res.stdout != "127.0.1.1\n" {
		t.Errorf("hutch resolves to %q; want 127.0.1.1", res.stdout)
	}

	// The file door sees the view a command does.
	r := runCLIArgs(t, "read", "--workspace", ws, "/etc/hosts")
	var read struct {
		Content  string `json:"content"`
		Writable bool   `json:"writable"`
	}
	if r.code != 0 {
		t.Fatalf("hutch read /etc/hosts: %s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), &read); err != nil {
		t.Fatalf("hutch read /etc/hosts: %v\n%s", err, r)
	}
	want := string(before)
	if want != "" && !strings.HasSuffix(want, "\n") {
		want += "\n"
	}
	want += "127.0.1.1\thutch\n"
	if read.Content != want || read.Writable {
		t.Errorf("the view's /etc/hosts through the file door: %q, writable %v; want %q, read-only", read.Content, read.Writable, want)
	}

	// Explained as what the kernel does with it: read, not executed.
	for access, want := range map[string]string{"read": "allowed:", "execute": "refused:", "write": "refused:"} {
		r := runCLIArgs(t, "why", "--workspace", ws, "--access", access, "/etc/hosts")
		if !strings.HasPrefix(r.stdout+r.stderr, want) {
			t.Errorf("hutch why --access %s /etc/hosts: %s; want %s", access, r, want)
		}
	}

	// Read-only, and the host's stays as it was.
	res = runCLI(t, ws, nil, "sh", "-c", "echo 10.0.0.1 planted >> /etc/hosts")
	if res.code == 0 {
		t.Errorf("a write to the view's /etc/hosts succeeded\n%s", res)
	}
	after, err := os.ReadFile("/etc/hosts")
	if err != nil || !bytes.Equal(after, before) {
		t.Errorf("host: /etc/hosts changed: %q (%v); was %q", after, err, before)
	}
}
