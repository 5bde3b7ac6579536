//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// The soak's shape: soakConns client connections at once, each making
// soakPerConn requests (10,000 in all), the first soakWarmup of them a
// warm-up after which the server's host-side figures are taken, to be
// compared with the same figures at the end.
const (
	soakConns   = 200
	soakPerConn = 50
	soakWarmup  = 10
	soakPrewarm = 2
)

// TestServeSoak (issue 21): `hutch serve` under 200 concurrent keep-alive
// connections making 10,000 requests in all: commands (an argv echo of a
// unique token, its output checked exactly), file writes, reads and stats
// (checked against the host's file), and a few malformed requests (a 400
// each, the connection going on). Every answer must be right, and on the
// host: the server's open fds and resident memory must not grow from the
// end of the warm-up to the end, no sandbox process or cgroup of it may be
// left but its prewarmed inits', its connections' fds must go when the
// clients hang up, and once stopped nothing of it may remain.
func TestServeSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a soak of the server (about 100 s)")
	}
	ws := dir(t, "soak-ws-")
	must(os.Mkdir(filepath.Join(ws, "soak"), 0o755))
	srv := soakStart(t, ws)
	// The server alone: its own fds, the pool's, no client connected.
	idle := srv.checkpoint(t, nil, false)
	t.Logf("idle: %s", idle)

	workers := make([]*soakWorker, soakConns)
	var dials atomic.Int64
	for i := range workers {
		workers[i] = newSoakWorker(i, srv.sock, ws, &dials)
	}
	defer func() {
		for _, w := range workers {
			w.c.CloseIdleConnections()
		}
	}()
	var failed soakFailures
	run := func(from, to int) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := from; j < to; j++ {
					if err := w.request(j); err != nil {
						failed.add(fmt.Errorf("connection %d, request %d: %w", w.id, j, err))
					}
				}
			}()
		}
		wg.Wait()
		if n := failed.n.Load(); n > 0 {
			t.Fatalf("%d of the answers were wrong; the first:\n%s\nserver log:\n%s", n, strings.Join(failed.first, "\n"), srv.log())
		}
		return time.Since(t0)
	}
	stopSampling := srv.sample()
	took := run(0, soakWarmup)
	warmPeak := stopSampling()
	warm := srv.checkpoint(t, workers[0].c, true)
	t.Logf("warm-up: %d requests in %v (under load at most %d fds, %d KiB RSS); at rest: %s; %s",
		soakConns*soakWarmup, took.Round(time.Millisecond), warmPeak.fds, warmPeak.rssKiB, warm, warm.gc.line)
	// Another job beside this one makes files where the carve-out lists
	// (the suite's scratch directory): the server's cache of listings
	// grows, which is no leak (see leakableFds).
	for i := range 40 {
		f := filepath.Join(filepath.Dir(ws), fmt.Sprintf("neighbour-%d-%d", os.Getpid(), i))
		must(os.WriteFile(f, nil, 0o644))
		t.Cleanup(func() { os.Remove(f) })
	}
	stopSampling = srv.sample()
	took = run(soakWarmup, soakPerConn)
	peak := stopSampling()
	end := srv.checkpoint(t, workers[0].c, true)
	t.Logf("then %d requests in %v (under load at most %d fds, %d KiB RSS); at rest: %s; %s",
		soakConns*(soakPerConn-soakWarmup), took.Round(time.Millisecond), peak.fds, peak.rssKiB, end, end.gc.line)

	// The server closed no connection, not even after a malformed
	// request. (A client may drop one by itself: see soakConn.)
	var ended, redialled []string
	for _, w := range workers {
		ended = append(ended, w.serverEnded()...)
		redialled = append(redialled, w.redials...)
	}
	if len(ended) > 0 {
		t.Errorf("the server ended %d of the clients' connections:\n%s", len(ended), strings.Join(ended, "\n"))
	}
	if len(redialled) > 0 {
		t.Logf("%d connections dialled for %d clients; the clients dialled again:\n%s", dials.Load(), soakConns, strings.Join(redialled, "\n"))
	}
	// With all the connections open and idle and the pool full, the fds
	// are the same set at both points. The slack is for what the pool
	// and the runtime hold for a moment without a leak: a pooled init's
	// descriptors in the instant of its refill, a connection's close not
	// yet seen.
	const fdSlack = 4
	if warm.fds < idle.fds+soakConns {
		t.Errorf("after the warm-up the server holds %d fds, idle %d: the %d connections are not all open", warm.fds, idle.fds, soakConns)
	}
	if end.fds > warm.fds+fdSlack {
		t.Errorf("the server's open fds grew from %d after the warm-up to %d at the end (slack %d)", warm.fds, end.fds, fdSlack)
	}
	if warm.spawnFds >= 0 && end.spawnFds > warm.spawnFds+fdSlack {
		t.Errorf("the spawn server's open fds grew from %d after the warm-up to %d at the end (slack %d)", warm.spawnFds, end.spawnFds, fdSlack)
	}
	// The live heap at rest, from the server's own collections (see
	// calm): the figure a leak of Go memory moves first.
	if grew := (end.gc.liveMB + end.gc.stacksMB) - (warm.gc.liveMB + warm.gc.stacksMB); grew > soakHeapBoundMB {
		t.Errorf("the server's live heap at rest grew by %d MB over %d requests after the warm-up (%q -> %q; bound %d MB)",
			grew, soakConns*(soakPerConn-soakWarmup), warm.gc.line, end.gc.line, soakHeapBoundMB)
	}
	// See soakRSSSlackKiB.
	if ceiling := max(warm.rssKiB, warmPeak.rssKiB) + soakRSSSlackKiB; end.rssKiB > ceiling {
		t.Errorf("the server's RSS at rest is %d KiB at the end, over the warm-up's high-water mark (%d KiB) and its slack (%d KiB)",
			end.rssKiB, max(warm.rssKiB, warmPeak.rssKiB), soakRSSSlackKiB)
	}
	if grew := end.spawnRSSKiB - warm.spawnRSSKiB; grew > soakSpawnRSSBoundKiB {
		t.Errorf("the spawn server's RSS grew by %d KiB after the warm-up (%d -> %d KiB; bound %d KiB)",
			grew, warm.spawnRSSKiB, end.spawnRSSKiB, soakSpawnRSSBoundKiB)
	}
	// Nothing of the 3,000 commands is left: below the server, its spawn
	// server and the pool's inits only, and no cgroup but theirs.
	if end.strays != "" {
		t.Errorf("processes left below the server: %s", end.strays)
	}
	if end.groups > soakPrewarm {
		t.Errorf("%d cgroups of the server left, over its %d prewarmed inits'", end.groups, soakPrewarm)
	}

	// The clients hang up: their connections' fds go.
	for _, w := range workers {
		w.c.CloseIdleConnections()
	}
	var fds int
	if !waitFor(15*time.Second, func() bool { fds = soakFds(srv.pid()); return fds <= idle.fds+fdSlack }) {
		t.Errorf("the clients gone, the server still holds %d fds (idle it held %d, slack %d)", fds, idle.fds, fdSlack)
	}
	t.Logf("clients gone: the server holds %d fds", fds)

	// Stopped, nothing of the server remains: not its spawn server, not
	// the pool's inits.
	kids := soakDescendants(srv.pid())
	srv.stop(t)
	var left []int
	if !waitFor(10*time.Second, func() bool {
		left = left[:0]
		for pid, st := range kids {
			if soakRunning(pid, st) {
				left = append(left, pid)
			}
		}
		return len(left) == 0
	}) {
		t.Errorf("stopped, the server left processes running: %v", left)
	}
}

