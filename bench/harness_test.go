//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/spawn"
)

// A method is one way of doing what a benchmark measures. run does it once
// and returns how long that took; around the timed part it may do untimed
// work (bring about the state measured, wait for what the run left behind
// to end), whose CPU still counts as the run's.
type method struct {
	name string
	run  func() (time.Duration, error)
	// ownCPU says that nothing the run started is still running when it
	// returns, so the CPU measured around it is its own and is reported.
	ownCPU bool
}

// timed is a method whose run is f, timed as a whole.
func timed(name string, f func() error) method {
	return method{name: name, ownCPU: true, run: func() (time.Duration, error) { return clock(f) }}
}

func clock(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

// harnessCPU is the CPU the harness's own waiting between ops has taken
// (untimed), in nanoseconds: measure takes it out of each op's, so that no
// method is charged the harness's polling.
var harnessCPU atomic.Int64

// untimed runs f, the harness's own waiting after or before an op (for
// what a run left behind to end, for a pool to refill), on an OS thread of
// its own, and adds the CPU that thread spent in it to harnessCPU. The
// processes waited for are charged as ever: only this process's polling
// is left out.
func untimed(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	before := rusage(unix.RUSAGE_THREAD)
	err := f()
	harnessCPU.Add(int64(rusage(unix.RUSAGE_THREAD) - before))
	return err
}

// pause sleeps d on this thread without the Go scheduler: a raw
// nanosleep(2) keeps the goroutine's P, so that no other thread of this
// process wakes, spins or hands work around for it, and what the harness's
// polling costs is this thread's alone (which untimed counts).
func pause(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// An op is one run of a method: its time and the CPU of all processes
// involved.
type op struct {
	wall   time.Duration
	cpu    cpuTimes
	ownCPU bool // method.ownCPU
}

// measure runs every method n times, in rounds: each round runs each method
// once, in an order that changes from round to round (see order), so that
// the machine's load, however it drifts, and whatever one method leaves
// behind fall on all of them alike. A first round, not recorded, warms (the
// spawn server starts on first use). The ops are keyed by method name.
func measure(b *testing.B, n int, methods ...method) map[string][]op {
	ops := make(map[string][]op, len(methods))
	for r := -1; r < n; r++ {
		if r == 0 {
			b.ResetTimer()
		}
		for _, i := range order(max(r, 0), len(methods)) {
			m := methods[i]
			harness := harnessCPU.Load()
			before := cpuNow()
			d, err := m.run()
			if err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
			if r >= 0 {
				cpu := cpuNow().sub(before)
				// The harness's polling, charged to nobody.
				h := time.Duration(harnessCPU.Load() - harness)
				cpu.self, cpu.machine = max(cpu.self-h, 0), max(cpu.machine-h, 0)
				ops[m.name] = append(ops[m.name], op{wall: d, cpu: cpu, ownCPU: m.ownCPU})
			}
		}
	}
	b.StopTimer()
	return ops
}

// order is the order of n methods in round r: rotated by one each round,
// so that each method takes every place in turn, and reversed every other
// n rounds, so that each also follows the others in both directions.
func order(r, n int) []int {
	idx := make([]int, n)
	for k := range idx {
		idx[k] = (r + k) % n
	}
	if r/n%2 == 1 {
		slices.Reverse(idx)
	}
	return idx
}

func walls(ops []op) []time.Duration {
	ds := make([]time.Duration, len(ops))
	for i, o := range ops {
		ds[i] = o.wall
	}
	return ds
}

// cpuPerOp is the mean, not the median: the spawn server's share is
// counted in clock ticks, which only add up right over many ops.
func cpuPerOp(ops []op, share func(cpuTimes) time.Duration) time.Duration {
	var sum time.Duration
	for _, o := range ops {
		sum += share(o.cpu)
	}
	return sum / time.Duration(len(ops))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[int(q*float64(len(s)-1))]
}

func p50(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// The baselines every spawn is compared with: a bare fork/exec/wait of
// /bin/true, and bubblewrap running it with the agent policy.
const (
	bare  = "bare"
	bwrap = "bwrap"
)

// baselines are the baseline methods this machine has (bwrap may be
// missing). bwrap's CPU is only whole with its sandbox's pid 1 reaped here
// (reaping; the benchmark calls asSubreaper).
func baselines() []method {
	ms := []method{timed(bare, func() error { return exec.Command("/bin/true").Run() })}
	if run := bwrapRunner("/bin/true"); run != nil {
		ms = append(ms, reaping(timed(bwrap, run)))
	}
	return ms
}

// asSubreaper makes this process the subreaper of what it starts, for the
// rest of b: bwrap returns once its command has exited, without waiting
// for its sandbox's pid 1, the process that built the sandbox and reaped
// the command. Left to the machine's init, that process's CPU, more than
// half of bwrap's (its whole tree took 22.5 ms a run here, 9.8 ms of it
// counted without that process), would count nowhere; reparented here,
// reapSandboxOrphans reaps it.
func asSubreaper(b *testing.B) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := reapSandboxOrphans(); err != nil {
			b.Error(err)
		}
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	})
}

