//go:build linux

// Package bench measures hutch's spawn latency and CPU against baselines
// alternated with it in the same rounds: a bare fork/exec/wait of
// /bin/true, and bubblewrap with an equivalent agent policy when bwrap is
// installed.
//
//	go test -run '^$' -bench . -benchtime 200x ./bench/
//
// Every spawn variant reports p50/p90/p99, its CPU per spawn, and the
// ratios x_bare and x_bwrap (its p50 over the baseline's p50 from the same
// rounds) as custom metrics; README.md says what each row measures.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
	"github.com/hutchbox/hutch/spawn"
)

// scratch holds what the benchmarks make, under /var/tmp (not a tmpfs
// /tmp that the sandboxes would hide): workspace is the sandboxes'
// workspace.
var scratch, workspace string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("/var/tmp", "hutch-bench-")
	if err == nil {
		scratch, workspace = dir, filepath.Join(dir, "workspace")
		err = os.Mkdir(workspace, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(scratch)
	os.Exit(code)
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
	// Closed with the row that made it: a Sandbox left open keeps what it
	// asked the spawn server for (a spare init cloned as each init ends,
	// for whichever Sandbox, or its pool) and weighs on the rows after it.
	b.Cleanup(func() { sb.Close() })
	return sb
}

func hutchRun(sb *runtime.Sandbox) func() error {
	return func() error { return sb.Command(context.Background(), "/bin/true").Run() }
}

// cold is a command in a fresh init of sb. The run ends once the spawn
// server has reaped the init: its CPU is then counted, and its teardown
// does not run into the next op.
func cold(name string, sb *runtime.Sandbox) method {
	return settled(timed(name, hutchRun(sb)))
}

// prewarmed is a command from sb's pool of size inits as a caller issuing
// commands back to back meets it: right after another command, while the
// pool refills from that one, the clock running through whatever the
// refill costs it. With a pool of one that command waits for the refill
// itself; with two it takes the other init while the refill runs beside
// it. The pool is let fill again afterwards, untimed, so that no other
// method's op pays for the refill either.
func prewarmed(name string, sb *runtime.Sandbox, size int) method {
	run := hutchRun(sb)
	return method{name: name, run: func() (time.Duration, error) {
		if err := run(); err != nil { // the command before
			return 0, err
		}
		d, err := clock(run)
		if err != nil {
			return d, err
		}
		return d, untimed(func() error { return waitPool(sb, size) })
	}}
}

// pooled is a command that finds an init of sb's pool ready, as a caller
// that pauses between commands (an agent waiting for its model) meets it:
// the pool refilled, untimed, from the command before. Also for comparing
// two pools alike.
func pooled(name string, sb *runtime.Sandbox) method {
	run := hutchRun(sb)
	return method{name: name, run: func() (time.Duration, error) {
		if err := untimed(func() error { return waitPool(sb, 1) }); err != nil {
			return 0, err
		}
		return clock(run)
	}}
}

// waitPool waits until sb's pool holds n ready inits, and then until it
// holds no more for 20 ms: a pool that a burst has grown refills beyond
// its Prewarm.
func waitPool(sb *runtime.Sandbox, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for sb.Prewarmed() < n {
		if time.Now().After(deadline) {
			return errors.New("the pool is not refilled after 30s")
		}
		pause(200 * time.Microsecond)
	}
	for k, since := sb.Prewarmed(), time.Now(); time.Since(since) < 20*time.Millisecond; pause(200 * time.Microsecond) {
		if m := sb.Prewarmed(); m != k {
			k, since = m, time.Now()
		}
	}
	return nil
}

// BenchmarkSpawn compares a full sandboxed /bin/true with the baselines,
// and with single layers left out so that each layer's cost shows. Each
// row alternates with the baselines round by round; its ratios are to
// theirs from the same rounds.
func BenchmarkSpawn(b *testing.B) {
	for _, m := range baselines() {
		b.Run(m.name, func(b *testing.B) { compare(b, m, cpuTimes.total) })
	}
	b.Run("hutch/default", func(b *testing.B) { compare(b, cold("hutch", sandbox(b, nil)), cpuTimes.total) })
	b.Run("hutch/prewarm", func(b *testing.B) {
		sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = 1 })
		defer sb.Close()
		compare(b, prewarmed("hutch", sb, 1), cpuTimes.total)
	})
	b.Run("hutch/prewarm-ready", func(b *testing.B) {
		sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = 1 })
		defer sb.Close()
		compare(b, pooled("hutch", sb), cpuTimes.total)
	})
	b.Run("hutch/prewarm-2", func(b *testing.B) {
		sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = 2 })
		defer sb.Close()
		compare(b, prewarmed("hutch", sb, 2), cpuTimes.total)
	})
	b.Run("hutch/reads-listed", func(b *testing.B) {
		compare(b, cold("hutch", sandbox(b, func(p *runtime.Policy) { p.Reads = runtime.ReadsListed })), cpuTimes.total)
	})
	b.Run("hutch/image", func(b *testing.B) {
		compare(b, cold("hutch", sandbox(b, onImage(b))), cpuTimes.total)
	})
	for _, l := range []runtime.Layer{runtime.LayerSeccomp, runtime.LayerLoopback, runtime.LayerKeyring, runtime.LayerLandlock} {
		b.Run("hutch/without-"+string(l), func(b *testing.B) {
			compare(b, cold("hutch", sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{l} })), cpuTimes.total)
		})
	}
}