// The bounds on the server's memory, from the end of the warm-up (2,000
// requests) to the end (8,000 more), measured on a 2-core VM with other
// test suites beside it (load average 3 to 16), as root and as uid 65534.
// The server's RSS is mostly what its Go allocator keeps of its last
// peak: 200 requests in flight at once take its heap to 50-60 MB; what it
// gives back at rest depends on when its background scavenger gets to it
// (seconds to minutes). Without a leak its RSS at rest was 56-74 MiB
// after the warm-up and at the end alike, its high-water mark under load
// 62-78 MiB in the warm-up and 76-88 MiB after it: figures that leave a
// few hundred bytes a request (2-3 MB over 8,000) unseen. So the exact
// measure is the live heap and stacks at rest as the server's runtime
// itself marks them (calm): 3-4 MB after the warm-up and at the end,
// never more at the end. A server built with a leak of 300 bytes a
// request fails on it (4 MB -> 7 MB), and on nothing else.
//
//   - soakHeapBoundMB: the growth of the live heap and stacks at rest, in
//     the trace's whole (truncated) MB: 1 passes any growth under 1 MB,
//     fails any of 2 MB or more: a leak of 262 bytes a request.
//   - soakRSSSlackKiB: the RSS at rest at the end over the warm-up's
//     high-water mark: a backstop for memory outside the Go heap (C
//     allocations, mappings, threads), which the heap's figure does not
//     see. 32 MiB is the spread above between the two phases' peaks
//     (20.7 MiB at most) with half again as margin; it fails a leak of
//     4 KiB a request.
//   - soakSpawnRSSBoundKiB: the spawn server's RSS growth (C, no
//     allocator's slack: the same to the KiB at both points in every
//     run): 256 KiB fails a leak of 110 bytes a command over the 2,400
//     after the warm-up.
const (
	soakHeapBoundMB      = 1
	soakRSSSlackKiB      = 32 << 10
	soakSpawnRSSBoundKiB = 256
)

