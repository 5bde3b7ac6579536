// Command vm runs hutch's integration suite inside QEMU guests, one per
// kernel of a matrix, as root and as an unprivileged uid, and reads the
// verdicts back over the serial console.
//
//	go run ./integration/vm [-kernels 5.10,7.x] [-run REGEXP] [-users root,nobody]
//	make test-vm
//
// It builds the integration test binary and the hutch CLI statically (cgo
// against libseccomp.a), packs them with busybox and the tools the tests
// drive (python3 and its standard library, git, make, nohup, pkill, copied
// from the host with their shared libraries) into an initramfs, fetches
// each kernel from Debian's mirror through apt with the sources lists in
// integration/vm/sources (resolving meta packages, so ABI names are never
// written down; cached by version), boots it, and parses the console. The
// guest mounts a pure cgroup v2 hierarchy so the v2 code paths run for real.
//
// The last line is "N passed, N failed, N skipped" across kernels and
// users; the exit status is non-zero when any test failed, panicked or
// timed out, or a guest never printed its end marker. A kernel that cannot
// be fetched is skipped, loudly; if none can be, the run fails.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed init.sh
var initScript []byte

// defaultTests are the tests run in each guest: those whose verdict
// depends on the kernel (mounts and their fallbacks, seccomp, cgroup v2
// limits and accounting, namespaces, ptys, keyrings). Emulation runs guest
// code 15-50x slower than native, so the tests that only repeat what the
// host run already proves, at great length, stay on the host (see
// README.md in this directory).
var defaultTests = []string{
	// filesystem layer: open_tree/move_mount/mount_setattr (or the
	// pre-5.12 remount fallback), masks, pins
	"TestWritesOutsideWorkspaceFail",
	"TestWorkspaceWritable",
	"TestGitPlantingRoutes",
	"TestGitWorksInSandbox",
	"TestGitRepositoriesReported",
	"TestHostTmpInvisible",
	"TestBinaryNotWritable",
	"TestMountTargetSymlinkSwap",
	"TestMaskTargetSymlinkSwap",
	"TestRunSocketsHidden",
	"TestHostSocketBoundLater",
	"TestHostSocketRelativeBind",
	"TestHostSocketRenamed",
	"TestHostSocketRebound",
	"TestHostSocketOtherNetns",
	"TestHostDatagramSocket",
	"TestSocketsInsideWritableWork",
	"TestForgedSocketNameChangesNothing",
	"TestSymlinkedSocketPathChangesNothing",
	"TestPoolSurvivesSocketChurn",
	"TestDenyFollowsRenameAndCreation",
	"TestSecretNamesUnreadable",
	"TestNoSetuidFiles",
	// cgroup v2 limits and accounting, and the rlimit fallback
	"TestForkBombBounded",
	"TestMemoryLimit",
	"TestSharedMemoryBoundOrReported",
	"TestCPULimit",
	"TestCLILeavesNoCgroup",
	"TestUnenforcedLimitsReported",
	"TestTmpCap",
	"TestNoCgroupsLeft",
	"TestStaleCgroupSwept",
	"TestStaleCgroupOfEndedPidNSSwept",
	"TestCgroupsRequired",
	// processes, namespaces, the spawn server
	"TestHostProcessesInvisibleAndUnkillable",
	"TestNoLeakedFds",
	"TestDaemonsGoneAfterRun",
	"TestTimeoutKillsGrandchildren",
	"TestHostDeathKillsSandbox",
	"TestNetworkIsolated",
	"TestLoopbackWorksInside",
	"TestPrivilegeInside",
	"TestSpawnServerRestarts",
	"TestSessionKeyringIsolated",
	"TestBadInputStartsNothing",
	// Landlock by ABI: enforced (6.1+), or degraded and reported (5.10)
	"TestLandlockEnforced",
	"TestLandlockDegraded",
	// the fallback ladder: each rung forced, or refused where the kernel
	// cannot give it (no Landlock on 5.10)
	"TestLevelRefusedBelowMinimum",
	"TestLevelNamespacesNoProc",
	"TestLevelLandlock",
	// hutch doctor against each kernel's /proc and /sys
	"TestDoctorJSON",
	// seccomp on this kernel's syscall table
	"TestRefusedSyscalls",
	"TestDeveloperWorkload",
	"TestNoPrivilegeAgainstHost",
	"TestProfileRoundTripCLI",
	"TestTIOCSTIInjectsNothing",
	// what the command was refused: the profile's notifying form, the
	// wall and the ptrace watch chained in one filter with one listener,
	// the host's answers (SECCOMP_USER_NOTIF_FLAG_CONTINUE, openat2)
	"TestDenialsKernel",
	"TestDenialsCounted",
	// the mount plan's newer elements and the file door's verdicts on
	// them: read-only carve-outs, app directories (binds inside a sealed
	// empty tmpfs, through the pre-5.12 remount fallback on 5.10)
	"TestReadOnlyCarveOut",
	"TestAppIsolation",
	"TestFileDoorRefusals",
	"TestOpenForSend",
	// a file of the plan's own (the sandbox's /etc/hosts) bound from the
	// init's scratch tmpfs
	"TestOwnHostnameResolves",
	// the file door's server, an init of each kernel, with the view as
	// of now (inotify on the writable trees), without /proc too, and
	// the command's credentials
	"TestFileDoorFresh",
	"TestFileDoorNoProc",
	"TestFileDoorCredentials",
	"TestRepositoriesByIdentity",
	// the guards each kernel keeps its own way: the user namespace's
	// per-user counts, abstract sockets (Landlock's scope, or the
	// seccomp wall)
	"TestInotifyShareCapped",
	"TestAbstractSocketsHostNet",
	// durable processes: pidfds, adoption after the host's death, the
	// sandbox's cgroup gone with the stop, stale records never signalled,
	// the policy kept across restarts, the CLI as root and as nobody
	"TestDurableOutlivesHost",
	"TestDurableStaleNeverSignalled",
	"TestDurableKeepsPolicyAcrossRestarts",
	"TestDurableCLI",
	"TestDurableUnreadableRecord",
	"TestDurableStaleButAliveStopped",
}