// BenchmarkSeccompLoad reports what loading the filter adds to a spawn:
// the same command with and without the seccomp layer. Compiling is not
// part of it: it happens once, in New (see BenchmarkSeccompCompile).
func BenchmarkSeccompLoad(b *testing.B) {
	layerCost(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerSeccomp} }))
}

// BenchmarkLandlockCost reports what the Landlock layer adds to a spawn
// (building the ruleset in the init, walking the directories above denied
// paths, restricting the forking thread): the default policy against one
// that skips it.
func BenchmarkLandlockCost(b *testing.B) {
	layerCost(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.SkipLayers = []runtime.Layer{runtime.LayerLandlock} }))
}

// BenchmarkListedCost reports what a listed view (Reads listed: an empty
// root, the host's links made and its listed trees bound into it) costs a
// cold spawn over the host's root: listed against host, alternated; a
// negative figure is a saving.
func BenchmarkListedCost(b *testing.B) {
	layerCost(b, sandbox(b, func(p *runtime.Policy) { p.Reads = runtime.ReadsListed }), sandbox(b, nil))
}

// BenchmarkNetNSCost reports what the network namespace (a fresh one,
// loopback brought up in it) adds to a spawn: the default policy against
// Network "host".
func BenchmarkNetNSCost(b *testing.B) {
	// New warns, rightly, about Network "host"; not into the results.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	layerCost(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.Network = runtime.NetworkHost }))
}

// BenchmarkEgressCost reports what Network "allow" adds to a spawn (the
// dialer socket pair, the init's bridge listener, a proxy per command):
// against the default, Network "none".
func BenchmarkEgressCost(b *testing.B) {
	layerCost(b, sandbox(b, func(p *runtime.Policy) {
		p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.test"}
	}), sandbox(b, nil))
}

// BenchmarkCgroupCost reports what a cgroup per command adds to a spawn
// (creating it with limits, placing the init, reading usage, removing it
// after the command): the default policy against one without resource
// limits. Where cgroups are unavailable to this user the default degrades
// to rlimits and the figure is that fallback's cost.
func BenchmarkCgroupCost(b *testing.B) {
	layerCost(b, sandbox(b, nil), sandbox(b, func(p *runtime.Policy) { p.Memory, p.Pids = runtime.Unlimited, runtime.Unlimited }))
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
	b.Run("cold", func(b *testing.B) { layerCost(b, sandbox(b, nil), sandbox(b, skip)) })
	b.Run("warm", func(b *testing.B) {
		prewarm := func(p *runtime.Policy) { p.Prewarm = 1 }
		with, without := sandbox(b, prewarm), sandbox(b, func(p *runtime.Policy) { prewarm(p); skip(p) })
		defer with.Close()
		defer without.Close()
		added(b, pooled("with", with), pooled("without", without))
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
		run := func(name string, sb *runtime.Sandbox, n int) method {
			return timed(name, func() error { return sb.Command(context.Background(), py, "-c", script, strconv.Itoa(n)).Run() })
		}
		// Each round is four python runs making thousands of connects:
		// a few dozen rounds give a stable median.
		ops := measure(b, min(b.N, 40),
			run("with", with, connects), run("without", without, connects), run("with-0", with, 0), run("without-0", without, 0))
		per := func(name string) float64 {
			return float64(p50(walls(ops[name]))-p50(walls(ops[name+"-0"]))) / connects / float64(time.Microsecond)
		}
		b.ReportMetric(per("with"), "with-us/connect")
		b.ReportMetric(per("without"), "without-us/connect")
		b.ReportMetric(per("with")-per("without"), "added-us/connect")
	})
}