// soakServer is a `hutch serve` started for the soak.
type soakServer struct {
	cmd     *exec.Cmd
	sock    string
	logf    string
	ballast string // see calm
	exited  chan struct{}
}

func soakStart(t *testing.T, ws string) *soakServer {
	t.Helper()
	d := dir(t, "soak-")
	s := &soakServer{sock: filepath.Join(d, "s", "hutch.sock"), logf: filepath.Join(d, "serve.log"), exited: make(chan struct{})}
	s.ballast = filepath.Join(ws, "soak-ballast.txt")
	must(os.WriteFile(s.ballast, bytes.Repeat([]byte("ballast, read to make garbage.\n"), soakBallast/32), 0o644))
	logf, err := os.Create(s.logf)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(hutchBin, "serve", "--socket", s.sock, "--workspace", ws,
		"--prewarm", strconv.Itoa(soakPrewarm), "--kill-after", "2s")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server's runtime traces its collections into its log: the live
	// heap at rest (calm) is read there.
	s.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
	c := soakClient(s.sock, nil)
	defer c.CloseIdleConnections()
	if !waitFor(60*time.Second, func() bool { return s.prewarmed(c) == soakPrewarm }) {
		t.Fatalf("hutch serve: no full pool on %s after 60s:\n%s", s.sock, s.log())
	}
	return s
}

func (s *soakServer) pid() int { return s.cmd.Process.Pid }