type options struct {
	kernels      string
	run          string
	users        string
	cache        string
	logs         string
	parallel     int
	smp          int
	memMB        int
	testTimeout  time.Duration
	guestTimeout time.Duration
	guestEnv     string
	python       string
	verbose      bool
}

func main() {
	var o options
	flag.StringVar(&o.kernels, "kernels", "", "comma-separated kernel names to run (default: all of "+specNames()+")")
	flag.StringVar(&o.run, "run", "", "regexp selecting the integration tests to run in the guests (default: the kernel-dependent set in main.go)")
	flag.StringVar(&o.users, "users", "root:0,nobody:65534", "comma-separated name:uid pairs the suite runs as, in order")
	flag.StringVar(&o.cache, "cache", defaultCache(), "cache directory for apt state and kernels (env HUTCH_VM_CACHE)")
	flag.StringVar(&o.logs, "logs", "", "directory for the guests' console logs (default: bin/vm-logs in the module)")
	flag.IntVar(&o.parallel, "parallel", 0, "guests booted at once (default: host CPUs / -smp)")
	flag.IntVar(&o.smp, "smp", 1, "vCPUs per guest")
	flag.IntVar(&o.memMB, "mem", 2048, "guest memory, MiB")
	flag.DurationVar(&o.testTimeout, "test-timeout", 5*time.Minute, "timeout for each test in a guest (guest clock)")
	flag.DurationVar(&o.guestTimeout, "guest-timeout", 20*time.Minute, "wall-clock timeout for one guest, boot to poweroff")
	flag.StringVar(&o.guestEnv, "guest-env", "", "space-separated K=V pairs added to the test binary's environment in the guests")
	flag.StringVar(&o.python, "python", "", "python3 to copy into the guests (default: /usr/bin/python3)")
	flag.BoolVar(&o.verbose, "v", false, "echo the guests' consoles")
	flag.Parse()
	start := time.Now()
	pass, fail, skip, code := run(o)
	fmt.Printf("test-vm took %v\n", time.Since(start).Round(time.Second))
	if code != 2 {
		// The closing line, alone and last.
		fmt.Printf("%d passed, %d failed, %d skipped\n", pass, fail, skip)
	}
	os.Exit(code)
}

