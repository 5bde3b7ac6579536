package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
)

// TestCallFor: what hutch run's flags have on top of a server's policy
// travels as the call's own fields (variables, a shorter timeout, grants);
// anything else that differs keeps the command off the server, named.
func TestCallFor(t *testing.T) {
	server := runtime.DefaultPolicy("/w")
	server.Env = []string{"CI=1"}
	with := func(f func(*runtime.Policy)) runtime.Policy {
		p := server.Clone()
		f(&p)
		return p
	}
	tests := []struct {
		name      string
		local     runtime.Policy
		server    runtime.Policy
		killAfter time.Duration
		want      localapi.ExecRequest
		differ    []string
	}{
		{name: "the same flags", local: server, server: server},
		{name: "the server's pool and ceiling are its own", local: server,
			server: with(func(p *runtime.Policy) { p.Prewarm = 4; p.Grantable = runtime.Grant{Network: true} })},
		{name: "a variable more", local: with(func(p *runtime.Policy) { p.Env = append(p.Env, "A=b=c") }), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Env: map[string]string{"A": "b=c"}}}},
		{name: "a variable fewer", local: with(func(p *runtime.Policy) { p.Env = nil }), server: server, differ: []string{"Env"}},
		{name: "a timeout", local: with(func(p *runtime.Policy) { p.Timeout = 1500 * time.Microsecond }), server: server,
			want: localapi.ExecRequest{TimeoutMS: 1}},
		{name: "a longer timeout than the server's", local: with(func(p *runtime.Policy) { p.Timeout = time.Hour }),
			server: with(func(p *runtime.Policy) { p.Timeout = time.Minute }), differ: []string{"Timeout"}},
		{name: "domains", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowDomains, p.PackageManagers = runtime.NetworkAllow, []string{"example.com"}, []string{"python"}
		}), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@network"}, AllowedDomains: []string{"example.com"}, PackageManagers: []string{"python"}}}},
		{name: "a domain more than the server's", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org", "b.org"}
		}), server: with(func(p *runtime.Policy) { p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org"} }),
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@network"}, AllowedDomains: []string{"b.org"}}}},
		{name: "a domain fewer", local: with(func(p *runtime.Policy) { p.Network = runtime.NetworkAllow }),
			server: with(func(p *runtime.Policy) { p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"a.org"} }), differ: []string{"AllowDomains"}},
		{name: "local addresses are no grant", local: with(func(p *runtime.Policy) {
			p.Network, p.AllowLocal = runtime.NetworkAllow, []string{"127.0.0.1:8080"}
		}), server: server, differ: []string{"AllowLocal", "Network"}},
		{name: "host network, a tree, commits", local: with(func(p *runtime.Policy) {
			p.Network, p.Writable, p.AllowGitWrite = runtime.NetworkHost, []string{"/data"}, true
		}), server: server,
			want: localapi.ExecRequest{CommandRequest: localapi.CommandRequest{Grant: []string{"@host-network", "write:/data", "@git-write"}}}},
		{name: "nested sandboxes are no grant", local: with(func(p *runtime.Policy) { p.AllowNested = true }), server: server, differ: []string{"AllowNested"}},
		{name: "the server's nested sandboxes", local: server, server: with(func(p *runtime.Policy) { p.AllowNested = true }), differ: []string{"AllowNested"}},
		{name: "limits and masks differ", local: with(func(p *runtime.Policy) { p.Memory, p.Deny = 64<<20, []string{"/srv"} }), server: server,
			differ: []string{"Deny", "Memory"}},
		{name: "another workspace", local: runtime.DefaultPolicy("/v"), server: runtime.DefaultPolicy("/w"), differ: []string{"Workspace"}},
		{name: "--kill-after given, another", local: server, server: server, killAfter: 3 * time.Second, differ: []string{"--kill-after"}},
		{name: "--kill-after given, the same", local: server, server: server, killAfter: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, differ := callFor(tt.local, tt.server, tt.killAfter, 5*time.Second)
			slices.Sort(differ)
			if !slices.Equal(differ, tt.differ) {
				t.Errorf("differ %v, want %v", differ, tt.differ)
			}
			if len(tt.differ) == 0 && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("call %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRemoteRunStdinGate: the command's stdin is read only once the
// server says the command started. A call that ends without that (a
// command not found) ends the body with none of stdin read, and a
// repeated "started" is harmless. The server here is a fake on a unix
// socket that records what the body brought after the request.
func TestRemoteRunStdinGate(t *testing.T) {
	p := runtime.DefaultPolicy(t.TempDir())
	for _, tt := range []struct {
		name   string
		events []string
		read   bool // stdin reaches the server
	}{
		{"never started", []string{`{"type":"result","result":{"exit_code":127},"exit_status":127,"error":"not found"}`}, false},
		{"started twice", []string{`{"type":"started"}`, `{"type":"started"}`, `{"type":"result","result":{"exit_code":0},"exit_status":0}`}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			rest := make(chan string, 1)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					json.NewEncoder(w).Encode(localapi.PolicyResponse{Policy: p})
					return
				}
				http.NewResponseController(w).EnableFullDuplex()
				dec := json.NewDecoder(r.Body)
				var req localapi.ExecRequest
				if err := dec.Decode(&req); err != nil {
					t.Errorf("fake server: %v", err)
				}
				said := false
				for _, ev := range tt.events {
					fmt.Fprintln(w, ev)
					w.(http.Flusher).Flush()
					if ev == `{"type":"started"}` && !said {
						said = true
						// What the command would read of its stdin.
						b := make([]byte, 5)
						n, _ := io.ReadFull(io.MultiReader(dec.Buffered(), r.Body), b)
						rest <- string(b[:n])
					}
				}
				if !tt.read {
					b, _ := io.ReadAll(io.MultiReader(dec.Buffered(), r.Body))
					rest <- string(b)
				}
			})}
			go srv.Serve(ln)
			defer srv.Close()
			stdin := &countingReader{r: strings.NewReader("input")}
			_, status, ran, err := remoteRun(context.Background(), sock, p, 0, []string{"cmd"}, stdin)
			if !ran || (err == nil) != tt.read {
				t.Fatalf("ran %v, status %d, err %v", ran, status, err)
			}
			select {
			case got := <-rest:
				if want := map[bool]string{true: "input", false: ""}[tt.read]; got != want {
					t.Errorf("the body after the request brought %q, want %q", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the body was never ended: stdin held open for a command that did not start")
			}
			if n := stdin.n.Load(); !tt.read && n != 0 {
				t.Errorf("stdin read %d bytes for a command that did not start", n)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