// log is the server's log, its runtime's GC trace left out.
func (s *soakServer) log() string {
	var out []string
	for _, l := range strings.SplitAfter(s.rawLog(), "\n") {
		if !strings.HasPrefix(l, "gc ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func (s *soakServer) rawLog() string {
	b, _ := os.ReadFile(s.logf)
	return string(b)
}

// prewarmed is GET /v1/health's count of ready inits, -1 on an error.
func (s *soakServer) prewarmed(c *http.Client) int {
	resp, err := c.Get("http://hutch/v1/health")
	if err != nil {
		return -1
	}
	// Read to its end: a body closed before, the client could not use
	// the connection again, and would dial another.
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h struct{ Prewarmed int }
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(b, &h) != nil {
		return -1
	}
	return h.Prewarmed
}

// stop ends the server as its user would, with SIGTERM, and waits for it.
func (s *soakServer) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if st := s.cmd.ProcessState; !st.Success() {
			t.Errorf("hutch serve exited with %v on SIGTERM:\n%s", st, s.log())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("hutch serve is still running 30s after SIGTERM")
	}
}

// soakPoint is the server's host-side figures at a checkpoint.
type soakPoint struct {
	fds, rssKiB, threads  int
	spawnFds, spawnRSSKiB int // the spawn server's; fds -1 when unreadable
	inits                 int
	spares                int    // the spawn server's spare (hutch-spare): none or one
	strays                string // processes below the server beyond the spawn server, its idle inits and its spare
	groups                int    // the server's cgroups left
	gc                    soakGC // the last collection at rest, when calmed
}

func (p soakPoint) String() string {
	return fmt.Sprintf("server %d fds, %d KiB RSS, %d threads; spawn server %d fds, %d KiB RSS; %d pooled inits, %d spares, %d cgroups",
		p.fds, p.rssKiB, p.threads, p.spawnFds, p.spawnRSSKiB, p.inits, p.spares, p.groups)
}

// checkpoint waits until the server is at rest, no request in flight and
// its pool full again (asked on c, an open connection, so as not to add
// one, or a fresh one closed afterwards when c is nil), and reads its
// figures from the host's /proc. With calm, it first has the server
// collect its garbage at rest, which gives its live heap (see calm).
func (s *soakServer) checkpoint(t *testing.T, c *http.Client, calm bool) soakPoint {
	t.Helper()
	own := c == nil
	if own {
		c = soakClient(s.sock, nil)
	}
	var p soakPoint
	if !waitFor(30*time.Second, func() bool {
		if s.prewarmed(c) != soakPrewarm {
			return false
		}
		p = s.read()
		return p.strays == "" && p.inits == soakPrewarm && p.spares <= 1
	}) {
		t.Logf("the server did not come to rest in 30s: %s; strays: %s", p, p.strays)
	}
	var gc soakGC
	if calm {
		var err error
		if gc, err = s.calm(c); err != nil {
			t.Fatal(err)
		}
	}
	if own {
		c.CloseIdleConnections()
	}
	// calm's reads went through the file door, whose server (an init and
	// its cgroup) is kept for runtime's fileServerIdle (5 s) after its
	// last use, and then goes: at rest there is nothing but the pool.
	if !waitFor(30*time.Second, func() bool { p = s.read(); return p.inits == soakPrewarm && p.groups <= soakPrewarm }) {
		t.Logf("the file server did not go in 30s: %s", p)
	}
	// The fds a moment later: a connection just closed, a refill just
	// finished are counted right.
	time.Sleep(200 * time.Millisecond)
	p = s.read()
	p.gc = gc
	return p
}

// soakBallast is the size of the file calm reads.
const soakBallast = 512 << 10

// soakGC is one collection of the server's, from its GC trace
// (GODEBUG=gctrace=1: "gc N ...: A->B->C MB, D MB goal, E MB stacks, ...").
type soakGC struct {
	n                int
	liveMB, stacksMB int // C: the heap marked live; E: the goroutines' stacks
	line             string
}

var soakGCLine = regexp.MustCompile(`^gc (\d+) .* \d+->\d+->(\d+) MB, \d+ MB goal, (\d+) MB stacks`)

// lastGC is the last collection in the server's log.
func (s *soakServer) lastGC() soakGC {
	var last soakGC
	for _, l := range strings.Split(s.rawLog(), "\n") {
		if m := soakGCLine.FindStringSubmatch(l); m != nil {
			last.n, _ = strconv.Atoi(m[1])
			last.liveMB, _ = strconv.Atoi(m[2])
			last.stacksMB, _ = strconv.Atoi(m[3])
			last.line = l
		}
	}
	return last
}

// calm has the server collect its garbage with nothing else in flight,
// and returns the collection that marked the least live: what the server
// holds at rest. Reads of a file, one after another, each allocating the
// file and its JSON answer (some 1.5 MB) and keeping nothing, bring the
// first collection soon, whatever the goal the load before left; then
// small requests (a stat, a few KB each) bring three more with next to
// nothing in flight. The least of those three, not the last: a collection
// counts live what is allocated while it marks, and on a loaded machine
// one marked for 104 ms while the server's own work beside the requests
// (a pool's refill) allocated, and read 6 MB where the others read 4
// (make test beside make test-vm). A leak raises all three.
func (s *soakServer) calm(c *http.Client) (soakGC, error) {
	post := func(path string, body []byte) error {
		resp, err := c.Post("http://hutch"+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("calm: %w", err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("calm: %s %s: %s %v", path, body, resp.Status, err)
		}
		return nil
	}
	read, _ := json.Marshal(map[string]string{"path": s.ballast})
	stat, _ := json.Marshal(map[string]string{"path": filepath.Dir(s.ballast)})
	start := s.lastGC().n
	deadline := time.Now().Add(60 * time.Second)
	var least soakGC
	for i := 0; ; i++ {
		gc := s.lastGC()
		if gc.n > start+1 && (least.n == 0 || gc.liveMB+gc.stacksMB < least.liveMB+least.stacksMB) {
			least = gc
		}
		switch {
		case gc.n >= start+4:
			return least, nil
		case time.Now().After(deadline):
			return gc, fmt.Errorf("calm: %d collections in 60s, not 4 (is GODEBUG=gctrace=1 in the server's log?)", gc.n-start)
		}
		var err error
		if gc.n == start {
			err = post("/v1/files/read", read)
		} else {
			for range 100 {
				if err = post("/v1/files/stat", stat); err != nil {
					break
				}
			}
		}
		if err != nil {
			return gc, err
		}
	}
}

// sample reads the server's fds and RSS every half second until the
// returned function is called, which returns the most of each seen.
func (s *soakServer) sample() func() soakPoint {
	done, out := make(chan struct{}), make(chan soakPoint)
	go func() {
		var most soakPoint
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- most
				return
			case <-tick.C:
				pid := s.pid()
				most.fds, most.rssKiB = max(most.fds, soakFds(pid)), max(most.rssKiB, soakStatus(pid, "VmRSS"))
			}
		}
	}()
	return func() soakPoint { close(done); return <-out }
}