func specNames() string {
	var n []string
	for _, s := range matrix {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func defaultCache() string {
	if c := os.Getenv("HUTCH_VM_CACHE"); c != "" {
		return c
	}
	if os.Geteuid() == 0 {
		return "/var/cache/hutch-vm"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "hutch-vm")
	}
	return filepath.Join(os.TempDir(), "hutch-vm-cache")
}

func logf(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

type userSpec struct{ name, uid string }

// run returns the counts of the closing line and the exit status (2: a
// usage or setup error, no closing line).
func run(o options) (pass, fail, skip, code int) {
	root, err := moduleRoot()
	if err != nil {
		logf("test-vm: %v", err)
		return 0, 0, 0, 2
	}
	if o.logs == "" {
		o.logs = filepath.Join(root, "bin", "vm-logs")
	}
	var users []userSpec
	for _, u := range strings.Split(o.users, ",") {
		name, uid, ok := strings.Cut(u, ":")
		if !ok {
			logf("test-vm: -users: %q is not name:uid", u)
			return 0, 0, 0, 2
		}
		users = append(users, userSpec{name, uid})
	}
	specs, err := selectSpecs(o.kernels)
	if err != nil {
		logf("test-vm: %v", err)
		return 0, 0, 0, 2
	}
	for _, tool := range []string{"qemu-system-x86_64", "apt-get", "apt-cache", "dpkg-deb", "busybox", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			logf("test-vm: %s not found: on Debian, apt-get install -y qemu-system-x86 busybox-static gcc libseccomp-dev", tool)
			return 0, 0, 0, 2
		}
	}
	if err := os.MkdirAll(o.cache, 0o755); err != nil {
		logf("test-vm: %v", err)
		return 0, 0, 0, 2
	}
	if err := os.MkdirAll(o.logs, 0o755); err != nil {
		logf("test-vm: %v", err)
		return 0, 0, 0, 2
	}
	work, err := os.MkdirTemp("", "hutch-vm-")
	if err != nil {
		logf("test-vm: %v", err)
		return 0, 0, 0, 2
	}
	defer os.RemoveAll(work)

	// 1. Static binaries.
	logf("== building static binaries")
	bins, err := buildBinaries(root, work)
	if err != nil {
		logf("test-vm: build: %v", err)
		return 0, 1, 0, 1
	}
	tests, err := selectTests(bins.test, o.run)
	if err != nil {
		logf("test-vm: %v", err)
		return 0, 1, 0, 1
	}
	logf("   %d tests per user: %s", len(tests), strings.Join(tests, " "))

	// 2. Kernels.
	logf("== fetching kernels (apt, sources in integration/vm/sources, cache %s)", o.cache)
	fe := &fetcher{sources: filepath.Join(root, "integration", "vm", "sources"), cache: o.cache, updated: map[string]error{}, log: logf}
	var kernels []*kernel
	var skipped []string
	for _, s := range specs {
		t0 := time.Now()
		k, err := fe.fetch(s)
		if err != nil {
			msg := fmt.Sprintf("SKIPPED kernel %s: cannot be fetched: %v", s.Name, err)
			logf("   !!! %s", msg)
			skipped = append(skipped, msg)
			continue
		}
		note := ""
		if k.Cached != "" {
			note = " (!!! from the cache of an earlier run: the mirror did not resolve it: " + k.Cached + ")"
		}
		logf("   %-5s %s %s -> %s (%s)%s [%v]", s.Name, k.Package, k.Version, k.Release, k.Image, note, time.Since(t0).Round(100*time.Millisecond))
		if k.Config != "" {
			if missing := checkConfig(k.Config); len(missing) > 0 {
				logf("   !!! %s: options the guest needs built in are not: %s", s.Name, strings.Join(missing, " "))
			}
		}
		kernels = append(kernels, k)
	}
	if len(kernels) == 0 {
		logf("test-vm: no kernel could be fetched; nothing ran")
		return 0, 1, 0, 1
	}

	// 3. The initramfs, the same for every kernel.
	logf("== packing the initramfs")
	initrd := filepath.Join(work, "initrd.cpio")
	size, err := buildInitramfs(initrd, bins, o, users, tests)
	if err != nil {
		logf("test-vm: initramfs: %v", err)
		return 0, 1, 0, 1
	}
	logf("   %s: %.1f MiB of files", initrd, float64(size)/(1<<20))

	// 4. Boot.
	machine, cpu, why := accel()
	bc := bootConfig{machine: machine, cpu: cpu, smp: o.smp, memMB: o.memMB, timeout: o.guestTimeout}
	par := o.parallel
	if par <= 0 {
		par = max(1, runtime.NumCPU()/o.smp)
	}
	logf("== booting %d guests (%s -cpu %s, %d vCPU, %d MiB; %s; %d at a time; logs in %s)", len(kernels), machine, cpu, o.smp, o.memMB, why, par, o.logs)
	var names []string
	for _, u := range users {
		names = append(names, u.name)
	}
	results := make([]*guestResult, len(kernels))
	elapsed := make([]time.Duration, len(kernels))
	logPaths := make([]string, len(kernels))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, k := range kernels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			logPaths[i] = filepath.Join(o.logs, "console-"+k.Spec.Name+".log")
			t0 := time.Now()
			console, problems, err := boot(context.Background(), bc, k.Vmlinuz, initrd, logPaths[i], func(line string) {
				mu.Lock()
				defer mu.Unlock()
				if o.verbose {
					fmt.Printf("[%s] %s\n", k.Spec.Name, line)
				} else if m := markerRE.FindStringSubmatch(line); m != nil && (m[1] == "END" || m[1] == "BOOTED" || m[1] == "DONE") {
					fmt.Printf("   [%s %5.0fs] %s%s\n", k.Spec.Name, time.Since(t0).Seconds(), m[1], m[2])
				}
			})
			elapsed[i] = time.Since(t0)
			g := parseConsole(console, names, tests)
			if err != nil {
				g.Problems = append(g.Problems, "boot: "+err.Error())
			}
			g.Problems = append(g.Problems, problems...)
			results[i] = g
		}()
	}
	wg.Wait()

	// 5. Report.
	return report(kernels, results, elapsed, logPaths, skipped, names)
}

