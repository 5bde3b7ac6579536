package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
)

// socketEnv names the socket of a running hutch serve that hutch run
// sends its command to, when that server can run exactly what run's
// flags say: same flags, same exit statuses, warm sandboxes.
const socketEnv = "HUTCH_SOCKET"

// callFor says how a command of policy local goes through a server whose
// flags gave policy server: the call's own fields (the variables,
// timeout and grants that local has on top of server's), or the fields
// in which the two differ otherwise, in which case the server cannot run
// it. killAfter is run's grace when --kill-after was given, else 0.
func callFor(local, server runtime.Policy, killAfter, serverKillAfter time.Duration) (localapi.ExecRequest, []string) {
	var req localapi.ExecRequest
	var differ []string
	local, server = local.Clone(), server.Clone()
	if killAfter != 0 && killAfter != serverKillAfter {
		differ = append(differ, "--kill-after")
	}

	// The variables: the call's on top of the server's.
	if extra, ok := added(local.Env, server.Env); ok {
		for _, kv := range extra {
			k, v, _ := strings.Cut(kv, "=")
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			req.Env[k] = v
		}
		local.Env = server.Env
	}

	// The timeout: a call's may only shorten the server's.
	if local.Timeout > 0 && (server.Timeout <= 0 || local.Timeout < server.Timeout) {
		req.TimeoutMS = max(1, local.Timeout.Milliseconds())
		local.Timeout = server.Timeout
	}

	// The network: more than the server's is a grant, within its
	// --grantable ceiling.
	switch {
	case local.Network == server.Network:
		if local.Network == runtime.NetworkAllow {
			if extra, ok := added(local.AllowDomains, server.AllowDomains); ok && len(extra) > 0 {
				req.Grant = append(req.Grant, "@network")
				req.AllowedDomains = extra
				local.AllowDomains = server.AllowDomains
			}
			if extra, ok := added(local.PackageManagers, server.PackageManagers); ok && len(extra) > 0 {
				req.Grant = append(req.Grant, "@network")
				req.PackageManagers = extra
				local.PackageManagers = server.PackageManagers
			}
		}
	case local.Network == runtime.NetworkHost:
		req.Grant = append(req.Grant, "@host-network")
		local.Network, local.AllowDomains, local.PackageManagers, local.AllowLocal = server.Network, server.AllowDomains, server.PackageManagers, server.AllowLocal
	case local.Network == runtime.NetworkAllow && server.Network == runtime.NetworkNone && len(local.AllowLocal) == 0:
		req.Grant = append(req.Grant, "@network")
		req.AllowedDomains, req.PackageManagers = local.AllowDomains, local.PackageManagers
		local.Network, local.AllowDomains, local.PackageManagers = server.Network, server.AllowDomains, server.PackageManagers
	}
	if extra, ok := added(local.Writable, server.Writable); ok {
		for _, w := range extra {
			req.Grant = append(req.Grant, "write:"+w)
		}
		local.Writable = server.Writable
	}
	if local.AllowGitWrite && !server.AllowGitWrite {
		req.Grant = append(req.Grant, "@git-write")
		local.AllowGitWrite = false
	}
	req.Grant = slices.Compact(req.Grant)
	return req, append(differ, differences(local, server)...)
}

// added is what list has beyond base, when list holds all of base.
func added(list, base []string) ([]string, bool) {
	var extra []string
	for _, v := range list {
		if !slices.Contains(base, v) {
			extra = append(extra, v)
		}
	}
	for _, v := range base {
		if !slices.Contains(list, v) {
			return nil, false
		}
	}
	return extra, true
}

// differences names the fields in which two policies differ, as their
// JSON says them (an empty list and none are the same), leaving out what
// only the server has (its pool, its ceiling) and what never travels
// (LeakValues, the Logger).
func differences(a, b runtime.Policy) []string {
	ma, mb := policyFields(a), policyFields(b)
	var out []string
	// Both policies' keys: a field left out of one's JSON when it is
	// false (AllowNested) is compared all the same.
	for k := range mb {
		if _, ok := ma[k]; !ok {
			ma[k] = nil
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ma)) {
		switch k {
		case "Prewarm", "Grantable":
			continue
		}
		if !reflect.DeepEqual(ma[k], mb[k]) {
			out = append(out, k)
		}
	}
	return out
}

