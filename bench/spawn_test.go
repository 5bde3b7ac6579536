//go:build linux

// Package bench measures hutch's spawn latency against baselines taken in
// the same run: a bare fork/exec/wait of /bin/true, and bubblewrap with an
// equivalent agent policy when bwrap is installed.
//
//	go test -run '^$' -bench . -benchtime 200x ./bench/
//
// Every variant reports ms/op plus p50/p90/p99 and the ratios x_bare and
// x_bwrap (its p50 over the baseline's p50) as custom metrics.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
	"github.com/hutchbox/hutch/spawn"
)

// baselineRuns is how many spawns each baseline takes for its p50.
const baselineRuns = 200

var (
	baselineOnce sync.Once
	bareP50      time.Duration
	bwrapP50     time.Duration // 0 when bwrap is not installed
	workspace    string
)

func TestMain(m *testing.M) {
	ws, err := os.MkdirTemp("/var/tmp", "hutch-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workspace = ws
	code := m.Run()
	os.RemoveAll(ws)
	os.Exit(code)
}

func runBare() error { return exec.Command("/bin/true").Run() }

// bwrapArgs is the agent policy in bubblewrap's terms.
func bwrapArgs() []string {
	return []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--bind", workspace, workspace, "--unshare-all", "--die-with-parent", "--new-session", "/bin/true"}
}

func baselines(b *testing.B) {
	baselineOnce.Do(func() {
		bareP50 = p50(sample(baselineRuns, runBare))
		if bw, err := exec.LookPath("bwrap"); err == nil {
			bwrapP50 = p50(sample(baselineRuns, func() error { return exec.Command(bw, bwrapArgs()...).Run() }))
		}
	})
	if bareP50 == 0 {
		b.Fatal("no baseline")
	}
}

func sample(n int, f func() error) []time.Duration {
	ds := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := f(); err != nil {
			panic(err)
		}
		ds = append(ds, time.Since(t))
	}
	return ds
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[int(q*float64(len(s)-1))]
}

func p50(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report adds the latency distribution and the ratios to b's metrics.
func report(b *testing.B, ds []time.Duration) {
	b.ReportMetric(ms(quantile(ds, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(ds, 0.9)), "p90-ms")
	b.ReportMetric(ms(quantile(ds, 0.99)), "p99-ms")
	b.ReportMetric(float64(p50(ds))/float64(bareP50), "x_bare")
	if bwrapP50 > 0 {
		b.ReportMetric(float64(p50(ds))/float64(bwrapP50), "x_bwrap")
	}
}

func benchmark(b *testing.B, f func() error) { benchmarkWith(b, f, nil) }

// benchmarkWith times f b.N times; between runs, untimed, it calls settle.
func benchmarkWith(b *testing.B, f func() error, settle func()) {
	baselines(b)
	if err := f(); err != nil { // warm: the spawn server starts on first use
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if settle != nil {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
		t := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	b.StopTimer()
	report(b, ds)
}

func sandbox(b *testing.B, edit func(*runtime.Policy)) *runtime.Sandbox {
	p := runtime.DefaultPolicy(workspace)
	if edit != nil {
		edit(&p)
	}
	sb, err := runtime.New(p)
	if err != nil {
		b.Fatal(err)
	}
	return sb
}

func hutchRun(sb *runtime.Sandbox) func() error {
	return func() error { return sb.Command(context.Background(), "/bin/true").Run() }
}

// BenchmarkSpawn compares a full sandboxed /bin/true with the baselines,
// and with single layers left out so that each layer's cost shows.
func BenchmarkSpawn(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchmark(b, runBare) })
	b.Run("bwrap", func(b *testing.B) {
		bw, err := exec.LookPath("bwrap")
		if err != nil {
			b.Skip("bwrap not installed: no bwrap baseline")
		}
		benchmark(b, func() error { return exec.Command(bw, bwrapArgs()...).Run() })
	})
	b.Run("hutch/default", func(b *testing.B) { benchmark(b, hutchRun(sandbox(b, nil))) })
	b.Run("hutch/prewarm", func(b *testing.B) {
		// The pool's promise is latency for a command that finds an init
		// ready (an agent thinks between commands): the clock stops while
		// the pool refills. Sustained back-to-back throughput is
		// BenchmarkThroughput's subject.
		sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = 1 })
		defer sb.Close()
		run := hutchRun(sb)
		benchmarkWith(b, run, func() {
			for sb.Prewarmed() < 1 {
				time.Sleep(200 * time.Microsecond)
			}
		})
	})
	for _, l := range []runtime.Layer{runtime.LayerSeccomp, runtime.LayerLoopback, runtime.LayerKeyring, runtime.LayerLandlock} {
		b.Run("hutch/without-"+string(l), func(b *testing.B) {
			benchmark(b, hutchRun(sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{l} })))
		})
	}
}

// BenchmarkSeccompLoad reports what loading the filter adds to a spawn:
// the same command with and without the seccomp layer. Compiling is not
// part of it: it happens once, in New (see BenchmarkSeccompCompile).
func BenchmarkSeccompLoad(b *testing.B) {
	alternate(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerSeccomp} }))
}