// followedBy is m with after run once its timed run has succeeded,
// untimed: what the run left behind waited out, so that its CPU is the
// run's and none of it falls on the next op.
func followedBy(m method, after func() error) method {
	run := m.run
	m.run = func() (time.Duration, error) {
		d, err := run()
		if err != nil {
			return d, err
		}
		return d, untimed(after)
	}
	return m
}

// reaping is m followed by the reaping of the sandboxes' pid 1 processes
// it left.
func reaping(m method) method { return followedBy(m, reapSandboxOrphans) }

// reapSandboxOrphans waits for and reaps every child of this process
// that runs in a pid namespace below this one's: a sandbox's pid 1
// reparented here (see asSubreaper). This process starts nothing in
// another pid namespace itself, and hutch's inits are its spawn server's
// children, not this process's.
func reapSandboxOrphans() error {
	return reapChildren(func(pid int) bool { return pidNamespaceDepth(pid) > 1 })
}

// reapChildren waits for and reaps, until none is left, every child of
// this process that orphan says is one, giving up after 10 s.
func reapChildren(orphan func(pid int) bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var orphans []int
		for _, pid := range childrenOf(os.Getpid()) {
			if orphan(pid) {
				orphans = append(orphans, pid)
			}
		}
		if len(orphans) == 0 {
			return nil
		}
		for _, pid := range orphans {
			for {
				got, err := unix.Wait4(pid, nil, unix.WNOHANG, nil)
				if got == pid || err == unix.ECHILD {
					break
				}
				if err != nil && err != unix.EINTR {
					return fmt.Errorf("reap %d: %w", pid, err)
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("child %d has not exited after 10s", pid)
				}
				pause(100 * time.Microsecond)
			}
		}
	}
}

// pidNamespaceDepth is how many pid namespaces pid has a number in, from
// the NSpid line of its status: 1 in this process's own; 0 if unknown.
func pidNamespaceDepth(pid int) int {
	rest, _ := procLine(pid, "status", "NSpid:")
	return len(strings.Fields(rest))
}

// procLine is the rest of the first line of /proc/<pid>/<file> that
// begins with key; false when there is none.
func procLine(pid int, file, key string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			return rest, true
		}
	}
	return "", false
}

// bwrapRunner runs argv under bubblewrap with the agent policy as a whole
// process; nil when bwrap is not installed.
func bwrapRunner(argv ...string) func() error {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil
	}
	args := bwrapArgs(argv...)
	return func() error { return exec.Command(bw, args...).Run() }
}