// policyFields is p's JSON, field by field, with empty lists, maps and
// strings as null.
func policyFields(p runtime.Policy) map[string]any {
	b, _ := json.Marshal(p)
	var m map[string]any
	json.Unmarshal(b, &m)
	for k, v := range m {
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				m[k] = nil
			}
		case map[string]any:
			if len(x) == 0 {
				m[k] = nil
			}
		case string:
			if x == "" {
				m[k] = nil
			}
		}
	}
	return m
}

// remoteRun runs args through the server at sock when it can run exactly
// what policy p says (see callFor), streaming stdin to the command and
// its output back; ran is false, with why logged, when it cannot, and
// nothing of stdin has been read then. killAfter is --kill-after's value
// when given.
func remoteRun(ctx context.Context, sock string, p runtime.Policy, killAfter time.Duration, args []string, stdin io.Reader) (res *runtime.Result, status int, ran bool, err error) {
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	local := func(why string, args ...any) (*runtime.Result, int, bool, error) {
		slog.Warn(fmt.Sprintf("hutch: %s=%s: "+why+"; running the command here", append([]any{socketEnv, sock}, args...)...))
		return nil, 0, false, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	preq, _ := http.NewRequestWithContext(pctx, http.MethodGet, "http://hutch/v1/policy", nil)
	resp, err := client.Do(preq)
	if err != nil {
		return local("no server answers (%v)", err)
	}
	var info localapi.PolicyResponse
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		return local("the server does not say its policy (%s)", resp.Status)
	}
	req, differ := callFor(p, info.Policy, killAfter, time.Duration(info.KillAfterMS)*time.Millisecond)
	if len(differ) > 0 {
		return local("the server's policy differs in %s", strings.Join(differ, ", "))
	}
	req.Argv = args
	head, err := json.Marshal(req)
	if err != nil {
		return nil, 0, false, err
	}
	// stdin is read only once the command runs: a call refused before
	// that leaves it whole for the command run here, and a call that
	// ends without the command running (not found) ends the body unread.
	stdinGate := newGate(stdin)
	defer stdinGate.shut()
	body := io.MultiReader(bytes.NewReader(head), stdinGate)
	ereq, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://hutch/v1/exec", body)
	ereq.Header.Set("Content-Type", "application/json")
	ereq.Header.Set(localapi.StdinHeader, "stream")
	resp, err = client.Do(ereq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, true, context.Cause(ctx)
		}
		return local("the call failed (%v)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error localapi.Error }
		json.NewDecoder(resp.Body).Decode(&e)
		return local("the server refused the call (%s)", e.Error.Error())
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev localapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, 0, true, fmt.Errorf("%s: an event that is not JSON: %w", socketEnv, err)
		}
		switch ev.Type {
		case "started":
			stdinGate.open()
		case "stdout", "stderr":
			data := []byte(ev.Data)
			if ev.Base64 {
				if data, err = base64.StdEncoding.DecodeString(ev.Data); err != nil {
					return nil, 0, true, fmt.Errorf("%s: output that is not base64: %w", socketEnv, err)
				}
			}
			w := os.Stdout
			if ev.Type == "stderr" {
				w = os.Stderr
			}
			w.Write(data)
		case "result":
			if ev.Result == nil || ev.ExitStatus == nil {
				return nil, 0, true, fmt.Errorf("%s: a result event without a result", socketEnv)
			}
			if ev.Error != "" {
				err = errors.New(ev.Error)
			}
			return ev.Result, *ev.ExitStatus, true, err
		}
	}
	if ctx.Err() != nil {
		return nil, 0, true, context.Cause(ctx)
	}
	return nil, 0, true, fmt.Errorf("%s: the server's answer ended before the result (%v)", socketEnv, sc.Err())
}

// gate passes r's bytes on once opened; shut before that, it ends
// without having read any. Each takes effect once, the first of them
// decides.
type gate struct {
	r       io.Reader
	decided chan struct{}
	once    sync.Once
	opened  bool // set before decided is closed
}

func newGate(r io.Reader) *gate { return &gate{r: r, decided: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { g.opened = true; close(g.decided) }) }
func (g *gate) shut() { g.once.Do(func() { close(g.decided) }) }

func (g *gate) Read(p []byte) (int, error) {
	<-g.decided
	if !g.opened {
		return 0, io.EOF
	}
	return g.r.Read(p)
}
