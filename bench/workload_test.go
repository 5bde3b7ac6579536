//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/spawn"
)

// BenchmarkCLI compares whole processes, as an agent written in another
// language pays for each command: `hutch run --workspace W -- /bin/true`
// against `bwrap <agent policy> /bin/true` and a bare /bin/true, alternated
// round by round. Its CPU is that of the process and everything it started
// (RUSAGE_CHILDREN): the CLI's own spawn server, killed as the CLI exits,
// is reparented to this process as subreaper and reaped with the rest.
//
// Two more processes in the same rounds say how much of that is paid
// before any sandbox: `hutch run --workspace W` with no command, refused
// at the first line of run (hutch's own start: the Go runtime, its
// packages' init functions, the command tree, run's flags parsed), and
// gostart, an empty program linked with cgo as hutch is (the loader, libc,
// the Go runtime); hutch-start-x_bwrap and gostart-x_bwrap are their p50
// over bwrap's.
func BenchmarkCLI(b *testing.B) {
	hutch, err := hutchCLI()
	if err != nil {
		b.Fatal(err)
	}
	gostart, err := build("gostart", "./bench/testdata/gostart")
	if err != nil {
		b.Fatal(err)
	}
	// compare makes this process the subreaper the CLI's spawn server
	// is reparented to.
	run := func() error { return exec.Command(hutch, "run", "--workspace", workspace, "--", "/bin/true").Run() }
	floors := []method{
		timed("hutch-start", func() error { return refused(exec.Command(hutch, "run", "--workspace", workspace)) }),
		timed("gostart", func() error { return exec.Command(gostart).Run() }),
	}
	ops := compare(b, followedBy(timed("hutch", run), reapOrphans), cpuTimes.ofChildren, floors...)
	if ops[bwrap] != nil {
		for _, m := range floors {
			b.ReportMetric(float64(p50(walls(ops[m.name])))/float64(p50(walls(ops[bwrap]))), m.name+"-x_bwrap")
		}
	}
}

// refused runs cmd, which hutch must refuse as its caller's mistake
// (exit status 125), having run nothing.
func refused(cmd *exec.Cmd) error {
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 125 {
		return nil
	}
	return fmt.Errorf("%v: want exit status 125, got %v", cmd.Args, err)
}