func selectSpecs(list string) ([]kernelSpec, error) {
	if list == "" {
		return matrix, nil
	}
	var out []kernelSpec
	for _, n := range strings.Split(list, ",") {
		found := false
		for _, s := range matrix {
			if s.Name == n {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-kernels: unknown kernel %q (have %s)", n, specNames())
		}
	}
	return out, nil
}

// selectTests lists the test binary's tests and keeps the default set, or
// those matching run.
func selectTests(testBin, run string) ([]string, error) {
	out, err := exec.Command(testBin, "-test.list", ".").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %v", testBin, err)
	}
	all := strings.Fields(string(out))
	var sel []string
	if run == "" {
		have := map[string]bool{}
		for _, t := range all {
			have[t] = true
		}
		for _, t := range defaultTests {
			if !have[t] {
				return nil, fmt.Errorf("default test %s is not in the integration suite any more: update integration/vm/main.go", t)
			}
			sel = append(sel, t)
		}
		return sel, nil
	}
	re, err := regexp.Compile(run)
	if err != nil {
		return nil, fmt.Errorf("-run: %v", err)
	}
	for _, t := range all {
		if re.MatchString(t) {
			sel = append(sel, t)
		}
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("-run %q matches no test", run)
	}
	return sel, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the hutch module")
	}
	b, err := os.ReadFile(gomod)
	if err != nil || !bytes.Contains(b, []byte("module github.com/hutchbox/hutch\n")) {
		return "", fmt.Errorf("%s is not hutch's go.mod", gomod)
	}
	return filepath.Dir(gomod), nil
}

type binaries struct{ test, hutch, guest string }