func (s *soakServer) read() soakPoint {
	pid := s.pid()
	p := soakPoint{fds: soakFds(pid), rssKiB: soakStatus(pid, "VmRSS"), threads: soakStatus(pid, "Threads"), spawnFds: -1}
	var strays []string
	for _, k := range soakChildren(pid) {
		if soakCmdline(k) != "hutch-spawn" {
			strays = append(strays, fmt.Sprintf("%d %q (a child of the server)", k, soakCmdline(k)))
			continue
		}
		p.spawnFds, p.spawnRSSKiB = soakFds(k), soakStatus(k, "VmRSS")
		for _, init := range soakChildren(k) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", init)); string(comm) == "hutch-spare\n" {
				p.spares++
			} else {
				p.inits++
			}
			for _, g := range soakChildren(init) {
				strays = append(strays, fmt.Sprintf("%d %q (in pooled init %d)", g, soakCmdline(g), init))
			}
		}
	}
	p.strays = strings.Join(strays, ", ")
	names := map[string]bool{}
	for _, g := range ourGroups(fmt.Sprintf("hutch-%d-", pid)) {
		names[filepath.Base(g)] = true
	}
	p.groups = len(names)
	return p
}

// soakCmdline is pid's command line, its arguments joined by spaces.
func soakCmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// soakFds is how many fds pid has open that can leak (see leakableFds),
// -1 when /proc does not say.
func soakFds(pid int) int {
	n, dups := leakableFds(pid)
	if n < 0 {
		return -1
	}
	return n + dups
}

// soakStatus is a figure of pid's /proc status: VmRSS in KiB, Threads;
// -1 when it does not say.
func soakStatus(pid int, name string) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// soakChildren are pid's children, from its threads' children files.
func soakChildren(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var kids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				kids = append(kids, n)
			}
		}
	}
	slices.Sort(kids)
	return slices.Compact(kids)
}