// bwrapArgs is the agent policy in bubblewrap's terms, running argv.
func bwrapArgs(argv ...string) []string {
	return append([]string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--bind", workspace, workspace, "--unshare-all", "--die-with-parent", "--new-session"}, argv...)
}

// compare measures target in b.N rounds alternated with the baselines
// (and others, measured in the same rounds but not reported) and reports
// its latency, its CPU per op (the share of it counted), and both over the
// baselines' from the same rounds. It returns every method's ops.
func compare(b *testing.B, target method, share func(cpuTimes) time.Duration, others ...method) map[string][]op {
	asSubreaper(b)
	methods := append([]method{target}, others...)
	for _, m := range baselines() {
		if m.name != target.name {
			methods = append(methods, m)
		}
	}
	ops := measure(b, b.N, methods...)
	ds := walls(ops[target.name])
	b.ReportMetric(ms(quantile(ds, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(ds, 0.9)), "p90-ms")
	b.ReportMetric(ms(quantile(ds, 0.99)), "p99-ms")
	if ownCPU(ops[target.name]) {
		b.ReportMetric(ms(cpuPerOp(ops[target.name], share)), "cpu-ms")
	}
	reportRatios(b, ops, target.name, share)
	return ops
}

// reportRatios reports target's p50 over each baseline's p50 (x_bare,
// x_bwrap) and, where both runs' CPU is their own, its CPU per op (share
// of it) over theirs (x_bare_cpu, x_bwrap_cpu). Baselines not measured are
// left out.
func reportRatios(b *testing.B, ops map[string][]op, target string, share func(cpuTimes) time.Duration) {
	for _, base := range []string{bare, bwrap} {
		if ops[base] == nil {
			continue
		}
		b.ReportMetric(float64(p50(walls(ops[target])))/float64(p50(walls(ops[base]))), "x_"+base)
		if ownCPU(ops[target]) && ownCPU(ops[base]) {
			b.ReportMetric(float64(cpuPerOp(ops[target], share))/float64(cpuPerOp(ops[base], share)), "x_"+base+"_cpu")
		}
	}
}

func ownCPU(ops []op) bool { return len(ops) > 0 && ops[0].ownCPU }

// cpuTimes is the CPU time (user+sys) used so far by the processes a
// spawn involves.
type cpuTimes struct {
	self     time.Duration // this process, the host
	children time.Duration // its reaped children: bare and bwrap runs, whole CLI processes
	server   time.Duration // hutch's spawn server and the inits it has reaped
	// machine is the busy time of every CPU of the machine, kernel
	// threads and everything else included (see machineBusy); not in
	// total.
	machine time.Duration
}

func (c cpuTimes) total() time.Duration { return c.self + c.children + c.server }

func (c cpuTimes) ofChildren() time.Duration { return c.children }

func (c cpuTimes) ofMachine() time.Duration { return c.machine }

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{self: c.self - o.self, children: c.children - o.children, server: max(c.server-o.server, 0), machine: c.machine - o.machine}
}

func cpuNow() cpuTimes {
	return cpuTimes{self: rusage(unix.RUSAGE_SELF), children: rusage(unix.RUSAGE_CHILDREN), server: procCPU(spawn.Default().ServerPid()), machine: machineBusy()}
}

// machineBusy is the time the machine's CPUs have spent busy since boot,
// from /proc/stat's cpu line: user (guests included), nice, system, irq
// and softirq; not idle, iowait or steal (the hypervisor's). In clock
// ticks: a sum over many ops is right, a single op's is not.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 per
// second on every architecture Go runs Linux on.
const clockTick = 10 * time.Millisecond

// procCPU is pid's utime+stime+cutime+cstime: its own CPU and that of the
// children it has reaped. 0 for no process.
func procCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// statFields are the fields of /proc/<pid>/stat after the command name,
// from the state on (fields 3 onwards in proc(5)'s numbering).
func statFields(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// childrenOf lists pid's children not yet reaped, from the children file of
// each of its threads.
func childrenOf(pid int) []int {
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
	return kids
}

// initsOf lists the children of hutch's spawn server pid that are inits
// (named hutch-init), not the spare it keeps cloned ahead (hutch-spare).
func initsOf(pid int) []int {
	var inits []int
	for _, c := range childrenOf(pid) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "hutch-init" {
			inits = append(inits, c)
		}
	}
	return inits
}

// waitInitsReaped waits until hutch's spawn server has no init left: the
// init of the command that just ended has been reaped, so its CPU is in
// the server's cutime, and its teardown does not run into the next op.
// Its CPU counts as the op's, so it waits without spinning: it lists the
// inits once, sleeps in poll(2) on a pidfd of each until it exits, then
// asks kill(pid, 0) until the server has reaped it. Polling /proc's
// listings every 100µs instead was 12% of this process's pprof samples
// over 300 cold spawns, all of it charged to hutch.
func waitInitsReaped() error {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range initsOf(spawn.Default().ServerPid()) {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				// Never negative: that would be no timeout at all.
				_, err := unix.Poll(fds, max(0, int(time.Until(deadline).Milliseconds()))+1)
				if err != unix.EINTR {
					break
				}
			}
			unix.Close(fd)
		}
		for unix.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				return errors.New("the spawn server's inits are not reaped after 10s")
			}
			pause(50 * time.Microsecond)
		}
	}
	return nil
}

// BenchmarkHarness is the harness measuring itself: an op that does
// nothing, followed by 5 ms of the harness's polling (as it waits out what
// a sandbox left behind), is charged no CPU. cpu-ms is what measure
// charges the op (its own CPU, all processes'), harness-cpu-ms what the
// polling took, charged to nobody.
func BenchmarkHarness(b *testing.B) {
	poll := func() error {
		for t := time.Now(); time.Since(t) < 5*time.Millisecond; {
			pause(50 * time.Microsecond)
		}
		return nil
	}
	h := harnessCPU.Load()
	ops := measure(b, b.N, followedBy(timed("idle", func() error { return nil }), poll))
	b.ReportMetric(float64(cpuPerOp(ops["idle"], cpuTimes.total))/float64(time.Microsecond), "cpu-us")
	b.ReportMetric(float64(time.Duration(harnessCPU.Load()-h)/time.Duration(b.N+1))/float64(time.Microsecond), "harness-cpu-us")
}