// buildBinaries builds the integration test binary and the CLI statically
// (cgo with libseccomp.a), and the guest helper (pure Go).
func buildBinaries(root, work string) (binaries, error) {
	b := binaries{
		test:  filepath.Join(work, "integration.test"),
		hutch: filepath.Join(work, "hutch"),
		guest: filepath.Join(work, "hutch-vm-guest"),
	}
	static := []string{"-tags", "osusergo,netgo", "-ldflags", "-s -w -linkmode external -extldflags -static"}
	steps := []struct {
		args []string
		cgo  string
	}{
		{append(append([]string{"test", "-c"}, static...), "-o", b.test, "./integration"), "1"},
		{append(append([]string{"build"}, static...), "-o", b.hutch, "./cmd/hutch"), "1"},
		{[]string{"build", "-ldflags", "-s -w", "-o", b.guest, "./integration/vm/guest"}, "0"},
	}
	for _, s := range steps {
		cmd := exec.Command("go", s.args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+s.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go %s: %v\n%s", strings.Join(s.args, " "), err, out)
		}
	}
	for _, p := range []string{b.test, b.hutch, b.guest} {
		libs, err := lddLibs(p)
		if err != nil {
			return b, err
		}
		if len(libs) > 0 {
			return b, fmt.Errorf("%s is not static: %v", p, libs)
		}
	}
	return b, nil
}

// buildInitramfs packs the guest.
func buildInitramfs(out string, bins binaries, o options, users []userSpec, tests []string) (int64, error) {
	t := newTree()
	t.file("/init", 0o755, initScript)
	var us []string
	for _, u := range users {
		us = append(us, u.name+":"+u.uid)
	}
	conf := fmt.Sprintf("TESTS=%q\nUSERS=%q\nTEST_TIMEOUT=%d\nHUTCH_VM_ENV=%q\n",
		strings.Join(tests, " "), strings.Join(us, " "), int(o.testTimeout.Seconds()), o.guestEnv)
	t.file("/etc/hutch-vm.conf", 0o644, []byte(conf))
	// As every host has one: the sandboxes' view shows it with their
	// hostname added, a file of the plan's own (TestOwnHostnameResolves).
	t.file("/etc/hosts", 0o644, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"))
	t.hostFile("/usr/local/bin/integration.test", 0o755, bins.test)
	t.hostFile("/usr/local/bin/hutch", 0o755, bins.hutch)
	t.hostFile("/usr/local/bin/hutch-vm-guest", 0o755, bins.guest)

	// Tools the tests run inside the sandboxes (whose root is the guest's
	// root): python3 above all; git and make for the developer workload;
	// nohup and pkill, which busybox lacks.
	py := o.python
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := addPython(t, py); err != nil {
		return 0, fmt.Errorf("python3 (the suite needs it in the guest; -python to choose one): %w", err)
	}
	for _, tool := range []string{"git", "make", "nohup", "pkill"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			logf("   !!! %s not on the host: the tests that use it will see busybox's or none", tool)
			continue
		}
		if err := t.addWithLibs(p); err != nil {
			return 0, err
		}
	}
	if fi, err := os.Stat("/usr/share/git-core/templates"); err == nil && fi.IsDir() {
		if err := t.addHostTree("/usr/share/git-core/templates", func(string) bool { return false }); err != nil {
			return 0, err
		}
	}

	// busybox (static) and its applets, where no real tool was copied.
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return 0, err
	}
	if libs, err := lddLibs(bb); err != nil || len(libs) > 0 {
		return 0, fmt.Errorf("%s is not static (apt-get install busybox-static)", bb)
	}
	t.hostFile("/usr/bin/busybox", 0o755, bb)
	list, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		return 0, fmt.Errorf("busybox --list-full: %v", err)
	}
	for _, a := range strings.Fields(string(list)) {
		gp := guestPath("/" + a)
		if _, ok := t.entries[gp]; !ok {
			t.symlink(gp, "/usr/bin/busybox")
		}
	}

	f, err := os.Create(out)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := t.writeCpio(f); err != nil {
		return 0, err
	}
	return t.size(), f.Close()
}

