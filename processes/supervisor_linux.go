package processes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/runtime"
)

// supervisorArg0 is the role marker the manager starts the supervisor
// program (Manager.Supervisor) with: its SupervisorMain sees it.
const supervisorArg0 = "hutch-supervisor"

// SupervisorMain makes this process a durable process's supervisor, and
// exits when that ends, if a Manager started it as one; otherwise it
// returns at once. A program that is to serve as Manager.Supervisor calls
// it first thing in main, as hutch does.
//
// Nothing else in this package starts a supervisor: a host program that
// imports processes never runs as one, so that none of its own code (the
// init functions of every package it links, which may write files or dial
// out) runs in a process that outlives it and holds a sandbox.
func SupervisorMain() {
	if len(os.Args) == 2 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1]))
	}
}

// supervisor keeps one durable process: it holds the process's Sandbox
// for its whole life, runs the command in it, copies its output into the
// log, restarts it with backoff, and stops it when told (SIGTERM).
type supervisor struct {
	store store
	id    string
	// me is this supervisor's identity, as it wrote it in the record.
	me    Identity
	dir   string
	spec  Spec
	log   *slog.Logger
	stop  chan os.Signal
	ready *os.File // until the first run is reported
}

// readSpec reads what a manager wrote for dir's supervisor into s.spec,
// and returns the decision to run. The supervisor may be another build
// than the manager's (Manager.Supervisor names a program): a field it
// does not know, or a resolved policy of another format, is an error,
// never dropped, so that a policy this build cannot read whole is not run
// with a part of it missing.
func (s *supervisor) readSpec(dir string) (*runtime.Resolved, error) {
	doc, err := readSandboxDoc(filepath.Join(dir, sandboxFile))
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("read %s: %w", sandboxFile, err)
	case err != nil:
		// Written, but not in a form this build reads whole.
		return nil, fmt.Errorf("read %s: %w (the supervisor program is another version than the program that started the process: give Manager.Supervisor a hutch built from the same version)", sandboxFile, err)
	}
	s.spec = doc.Spec
	s.spec.Policy = doc.Resolved.Policy()
	return doc.Resolved, nil
}