// BenchmarkDenialsCost is what recording a command's refusals
// (Policy.Denials, on by default) costs over the same policy with it off,
// alternated: "cold" and "warm" per spawn (the filter then loaded in its
// notifying form with a listener the host serves), and "refused" per
// refused system call (bpf(2)) of a command making 100,000 of them, each
// then a round trip to the host, over one making none; without a listener
// the kernel answers them alone.
func BenchmarkDenialsCost(b *testing.B) {
	off := func(p *runtime.Policy) { p.Denials = runtime.DenialsOff }
	b.Run("cold", func(b *testing.B) { layerCost(b, sandbox(b, nil), sandbox(b, off)) })
	b.Run("warm", func(b *testing.B) {
		prewarm := func(p *runtime.Policy) { p.Prewarm = 1 }
		with, without := sandbox(b, prewarm), sandbox(b, func(p *runtime.Policy) { prewarm(p); off(p) })
		defer with.Close()
		defer without.Close()
		added(b, pooled("with", with), pooled("without", without))
	})
	b.Run("refused", func(b *testing.B) {
		const calls = 100000
		script := `import ctypes, sys
l = ctypes.CDLL(None)
for _ in range(int(sys.argv[1])):
    l.syscall(321, 0, 0, 0)
`
		py, err := exec.LookPath("python3")
		if err != nil {
			b.Skip("python3 not installed")
		}
		with, without := sandbox(b, nil), sandbox(b, off)
		run := func(name string, sb *runtime.Sandbox, n int) method {
			return timed(name, func() error { return sb.Command(context.Background(), py, "-c", script, strconv.Itoa(n)).Run() })
		}
		ops := measure(b, min(b.N, 20),
			run("with", with, calls), run("without", without, calls), run("with-0", with, 0), run("without-0", without, 0))
		per := func(name string) float64 {
			return float64(p50(walls(ops[name]))-p50(walls(ops[name+"-0"]))) / calls / float64(time.Microsecond)
		}
		b.ReportMetric(ms(p50(walls(ops["with"]))), "with-p50-ms")
		b.ReportMetric(ms(p50(walls(ops["without"]))), "without-p50-ms")
		b.ReportMetric(per("with"), "with-us/call")
		b.ReportMetric(per("without"), "without-us/call")
		b.ReportMetric(per("with")-per("without"), "added-us/call")
	})
}

// layerCost is added for a cold command in two Sandboxes.
func layerCost(b *testing.B, with, without *runtime.Sandbox) {
	added(b, cold("with", with), cold("without", without))
}

// added alternates two methods round by round and reports both p50s and
// what the first adds over the second.
func added(b *testing.B, with, without method) {
	ops := measure(b, b.N, with, without)
	dw, dn := p50(walls(ops[with.name])), p50(walls(ops[without.name]))
	b.ReportMetric(ms(dw), "with-p50-ms")
	b.ReportMetric(ms(dn), "without-p50-ms")
	b.ReportMetric(ms(dw-dn), "added-ms")
}

// BenchmarkSeccompCompile is what compiling the default profile with
// libseccomp costs: what a Sandbox whose policy brings its own profile, or
// allows or denies calls, pays once (never per command). The default
// policy's program is precompiled (runtime's BenchmarkCompileFilter).
func BenchmarkSeccompCompile(b *testing.B) {
	for range b.N {
		if _, err := seccomp.Compile(seccomp.Default()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThroughput reports spawns per second from P parallel callers,
// hutch (cold) against bwrap when installed: batches of each alternate
// round by round, and x_bwrap_rate is the ratio of the two rates.
func BenchmarkThroughput(b *testing.B) {
	sb := sandbox(b, nil)
	bwrapRun := bwrapRunner("/bin/true")
	for _, par := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers-%d", par), func(b *testing.B) {
			asSubreaper(b)
			batch := max(16, 2*par)
			// Each batch's tail (the inits' ends, the bwrap sandboxes'
			// pid 1) is waited out, untimed, before the next batch.
			methods := []method{settled(timed("hutch", parallel(par, batch, hutchRun(sb))))}
			if bwrapRun != nil {
				methods = append(methods, reaping(timed(bwrap, parallel(par, batch, bwrapRun))))
			}
			ops := measure(b, max(1, b.N/batch), methods...)
			rate := func(name string) float64 {
				var sum time.Duration
				for _, d := range walls(ops[name]) {
					sum += d
				}
				return float64(batch*len(ops[name])) / sum.Seconds()
			}
			b.ReportMetric(rate("hutch"), "spawns/s")
			if ops[bwrap] != nil {
				b.ReportMetric(rate(bwrap), "bwrap-spawns/s")
				b.ReportMetric(rate("hutch")/rate(bwrap), "x_bwrap_rate")
			}
		})
	}
}