// addPython copies a python3 with its shared libraries and the standard
// library, less its tests, IDE, Tk and build files.
func addPython(t *tree, py string) error {
	if libs, err := lddLibs(py); err != nil {
		return err
	} else if len(libs) == 0 {
		return fmt.Errorf("%s is not an ELF executable", py)
	}
	if err := t.addWithLibs(py); err != nil {
		return err
	}
	out, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		return fmt.Errorf("%s: %v", py, err)
	}
	stdlib := strings.TrimSpace(string(out))
	skipDirs := map[string]bool{"test": true, "idlelib": true, "tkinter": true, "turtledemo": true, "lib2to3": true,
		"ensurepip": true, "pydoc_data": true, "site-packages": true, "dist-packages": true, "venv": true}
	var exts []string
	err = t.addHostTree(stdlib, func(rel string) bool {
		first, _, _ := strings.Cut(rel, "/")
		if skipDirs[first] || strings.HasPrefix(first, "config-") {
			return true
		}
		base := filepath.Base(rel)
		if strings.HasPrefix(first, "lib-dynload") {
			if strings.HasPrefix(base, "_test") || strings.HasPrefix(base, "_ctypes_test") || strings.HasPrefix(base, "xx") {
				return true
			}
			if strings.HasSuffix(base, ".so") {
				exts = append(exts, filepath.Join(stdlib, rel))
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	sort.Strings(exts)
	for _, e := range exts {
		if err := t.addWithLibs(e); err != nil {
			logf("   !!! python extension %s: %v (left out)", filepath.Base(e), err)
		}
	}
	return nil
}

// report prints the per-kernel layers and results, the failures, and the
// closing line, and returns the exit status.
func report(kernels []*kernel, results []*guestResult, elapsed []time.Duration, logs, skipped, users []string) (int, int, int, int) {
	totalPass, totalFail, totalSkip := 0, 0, 0
	fmt.Println()
	fmt.Println("== results")
	for i, k := range kernels {
		g := results[i]
		l := g.Layers
		get := func(key string) string {
			if v, ok := l[key]; ok {
				return v
			}
			return "?"
		}
		fmt.Printf("-- kernel %s: %s %s (uname -r %s), %v, log %s\n", k.Spec.Name, k.Package, k.Version, get("kernel"), elapsed[i].Round(time.Second), logs[i])
		fmt.Printf("   layers: Landlock ABI %s; unix sockets by %s; cgroup %s (controllers %s); LSMs %s\n", get("landlock"), get("unixwall"), get("cgroup"), get("controllers"), get("lsm"))
		if m := l["missing"]; m != "" {
			fmt.Printf("   kernel lacks: %s\n", strings.ReplaceAll(m, ",", ", "))
		}
		for _, u := range users {
			p, f, s := 0, 0, 0
			var secs int
			for _, r := range g.Results {
				if r.User != u {
					continue
				}
				secs += r.Secs
				switch r.Status {
				case statusPass:
					p++
				case statusSkip:
					s++
				default:
					f++
				}
			}
			fmt.Printf("   as %-7s %3d passed, %3d failed, %3d skipped (%ds in tests)\n", u+":", p, f, s, secs)
		}
		for _, r := range g.Results {
			switch r.Status {
			case statusFail:
				fmt.Printf("   FAIL %s as %s (%ds):\n", r.Test, r.User, r.Secs)
				for _, w := range r.Why {
					fmt.Printf("        | %s\n", w)
				}
			case statusSkip:
				why := ""
				if len(r.Why) > 0 {
					why = ": " + strings.TrimSpace(r.Why[0][strings.Index(r.Why[0], ": ")+2:])
				}
				fmt.Printf("   skip %s as %s%s\n", r.Test, r.User, why)
			}
		}
		for _, p := range g.Problems {
			fmt.Printf("   GUEST FAILURE: %s\n", p)
		}
		p, f, s := g.count()
		totalPass += p
		totalFail += f + len(g.Problems)
		totalSkip += s
	}
	for _, s := range skipped {
		fmt.Printf("!!! %s\n", s)
	}
	if totalFail > 0 {
		return totalPass, totalFail, totalSkip, 1
	}
	return totalPass, totalFail, totalSkip, 0
}