// soakDescendants are the pids below pid with their start times.
func soakDescendants(pid int) map[int]string {
	out := map[int]string{}
	for _, k := range soakChildren(pid) {
		out[k] = soakStartTime(k)
		for d, st := range soakDescendants(k) {
			out[d] = st
		}
	}
	return out
}

// soakStartTime is pid's start time (field 22 of its stat), "" when it is gone
// or a zombie: with the pid, the identity of a process.
func soakStartTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

func soakRunning(pid int, start string) bool { return start != "" && soakStartTime(pid) == start }

// soakClient is an HTTP client of the socket; onDial, when not nil, is
// called with each connection it makes.
func soakClient(sock string, onDial func(*soakConn)) *http.Client {
	return &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			c := &soakConn{Conn: nc}
			if onDial != nil {
				onDial(c)
			}
			return c, nil
		},
		// One connection, kept alive between requests.
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DisableKeepAlives:   false,
		DisableCompression:  true,
	}}
}

// soakConn is a client's connection that remembers which side ended it.
// The server ended it when a read met the end of the stream (or an error)
// before the client closed it. The client may drop a connection of its
// own accord: Go's Transport does not reuse one whose request it had not
// seen written when the answer was read whole (it waits 50 ms for its
// writer goroutine: on a loaded machine, after an answer as quick as a
// 400's, that can pass), and dials another for the next request.
type soakConn struct {
	net.Conn
	mu     sync.Mutex
	closed bool  // by the client
	ended  error // what a read met before that: io.EOF when the server closed it
}

func (c *soakConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.mu.Lock()
		if !c.closed && c.ended == nil {
			c.ended = err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *soakConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// endedByServer is what ended the connection on the server's side, nil
// while it is open or when the client closed it first.
func (c *soakConn) endedByServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// soakFailures keeps the count of wrong answers and the first few.
type soakFailures struct {
	n     atomic.Int64
	mu    sync.Mutex
	first []string
}

func (f *soakFailures) add(err error) {
	if f.n.Add(1) <= 20 {
		f.mu.Lock()
		f.first = append(f.first, err.Error())
		f.mu.Unlock()
	}
}

// soakWorker is one client connection and what it wrote.
type soakWorker struct {
	id      int
	c       *http.Client
	ws      string
	rng     *rand.Rand
	written map[string][]byte // path -> what the last write put there
	writes  int
	last    string // the path last written
	cur     int    // the request under way
	kind    string // its route
	prev    string // the one before, said

	mu      sync.Mutex
	conns   []*soakConn // every connection its client dialled
	redials []string    // why it dialled again, each time
}

// newSoakWorker makes worker id, whose connections are counted in dials.
func newSoakWorker(id int, sock, ws string, dials *atomic.Int64) *soakWorker {
	w := &soakWorker{id: id, ws: ws, cur: -1,
		rng: rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))), written: map[string][]byte{}}
	w.c = soakClient(sock, func(c *soakConn) {
		dials.Add(1)
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := len(w.conns); n > 0 {
			how := "the client closed it"
			if err := w.conns[n-1].endedByServer(); err != nil {
				how = fmt.Sprintf("the server ended it (%v)", err)
			}
			w.redials = append(w.redials, fmt.Sprintf("connection %d dialled again, for its request %d (the one before: %s): %s", id, w.cur, w.prev, how))
		}
		w.conns = append(w.conns, c)
	})
	return w
}

// serverEnded says each of the worker's connections the server ended.
func (w *soakWorker) serverEnded() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i, c := range w.conns {
		if err := c.endedByServer(); err != nil {
			out = append(out, fmt.Sprintf("worker %d's connection %d of %d: %v", w.id, i+1, len(w.conns), err))
		}
	}
	return out
}