// supervise is the supervisor process's whole life; dir is the process's
// directory, fd 3 the ready pipe.
func supervise(dir string) int {
	s := &supervisor{
		store: store{root: filepath.Dir(dir)},
		id:    filepath.Base(dir),
		dir:   dir,
		log:   slog.New(slog.NewTextHandler(os.Stderr, nil)).With("process", filepath.Base(dir)),
		stop:  make(chan os.Signal, 1),
		ready: os.NewFile(3, "ready"),
	}
	slog.SetDefault(s.log) // the runtime's own messages go to supervisor.log too
	// Signals first: a stop that comes while the sandbox is built waits.
	signal.Notify(s.stop, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	// A child subreaper from the start, not only in endDescendants: an
	// init orphaned earlier (its spawn server gone first, as when the
	// Sandbox closes) would go to the host's pid 1 instead, and run on
	// past this process's end, out of its reach.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.log.Warn("child subreaper", "err", err)
	}

	// One supervisor per process for its whole life: the lock goes only
	// with this process.
	lock, err := os.OpenFile(filepath.Join(dir, supervisorLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		s.report(readyMsg{Error: fmt.Sprintf("another supervisor keeps it (%v)", err)})
		return 1
	}
	defer lock.Close()

	me, err := Identify(os.Getpid())
	if err != nil {
		return s.fail(err)
	}
	s.me = me
	if _, err := s.store.update(s.id, func(p *Process) error { p.Supervisor = &me; return nil }); err != nil {
		return s.fail(err)
	}
	resolved, err := s.readSpec(dir)
	if err != nil {
		return s.fail(err)
	}
	sb, err := runtime.NewResolved(resolved)
	if err != nil {
		return s.fail(err)
	}
	if pub := sb.Published(); len(pub) > 0 {
		// The listeners are this supervisor's, open from here until it
		// ends: the record says which host ports they took.
		if _, err := s.store.update(s.id, func(p *Process) error { p.Published = pub; return nil }); err != nil {
			sb.Close()
			return s.fail(err)
		}
	}
	out, err := openLog(dir, s.spec.LogMaxBytes)
	if err != nil {
		sb.Close()
		return s.fail(err)
	}
	var logState struct {
		sync.Mutex
		full bool
		lost int64
	}
	out.room = func() bool { return freeBytes(dir) >= logResumeRoom }
	out.full = func(full bool, lost int64) {
		logState.Lock()
		logState.full, logState.lost = full, lost
		logState.Unlock()
		// Told from a copy of the command's output: the record is
		// written in the background, never holding the output up, with
		// the state as it is when it is written.
		go func() {
			if _, err := s.store.update(s.id, func(p *Process) error {
				logState.Lock()
				defer logState.Unlock()
				p.LogFull, p.LogDropped = logState.full, logState.lost
				return nil
			}); err != nil {
				s.log.Warn("write the record", "err", err)
			}
		}()
		if full {
			s.log.Warn("the data directory is full: the command runs on, its output is dropped")
		}
	}
	stopped, err := s.loop(sb, out)
	// The sandbox's cgroup and mounts go, and every process below this
	// one ends, before the record says so.
	sb.Close()
	out.Close()
	endDescendants(10 * time.Second)
	if err != nil {
		return s.fail(err)
	}
	final := StatusExited
	if stopped {
		final = StatusStopped
	}
	if _, err := s.store.update(s.id, func(p *Process) error {
		p.Status, p.Pid, p.Supervisor, p.Published = final, 0, nil, nil
		p.Backoff.Next, p.Backoff.Delay = time.Time{}, 0
		return nil
	}); err != nil {
		s.log.Error("write the record", "err", err)
		return 1
	}
	s.log.Info("supervisor ends", "status", final)
	return 0
}

// report tells the manager that started this supervisor how the first
// run went, once.
func (s *supervisor) report(msg readyMsg) {
	if s.ready == nil {
		return
	}
	json.NewEncoder(s.ready).Encode(msg)
	s.ready.Close()
	s.ready = nil
}

// fail records that the supervisor cannot go on, and why.
func (s *supervisor) fail(err error) int {
	s.log.Error("supervisor fails", "err", err)
	s.report(readyMsg{Error: err.Error()})
	if _, uerr := s.store.update(s.id, func(p *Process) error {
		p.Status, p.Reason, p.Pid, p.Supervisor, p.Published = StatusFailed, err.Error(), 0, nil, nil
		return nil
	}); uerr != nil {
		s.log.Error("write the record", "err", uerr)
	}
	return 1
}

// loop runs the command until it is stopped (stopped true) or ends and
// its Restart says not to restart it.
func (s *supervisor) loop(sb *runtime.Sandbox, out *rotatingLog) (stopped bool, err error) {
	for first := true; ; first = false {
		select {
		case <-s.stop:
			return true, nil
		default:
		}
		run, stopped, err := s.runOnce(sb, out, first)
		if err != nil {
			return false, err
		}
		var delay time.Duration
		p, err := s.store.update(s.id, func(p *Process) error {
			p.Pid = 0
			if n := len(p.Runs); n > 0 && p.Runs[n-1].Started.Equal(run.Started) {
				p.Runs[n-1] = run
			} else {
				p.Runs = append(p.Runs, run)
			}
			if len(p.Runs) > maxRuns {
				p.Runs = p.Runs[len(p.Runs)-maxRuns:]
			}
			if stopped || p.Desired == DesiredStopped {
				stopped = true
				p.Status = StatusStopping
				return nil
			}
			if p.Supervisor == nil || *p.Supervisor != s.me {
				// Judged stale, or taken over: this supervisor is no
				// longer the record's, and restarts nothing; it stops.
				stopped = true
				p.Status, p.Reason = StatusStopped, "its supervisor found the record no longer its own, and stopped rather than restart"
				return nil
			}
			if !s.spec.Restart.wantsRestart(run.ExitCode) {
				return nil
			}
			if s.spec.stable(run.Ended.Sub(run.Started)) {
				p.Backoff.Failures = 1
			} else {
				p.Backoff.Failures++
			}
			delay = restartDelay(p.Backoff.Failures, s.spec.RestartDelay, s.spec.MaxRestartDelay)
			p.Status = StatusBackoff
			p.Backoff.Delay, p.Backoff.Next = delay, run.Ended.Add(delay)
			return nil
		})
		if err != nil {
			return false, err
		}
		if stopped {
			return true, nil
		}
		if p.Status != StatusBackoff {
			return false, nil // its Restart says it is done
		}
		s.log.Info("restart after backoff", "delay", delay, "exit_code", run.ExitCode, "signal", run.Signal)
		timer := time.NewTimer(time.Until(p.Backoff.Next))
		select {
		case <-timer.C:
		case <-s.stop:
			timer.Stop()
			return true, nil
		}
	}
}

// denialsEvery is how often a running command's refusals are looked at,
// and brought into its record if there are new ones. The supervisor is a
// process of its own, so no test could set a variable here: the tests
// wait it out.
const denialsEvery = 2 * time.Second

// recordDenials brings the refusals c has met so far into the record's
// run that started at started, if their count has grown past told (the
// count the record holds); it returns the count the record now holds.
// A command refused the same call in a loop rewrites the record at most
// every denialsEvery.
func (s *supervisor) recordDenials(c *runtime.Cmd, started time.Time, told int) int {
	ds, dropped := c.Denials()
	n := dropped
	for _, d := range ds {
		n += d.Count
	}
	if n == told {
		return told
	}
	if _, err := s.store.update(s.id, func(p *Process) error {
		if k := len(p.Runs) - 1; k >= 0 && p.Runs[k].Started.Equal(started) {
			p.Runs[k].Denials, p.Runs[k].DenialsDropped = ds, dropped
		}
		return nil
	}); err != nil {
		s.log.Warn("recording the command's refusals", "err", err)
		return told
	}
	return n
}

// runOnce runs the command once and returns its Run, and whether a stop
// ended it.
func (s *supervisor) runOnce(sb *runtime.Sandbox, out *rotatingLog, first bool) (Run, bool, error) {
	c := sb.Command(context.Background(), s.spec.Args[0], s.spec.Args[1:]...)
	c.Dir, c.Env = s.spec.Dir, s.spec.Env
	c.Stdout, c.Stderr = out, out
	c.WaitDelay = s.spec.StopGrace
	run := Run{Started: time.Now().UTC(), ExitCode: -1}
	if err := c.Start(); err != nil {
		if first {
			// The caller of Start hears of it, and nothing is kept.
			return run, false, err
		}
		run.Ended, run.Error = time.Now().UTC(), err.Error()
		s.log.Warn("restart failed", "err", err)
		return run, false, nil
	}
	run.Pid = c.Pid()
	if _, err := s.store.update(s.id, func(p *Process) error {
		if first {
			p.Status = StatusRunning
		} else {
			p.Restarts++
			p.Status = StatusRunning
		}
		if p.Desired == DesiredStopped {
			p.Status = StatusStopping
		}
		p.Pid = run.Pid
		p.Backoff.Next, p.Backoff.Delay = time.Time{}, 0
		p.Runs = append(p.Runs, run)
		return nil
	}); err != nil {
		c.Stop(syscall.SIGKILL)
		c.Wait()
		return run, false, err
	}
	if first {
		s.report(readyMsg{Pid: run.Pid})
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	tick := time.NewTicker(denialsEvery)
	defer tick.Stop()
	told := 0 // refusals in the record so far
	stopped := false
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-s.stop:
			stopped = true
			c.Stop(syscall.SIGTERM)
			err = <-done
			break wait
		case <-tick.C:
			told = s.recordDenials(c, run.Started, told)
		}
	}
	run.Ended = time.Now().UTC()
	r := c.Result
	switch {
	case r != nil && r.Signal != 0:
		run.Signal = unix.SignalName(r.Signal)
	case r != nil:
		run.ExitCode = r.ExitCode
	}
	if r != nil {
		run.IngressTotal = len(r.Ingress)
		run.Ingress = r.Ingress[max(0, len(r.Ingress)-maxIngress):]
		run.Denials, run.DenialsDropped = r.Denials, r.DenialsDropped
	}
	var ee *runtime.ExitError
	if err != nil && !errors.As(err, &ee) {
		run.Error = err.Error()
	}
	return run, stopped, nil
}