var builds sync.Map // name -> *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// build builds the command in pkg (relative to the module's root) once
// per test binary, into scratch as name.
func build(name, pkg string) (string, error) {
	v, _ := builds.LoadOrStore(name, &builtBinary{})
	bin := v.(*builtBinary)
	bin.once.Do(func() {
		bin.path = filepath.Join(scratch, name)
		cmd := exec.Command("go", "build", "-o", bin.path, pkg)
		cmd.Dir = ".." // the module's root, from the package's directory
		if out, err := cmd.CombinedOutput(); err != nil {
			bin.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return bin.path, bin.err
}

// hutchCLI builds the hutch command once per test binary, into scratch.
func hutchCLI() (string, error) { return build("hutch", "./cmd/hutch") }

// reapOrphans waits for and reaps every child of this process but the
// spawn server of its own Sandboxes: what a whole process left behind and
// was reparented here, whose CPU counts in RUSAGE_CHILDREN only once
// reaped.
func reapOrphans() error {
	keep := spawn.Default().ServerPid()
	return reapChildren(func(pid int) bool { return pid != keep })
}

const (
	agentCommands = 100
	// agentThink is the pause between an agent's commands: the model
	// reading the output. Not counted in the loop's time.
	agentThink = 20 * time.Millisecond
	// agentLoops bounds the rounds: each is several seconds per method.
	agentLoops = 5
)

// BenchmarkAgentLoop is the figure an agent feels: 100 commands of a
// typical mix (ls, cat, grep -r, git status, python3 -c) in a small
// repository, one after another with a short think time between them, run
// by hutch (a prewarmed Sandbox), bwrap and bare, a whole loop of each
// alternated round by round. It reports ms per loop, command time only.
func BenchmarkAgentLoop(b *testing.B) {
	tree, argvs, err := agentWork()
	if err != nil {
		b.Skip(err)
	}
	sb := sandbox(b, func(p *runtime.Policy) { p.Prewarm = 1 })
	defer sb.Close()
	var hutch, bareRuns, bwrapRuns []func() error
	for _, argv := range argvs {
		hutch = append(hutch, func() error {
			c := sb.Command(context.Background(), argv[0], argv[1:]...)
			c.Dir = tree
			return c.Run()
		})
		bareRuns = append(bareRuns, func() error {
			c := exec.Command(argv[0], argv[1:]...)
			c.Dir = tree
			return c.Run()
		})
		if run := bwrapRunner(append([]string{"--chdir", tree}, argv...)...); run != nil {
			bwrapRuns = append(bwrapRuns, run)
		}
	}
	methods := []method{agentLoop("hutch", hutch), agentLoop(bare, bareRuns)}
	if bwrapRuns != nil {
		asSubreaper(b)
		methods = append(methods, reaping(agentLoop(bwrap, bwrapRuns)))
	}
	ops := measure(b, min(b.N, agentLoops), methods...)
	for _, m := range methods {
		unit := m.name + "-ms/loop"
		if m.name == "hutch" {
			unit = "ms/loop"
		}
		b.ReportMetric(ms(p50(walls(ops[m.name]))), unit)
	}
	reportRatios(b, ops, "hutch", cpuTimes.total)
}

// agentLoop runs the commands one after another, pausing agentThink after
// each, and takes the commands' time only.
func agentLoop(name string, commands []func() error) method {
	return method{name: name, run: func() (time.Duration, error) {
		var sum time.Duration
		for i, run := range commands {
			d, err := clock(run)
			if err != nil {
				return sum, fmt.Errorf("command %d: %w", i, err)
			}
			sum += d
			time.Sleep(agentThink)
		}
		return sum, nil
	}}
}

var agentSetup struct {
	once  sync.Once
	tree  string
	argvs [][]string
	err   error
}

// agentWork makes, once, a small git repository in the workspace and the
// agent's commands to run in it, agentCommands of them, the mix in turn.
func agentWork() (string, [][]string, error) {
	agentSetup.once.Do(func() {
		agentSetup.tree = filepath.Join(workspace, "agent")
		agentSetup.argvs, agentSetup.err = agentMix()
		if agentSetup.err == nil {
			agentSetup.err = agentRepo(agentSetup.tree)
		}
	})
	return agentSetup.tree, agentSetup.argvs, agentSetup.err
}

func agentMix() ([][]string, error) {
	mix := [][]string{
		{"ls", "-la", "src"},
		{"cat", "README.md"},
		{"grep", "-rn", "TODO", "src"},
		{"git", "status"},
		// The system's python: a version manager's shim is a script
		// that would be measured instead.
		{"/usr/bin/python3", "-c", "print(1)"},
	}
	for _, argv := range mix {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return nil, fmt.Errorf("agent loop: %w", err)
		}
		argv[0] = path
	}
	argvs := make([][]string, agentCommands)
	for i := range argvs {
		argvs[i] = mix[i%len(mix)]
	}
	return argvs, nil
}

// agentRepo makes a repository of a few dozen small source files,
// committed.
func agentRepo(dir string) error {
	for p := range 5 {
		pkg := filepath.Join(dir, "src", fmt.Sprintf("pkg%d", p))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			return err
		}
		for f := range 8 {
			body := strings.Repeat(fmt.Sprintf("func f%d() {} // package %d\n", f, p), 40) + "// TODO: handle errors\n"
			if err := os.WriteFile(filepath.Join(pkg, fmt.Sprintf("file%d.go", f)), []byte(body), 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# agent\n\nA small repository for the agent loop.\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "."},
		{"-c", "user.name=bench", "-c", "user.email=bench@example.test", "-c", "commit.gpgsign=false", "commit", "-qm", "start"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", args[0], err, out)
		}
	}
	return nil
}