// request j of the worker: in each ten, exec, write, read, stat, exec,
// write, read, stat, exec, stat, the reads and stats of the file last
// written (three files a worker, in turn); one stat of the fifty is a
// malformed request instead. 15 execs, 10 writes, 10 reads, 14 stats and
// one malformed request a worker: 3,000 commands in all.
func (w *soakWorker) request(j int) error {
	w.cur = j
	err := w.request1(j)
	w.prev = fmt.Sprintf("%d, %s", j, w.kind)
	return err
}

func (w *soakWorker) request1(j int) error {
	if j == 10*(w.id%5)+9 {
		return w.malformed(soakMalformed[w.id%len(soakMalformed)])
	}
	switch j % 10 {
	case 0, 4, 8:
		return w.exec(fmt.Sprintf("soak-%d-%d-%016x", w.id, j, w.rng.Uint64()))
	case 1, 5:
		w.writes++
		w.last = filepath.Join(w.ws, "soak", fmt.Sprintf("w%03d-%d", w.id, w.writes%3))
		return w.write(w.last, j)
	case 2, 6:
		return w.read(w.last)
	}
	return w.stat(w.last)
}

// do posts body to path and returns the status and the whole answer.
func (w *soakWorker) do(path string, body []byte) (*http.Response, []byte, error) {
	w.kind = path
	resp, err := w.c.Post("http://hutch"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// exec runs `echo token`: its output must be token and a newline, exactly.
func (w *soakWorker) exec(token string) error {
	body, _ := json.Marshal(map[string]any{"argv": []string{"echo", token}})
	resp, b, err := w.do("/v1/exec", body)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		return fmt.Errorf("exec: %s %s: %q", resp.Status, resp.Header.Get("Content-Type"), soakCut(b))
	}
	var out, errOut []byte
	var result *struct {
		Result     *runtime.Result `json:"result"`
		ExitStatus *int            `json:"exit_status"`
		Error      string          `json:"error"`
	}
	started := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if result != nil {
			return fmt.Errorf("exec: an event after the result: %q", soakCut(b))
		}
		var ev struct {
			Type   string
			Data   string
			Base64 bool
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("exec: event %q: %v", sc.Bytes(), err)
		}
		data := []byte(ev.Data)
		if ev.Base64 {
			if data, err = base64.StdEncoding.DecodeString(ev.Data); err != nil {
				return fmt.Errorf("exec: event %q: %v", sc.Bytes(), err)
			}
		}
		switch ev.Type {
		case "started":
			if started || out != nil || errOut != nil {
				return fmt.Errorf("exec: started again or late: %q", soakCut(b))
			}
			started = true
		case "stdout", "stderr":
			if !started {
				return fmt.Errorf("exec: output before started: %q", soakCut(b))
			}
			if ev.Type == "stdout" {
				out = append(out, data...)
			} else {
				errOut = append(errOut, data...)
			}
		case "result":
			if err := json.Unmarshal(sc.Bytes(), &result); err != nil {
				return fmt.Errorf("exec: result %q: %v", sc.Bytes(), err)
			}
		}
		// Any other type is one the protocol added since: a client
		// ignores it.
	}
	switch {
	case result == nil || !started:
		return fmt.Errorf("exec: no started or no result event: %q", soakCut(b))
	case result.ExitStatus == nil || *result.ExitStatus != 0 || result.Error != "" || result.Result == nil || result.Result.ExitCode != 0:
		return fmt.Errorf("exec: not a clean exit: %q", soakCut(b))
	case string(out) != token+"\n" || len(errOut) != 0:
		return fmt.Errorf("exec: echo %s: stdout %q, stderr %q", token, out, errOut)
	}
	return nil
}