// BenchmarkMachineCPU is the CPU per cold spawn as the whole machine
// spends it, hutch against bwrap: the busy time of all CPUs
// (machineBusy) over batches of cold hutch spawns and of bwrap runs,
// alternated round by round, each batch's tail waited out (hutch's inits
// reaped, bwrap's sandboxes' pid 1 reaped) and then machineSettle more,
// for the kernel threads' share of the teardown (a cgroup's, a network
// namespace's), before the batch's count is read. Spawn's cpu-ms counts
// the processes involved; this counts everything, what else the machine
// runs meanwhile included, which falls on both alike. x_bwrap_cpu is
// hutch's figure over bwrap's.
func BenchmarkMachineCPU(b *testing.B) {
	bwrapRun := bwrapRunner("/bin/true")
	if bwrapRun == nil {
		b.Skip("bwrap is not installed")
	}
	asSubreaper(b)
	sb := sandbox(b, nil)
	defer sb.Close()
	const batch = 20
	inBatches := func(m method) method {
		one := m.run
		m.run = func() (time.Duration, error) {
			var sum time.Duration
			for range batch {
				d, err := one()
				if err != nil {
					return sum, err
				}
				sum += d
			}
			time.Sleep(machineSettle)
			return sum, nil
		}
		return m
	}
	methods := []method{inBatches(cold("hutch", sb)), inBatches(reaping(timed(bwrap, bwrapRun)))}
	ops := measure(b, max(1, b.N/batch), methods...)
	perSpawn := func(name string) time.Duration { return cpuPerOp(ops[name], cpuTimes.ofMachine) / batch }
	b.ReportMetric(ms(perSpawn("hutch")), "cpu-ms")
	b.ReportMetric(ms(perSpawn(bwrap)), "bwrap-cpu-ms")
	b.ReportMetric(float64(perSpawn("hutch"))/float64(perSpawn(bwrap)), "x_bwrap_cpu")
}

// machineSettle is how long the machine is left after a batch of
// BenchmarkMachineCPU before its busy time is read.
const machineSettle = 50 * time.Millisecond

// settled is m followed by the spawn server's inits waited for until
// reaped.
func settled(m method) method { return followedBy(m, waitInitsReaped) }

// parallel runs f n times from par callers at once.
func parallel(par, n int, f func() error) func() error {
	return func() error {
		work := make(chan struct{}, n)
		for range n {
			work <- struct{}{}
		}
		close(work)
		errs := make(chan error, par)
		for range par {
			go func() {
				var err error
				for range work {
					err = cmp.Or(err, f())
				}
				errs <- err
			}()
		}
		var err error
		for range par {
			err = cmp.Or(err, <-errs)
		}
		return err
	}
}

// BenchmarkHostHeap spawns from a host process holding a large live heap.
// Sandboxes are cloned by the spawn server, so the host's heap should not
// show in the latency; x_small is the ratio to the small-heap p50 measured
// in the same run (before the heap is made: the two cannot alternate).
func BenchmarkHostHeap(b *testing.B) {
	m := cold("hutch", sandbox(b, nil))
	small := p50(walls(measure(b, 50, m)[m.name]))
	for _, gib := range []int{1, 4} {
		b.Run(fmt.Sprintf("heap-%dGiB", gib), func(b *testing.B) {
			heap := make([]byte, gib<<30)
			for i := 0; i < len(heap); i += 4096 {
				heap[i] = 1 // touch every page: resident, not just reserved
			}
			ds := walls(measure(b, b.N, m)[m.name])
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
		for _, pid := range initsOf(spawn.Default().ServerPid()) {
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

func pssKiB(pid int) int64 { return procKiB(pid, "smaps_rollup", "Pss:") }

func rssKiB(pid int) int64 { return procKiB(pid, "status", "VmRSS:") }

// procKiB is the size in kB on key's line of /proc/<pid>/<file>; 0 if none.
func procKiB(pid int, file, key string) int64 {
	v, _ := procLine(pid, file, key)
	n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
	return n
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