// BenchmarkLandlockCost reports what the Landlock layer adds to a spawn
// (building the ruleset in the init, walking the directories above denied
// paths, restricting the forking thread): the default policy against one
// that skips it.
func BenchmarkLandlockCost(b *testing.B) {
	alternate(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerLandlock} }))
}

// BenchmarkNetNSCost reports what the network namespace (a fresh one,
// loopback brought up in it) adds to a spawn: the default policy against
// Network "host".
func BenchmarkNetNSCost(b *testing.B) {
	// New warns, rightly, about Network "host"; not into the results.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	alternate(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.Network = runtime.NetworkHost }))
}

// BenchmarkEgressCost reports what Network "allow" adds to a spawn (the
// dialer socket pair, the init's bridge listener, a proxy per command):
// against the default, Network "none".
func BenchmarkEgressCost(b *testing.B) {
	alternate(b, sandbox(b, func(p *runtime.Policy) {
		p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.test"}
	}), sandbox(b, nil))
}

// BenchmarkCgroupCost reports what a cgroup per command adds to a spawn
// (creating it with limits, placing the init, reading usage, removing it
// after the command): the default policy against one without resource
// limits. Where cgroups are unavailable to this user the default degrades
// to rlimits and the figure is that fallback's cost.
func BenchmarkCgroupCost(b *testing.B) {
	alternate(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.Memory, p.Pids = runtime.Unlimited, runtime.Unlimited }))
}

// BenchmarkUnixWallCost reports what the unix-sockets layer costs, against
// the same policy with the layer skipped, alternated: "cold" and "warm"
// (a pooled init, the clock stopped while the pools refill) per spawn, and
// "connect" per connect(2) to a socket in the sandbox's /tmp (a command
// making connects connects, over one making none). Where the kernel's
// Landlock guards socket files (ABI 9) the layer is Landlock's and costs
// nothing of its own; elsewhere each connect is answered by the init.
func BenchmarkUnixWallCost(b *testing.B) {
	skip := func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerUnixSockets} }
	b.Run("cold", func(b *testing.B) { alternate(b, sandbox(b, nil), sandbox(b, skip)) })
	b.Run("warm", func(b *testing.B) {
		prewarm := func(p *runtime.Policy) { p.Prewarm = 1 }
		with, without := sandbox(b, prewarm), sandbox(b, func(p *runtime.Policy) { prewarm(p); skip(p) })
		defer with.Close()
		defer without.Close()
		alternateWith(b, hutchRun(with), hutchRun(without), func() {
			for with.Prewarmed() < 1 || without.Prewarmed() < 1 {
				time.Sleep(200 * time.Microsecond)
			}
		})
	})
	b.Run("connect", func(b *testing.B) {
		const connects = 2000
		script := `import socket, sys
n = int(sys.argv[1])
srv = socket.socket(socket.AF_UNIX)
srv.bind("/tmp/bench.sock")
srv.listen(n + 1)
for _ in range(n):
    c = socket.socket(socket.AF_UNIX)
    c.connect("/tmp/bench.sock")
    c.close()
`
		py, err := exec.LookPath("python3")
		if err != nil {
			b.Skip("python3 not installed")
		}
		with, without := sandbox(b, nil), sandbox(b, skip)
		run := func(sb *runtime.Sandbox, n int) func() error {
			return func() error { return sb.Command(context.Background(), py, "-c", script, strconv.Itoa(n)).Run() }
		}
		var dw, dn []time.Duration
		for _, f := range []func() error{run(with, connects), run(without, connects), run(with, 0), run(without, 0)} {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		var dw0, dn0 []time.Duration
		b.ResetTimer()
		// Each round is four python runs making thousands of connects:
		// a few dozen rounds give a stable median.
		for range min(b.N, 40) {
			dw = append(dw, sample(1, run(with, connects))...)
			dn = append(dn, sample(1, run(without, connects))...)
			dw0 = append(dw0, sample(1, run(with, 0))...)
			dn0 = append(dn0, sample(1, run(without, 0))...)
		}
		b.StopTimer()
		per := func(d, d0 []time.Duration) float64 {
			return float64(p50(d)-p50(d0)) / connects / float64(time.Microsecond)
		}
		b.ReportMetric(per(dw, dw0), "with-us/connect")
		b.ReportMetric(per(dn, dn0), "without-us/connect")
		b.ReportMetric(per(dw, dw0)-per(dn, dn0), "added-us/connect")
	})
}

// alternate runs the same command in two Sandboxes turn by turn, so that
// drift in the machine's load cancels out, and reports both p50s and what
// the first adds over the second.
func alternate(b *testing.B, with, without *runtime.Sandbox) {
	alternateWith(b, hutchRun(with), hutchRun(without), nil)
}