// soakCut is an answer for a message: its start, when it is long.
func soakCut(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// write puts new content in path, text or bytes that are not UTF-8 in
// turn, of a length that varies, and checks the host's file.
func (w *soakWorker) write(path string, j int) error {
	var data []byte
	req := map[string]any{"path": path}
	if j/5%2 == 0 {
		line := fmt.Sprintf("soak %d/%d %016x ünïcødé ✓\n", w.id, j, w.rng.Uint64())
		data = []byte(strings.Repeat(line, 1+w.rng.IntN(64)))
		req["content"] = string(data)
	} else {
		data = make([]byte, 2+w.rng.IntN(2048))
		for i := range data {
			data[i] = byte(w.rng.Uint32())
		}
		data[0], data[1] = 0xff, 0xfe // never UTF-8
		req["content_base64"] = base64.StdEncoding.EncodeToString(data)
	}
	body, _ := json.Marshal(req)
	resp, b, err := w.do("/v1/files/write", body)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var fi struct {
		HostPath string `json:"host_path"`
		Size     int64  `json:"size"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &fi) != nil {
		return fmt.Errorf("write %s: %s: %q", path, resp.Status, b)
	}
	if fi.HostPath != path || fi.Size != int64(len(data)) {
		return fmt.Errorf("write %s: answered %q, for %d bytes", path, b, len(data))
	}
	if host, err := os.ReadFile(path); err != nil || !bytes.Equal(host, data) {
		return fmt.Errorf("write %s: the host's file holds %d bytes (%v), not the %d written", path, len(host), err, len(data))
	}
	w.written[path] = data
	return nil
}

// read reads path back: it must be what the host's file holds, and what
// the last write put there.
func (w *soakWorker) read(path string) error {
	body, _ := json.Marshal(map[string]any{"path": path})
	resp, b, err := w.do("/v1/files/read", body)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	var fc struct {
		Content       *string `json:"content"`
		ContentBase64 []byte  `json:"content_base64"`
		Length        int     `json:"length"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &fc) != nil {
		return fmt.Errorf("read %s: %s: %q", path, resp.Status, b)
	}
	got := fc.ContentBase64
	if fc.Content != nil {
		got = []byte(*fc.Content)
	}
	host, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: the host's file: %v", path, err)
	}
	if !bytes.Equal(got, host) || !bytes.Equal(host, w.written[path]) || fc.Length != len(host) {
		return fmt.Errorf("read %s: %d bytes (length %d), the host's file %d, written %d", path, len(got), fc.Length, len(host), len(w.written[path]))
	}
	return nil
}

// stat checks path's size against what the last write put there and the
// host's file.
func (w *soakWorker) stat(path string) error {
	body, _ := json.Marshal(map[string]any{"path": path})
	resp, b, err := w.do("/v1/files/stat", body)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	var fi struct {
		HostPath string `json:"host_path"`
		Size     int64  `json:"size"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &fi) != nil {
		return fmt.Errorf("stat %s: %s: %q", path, resp.Status, b)
	}
	host, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: the host's file: %v", path, err)
	}
	if fi.HostPath != path || fi.Size != host.Size() || fi.Size != int64(len(w.written[path])) {
		return fmt.Errorf("stat %s: answered %q; the host's file has %d bytes, written %d", path, b, host.Size(), len(w.written[path]))
	}
	return nil
}

// soakMalformed are requests the server must refuse with a 400 naming
// the field at fault, when there is one.
var soakMalformed = []struct{ path, body, field string }{
	{"/v1/exec", `{"argv":["echo","cut"]`, ""},
	{"/v1/exec", `{"argv":["echo","x"],"argx":1}`, "argx"},
	{"/v1/exec", `{"argv":"echo x"}`, "argv"},
	{"/v1/exec", `not json`, ""},
	{"/v1/files/read", `{}`, "path"},
	{"/v1/files/write", `{"path":"/x","content":1}`, "content"},
	{"/v1/exec", `{"argv":["echo"]} {"argv":["echo"]}`, ""},
}

func (w *soakWorker) malformed(m struct{ path, body, field string }) error {
	resp, b, err := w.do(m.path, []byte(m.body))
	if err != nil {
		return fmt.Errorf("malformed %s %s: %w", m.path, m.body, err)
	}
	var e struct {
		Error struct{ Code, Message, Field string }
	}
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != "bad_request" || e.Error.Field != m.field {
		return fmt.Errorf("malformed %s %s: %s %q, want 400 bad_request naming %q", m.path, m.body, resp.Status, b, m.field)
	}
	return nil
}
