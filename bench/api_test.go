//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAPIExec is a command as an agent written in Python or Node
// pays for it through the local API (`hutch serve`, warm: its pool of
// prewarmed inits filled), against that same client process spawning
// `true` itself (bare) and spawning bubblewrap with the agent policy
// (bwrap, bwrapArgs). A client script (testdata/api_bench.py,
// testdata/api_bench.js; standard library only) runs the three
// interleaved round by round, in the harness's order, b.N rounds after a
// few untimed ones, and prints each method's samples; the ratios are from
// those same rounds. x_bare is the API's p50 over bare's, bwrap-x_api
// bwrap's p50 over the API's. ms/op is a whole round (three spawns),
// interpreter start included.
//
// One server serves both clients: `hutch serve --socket S --workspace W`
// with its defaults (two prewarmed inits), as an agent would start it.
func BenchmarkAPIExec(b *testing.B) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap is not installed: BenchmarkAPIExec compares the API with a client spawning bwrap itself")
	}
	sock := apiServer(b)
	clients, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	if err != nil {
		b.Fatal(err)
	}
	bwrapArgv := append([]string{bw}, bwrapArgs("true")...)
	b.Run("python", func(b *testing.B) {
		py, err := systemPython()
		if err != nil {
			b.Skip("python3 is not installed: ", err)
		}
		runAPIClient(b, py, "testdata/api_bench.py", map[string]any{
			"socket": sock, "client_dir": clients, "bwrap": bwrapArgv,
		})
	})
	b.Run("node", func(b *testing.B) {
		node, err := exec.LookPath("node")
		if err != nil {
			b.Skip("node is not installed: ", err)
		}
		runAPIClient(b, node, "testdata/api_bench.js", map[string]any{"socket": sock, "bwrap": bwrapArgv})
	})
}

// apiWarmup is the client's rounds before the timed ones: its interpreter
// and the server warmed, the server's connections and heap grown.
const apiWarmup = 10

// runAPIClient runs a client script for b.N rounds and reports its
// figures.
func runAPIClient(b *testing.B, interp, script string, cfg map[string]any) {
	cfg["rounds"], cfg["warmup"] = b.N, apiWarmup
	arg, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(interp, script, string(arg))
	cmd.Stderr = os.Stderr
	b.ResetTimer()
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", interp, script, err, out)
	}
	var res struct {
		Client, Version string
		Methods         map[string]struct {
			P50 float64 `json:"p50_ms"`
			P90 float64 `json:"p90_ms"`
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("%s: output: %v\n%s", script, err, out)
	}
	api, bare, bwrap := res.Methods["api"], res.Methods["bare"], res.Methods["bwrap"]
	if api.P50 <= 0 || bare.P50 <= 0 || bwrap.P50 <= 0 {
		b.Fatalf("%s: a method is missing: %s", script, out)
	}
	b.ReportMetric(api.P50, "p50-ms")
	b.ReportMetric(api.P90, "p90-ms")
	b.ReportMetric(bare.P50, "bare-p50-ms")
	b.ReportMetric(bare.P90, "bare-p90-ms")
	b.ReportMetric(bwrap.P50, "bwrap-p50-ms")
	b.ReportMetric(bwrap.P90, "bwrap-p90-ms")
	b.ReportMetric(api.P50/bare.P50, "x_bare")
	b.ReportMetric(bwrap.P50/api.P50, "bwrap-x_api")
	b.Logf("%s %s: api p50 %.2f ms, bare %.2f ms, bwrap %.2f ms", res.Client, res.Version, api.P50, bare.P50, bwrap.P50)
}

// systemPython is the system's python3 when there is one: a version
// manager's shim is a script, started before the interpreter.
func systemPython() (string, error) {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3", nil
	}
	return exec.LookPath("python3")
}

// apiServer starts `hutch serve` on a socket in scratch, over the
// workspace, waits until its pool is full, and stops it when b ends.
func apiServer(b *testing.B) string {
	hutch, err := hutchCLI()
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(scratch, "api", "hutch.sock")
	logf, err := os.Create(filepath.Join(scratch, "serve.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(hutch, "serve", "--socket", sock, "--workspace", workspace, "--kill-after", "2s")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	serveLog := func() string {
		out, _ := os.ReadFile(logf.Name())
		return string(out)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var h struct{ Prewarmed int }
		resp, err := c.Get("http://hutch/v1/health")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
		}
		if err == nil && h.Prewarmed >= 2 {
			return sock
		}
		select {
		case <-exited:
			b.Fatalf("hutch serve exited:\n%s", serveLog())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("hutch serve: no full pool after 60s (%v, prewarmed %s):\n%s", err, strconv.Itoa(h.Prewarmed), serveLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