// alternateWith is alternate for any two runs; before each round, untimed,
// it calls settle.
func alternateWith(b *testing.B, w, wo func() error, settle func()) {
	baselines(b)
	_, _ = w(), wo()
	var dw, dn []time.Duration
	b.ResetTimer()
	for range b.N {
		if settle != nil {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
		dw = append(dw, sample(1, w)...)
		if settle != nil {
			b.StopTimer()
			settle()
			b.StartTimer()
		}
		dn = append(dn, sample(1, wo)...)
	}
	b.StopTimer()
	b.ReportMetric(ms(p50(dw)), "with-p50-ms")
	b.ReportMetric(ms(p50(dn)), "without-p50-ms")
	b.ReportMetric(ms(p50(dw)-p50(dn)), "added-ms")
}

// BenchmarkSeccompCompile is the per-Sandbox cost of compiling the default
// profile (never paid per command).
func BenchmarkSeccompCompile(b *testing.B) {
	for range b.N {
		if _, err := seccomp.Compile(seccomp.Default()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThroughput runs b.N commands from P parallel callers and
// reports spawns per second, against bwrap's rate at the same parallelism
// when bwrap is installed.
func BenchmarkThroughput(b *testing.B) {
	sb := sandbox(b, nil)
	bw, bwErr := exec.LookPath("bwrap")
	for _, par := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers-%d", par), func(b *testing.B) {
			_ = hutchRun(sb)()
			rate := func(n int, f func() error) float64 {
				var wg sync.WaitGroup
				work := make(chan struct{}, n)
				for range n {
					work <- struct{}{}
				}
				close(work)
				t := time.Now()
				for range par {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range work {
							if err := f(); err != nil {
								b.Error(err)
							}
						}
					}()
				}
				wg.Wait()
				return float64(n) / time.Since(t).Seconds()
			}
			b.ResetTimer()
			r := rate(b.N, hutchRun(sb))
			b.StopTimer()
			b.ReportMetric(r, "spawns/s")
			if bwErr == nil {
				br := rate(b.N, func() error { return exec.Command(bw, bwrapArgs()...).Run() })
				b.ReportMetric(br, "bwrap-spawns/s")
				b.ReportMetric(r/br, "x_bwrap_rate")
			}
		})
	}
}

// BenchmarkHostHeap spawns from a host process holding a large live heap.
// Sandboxes are cloned by the spawn server, so the host's heap should not
// show in the latency; x_small is the ratio to the small-heap p50 measured
// in the same run.
func BenchmarkHostHeap(b *testing.B) {
	sb := sandbox(b, nil)
	run := hutchRun(sb)
	_ = run()
	small := p50(sample(50, run))
	for _, gib := range []int{1, 4} {
		b.Run(fmt.Sprintf("heap-%dGiB", gib), func(b *testing.B) {
			heap := make([]byte, gib<<30)
			for i := 0; i < len(heap); i += 4096 {
				heap[i] = 1 // touch every page: resident, not just reserved
			}
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t := time.Now()
				if err := run(); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t))
			}
			b.StopTimer()
			b.ReportMetric(ms(p50(ds)), "p50-ms")
			b.ReportMetric(float64(p50(ds))/float64(small), "x_small")
			goruntime.KeepAlive(heap)
		})
	}
}

// BenchmarkPoolMemory reports the resident memory of an idle pooled init
// (the host-side cost of Policy.Prewarm), read from /proc of each init.
func BenchmarkPoolMemory(b *testing.B) {
	const n = 8
	for range b.N {
		sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = n })
		deadline := time.Now().Add(30 * time.Second)
		for sb.Prewarmed() < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		var total, totalPss int64
		inits := 0
		server := spawn.Default().ServerPid()
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || parentOf(pid) != server {
				continue
			}
			if kb := rssKiB(pid); kb > 0 {
				total += kb
				totalPss += pssKiB(pid)
				inits++
			}
		}
		sb.Close()
		if inits == 0 {
			b.Fatal("no pooled inits found")
		}
		b.ReportMetric(float64(total)/float64(inits)/1024, "MiB-rss/init")
		// PSS divides pages shared between inits (the binary's text) among
		// them: what each init really adds.
		b.ReportMetric(float64(totalPss)/float64(inits)/1024, "MiB-pss/init")
		b.ReportMetric(float64(inits), "inits")
	}
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func pssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pss:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkPhases breaks a cold spawn down by the init's phases
// (Result.Phases), p50 each, with a pause between commands as an agent
// has: where the startup time goes.
func BenchmarkPhases(b *testing.B) {
	sb := sandbox(b, nil)
	_ = hutchRun(sb)()
	per := map[string][]time.Duration{}
	var names []string
	for range b.N {
		time.Sleep(10 * time.Millisecond)
		c := sb.Command(context.Background(), "/bin/true")
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		for _, p := range c.Result.Phases {
			if _, ok := per[p.Name]; !ok {
				names = append(names, p.Name)
			}
			per[p.Name] = append(per[p.Name], time.Duration(p.Nanos))
		}
		per["startup"] = append(per["startup"], c.Result.Startup)
	}
	for _, n := range append(names, "startup") {
		b.ReportMetric(ms(p50(per[n])), n+"-ms")
	}
}
