package processes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
)

// Manager keeps the durable processes of one data directory, in
// <data dir>/processes/<id>/. Any number of managers, in one host program
// or several, may have the same directory open: records change only under
// their lock, and each process has exactly one supervisor.
type Manager struct {
	// Supervisor is the program started as each new process's supervisor:
	// a hutch binary (any program whose main calls SupervisorMain first),
	// of the same version as this package. Empty means the hutch found on
	// $PATH. Set it before Start; a Manager never starts the host program
	// itself as a supervisor (see SupervisorMain).
	Supervisor string

	store store

	mu sync.Mutex
	// held are the pidfds of the supervisors this manager adopted, by id.
	held map[string]int
}

// Open opens the durable processes of dataDir, creating it if needed, and
// takes stock of every record: a supervisor that still runs (the same pid
// with the same start time, in this boot) is adopted, through a pidfd
// held until Close; a record whose supervisor is gone is marked stale and
// its pids cleared, never signalled; a stop that a crashed manager left
// half done (desired stopped, supervisor running) is sent again.
func Open(dataDir string) (*Manager, error) {
	if dataDir == "" {
		return nil, errors.New("processes: no data directory given")
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(abs, "processes")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("processes: data directory: %w", err)
	}
	m := &Manager{store: store{root: root}, held: map[string]int{}}
	ids, err := m.ids()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		// An unreadable record is the one process's trouble (List
		// reports it), never a reason to refuse the rest.
		if _, err := m.refresh(id); err != nil && !errors.Is(err, ErrNotFound) && !unreadable(err) {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// Close lets go of the adopted supervisors' pidfds. The processes run on.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, fd := range m.held {
		unix.Close(fd)
		delete(m.held, id)
	}
	return nil
}

// ids lists the process directories.
func (m *Manager) ids() ([]string, error) {
	ents, err := os.ReadDir(m.store.root)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// An id is idLen hex digits: it names a directory, so nothing else may
// pass for one.
const idLen = 12

func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !validID(id) {
		return fmt.Errorf("processes: id %q: not a process id (%d hex digits): %w", id, idLen, ErrNotFound)
	}
	return nil
}

// refresh brings id's record in line with what runs: a record that
// claims a supervisor whose identity no longer holds becomes stale; a
// live one is adopted; a recorded stop still pending is sent again.
func (m *Manager) refresh(id string) (Process, error) {
	p, err := m.store.update(id, func(p *Process) error {
		if !p.Status.Active() {
			return errUnchanged
		}
		var why string
		if p.Supervisor == nil {
			// The manager that started it died before writing the
			// supervisor in, and the supervisor never wrote itself in.
			if m.store.supervised(id) {
				return errUnchanged
			}
			why = "no supervisor was recorded, and none runs"
		} else {
			var err error
			if why, err = p.Supervisor.gone(); err != nil {
				return err
			}
			if why == "" {
				return errUnchanged
			}
		}
		markStale(p, why)
		return nil
	})
	if err != nil {
		return p, err
	}
	if !p.Status.Active() || p.Supervisor == nil {
		m.release(id)
		return p, nil
	}
	fd, err := m.adopt(id, *p.Supervisor)
	if errors.Is(err, ErrGone) {
		return m.refresh(id) // it ended just now
	}
	if err != nil {
		return p, err
	}
	if p.Desired == DesiredStopped {
		if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil && err != unix.ESRCH {
			return p, fmt.Errorf("processes: %s: signal its supervisor: %w", id, err)
		}
	}
	return p, nil
}

// markStale clears what p says runs, for the reason why.
func markStale(p *Process, why string) {
	p.Status, p.Reason = StatusStale, why
	p.Pid, p.Supervisor = 0, nil
	p.Backoff.Next, p.Backoff.Delay = time.Time{}, 0
}

// adopt returns the held pidfd of id's supervisor, opening it (and
// checking the identity after the open) the first time.
func (m *Manager) adopt(id string, sup Identity) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fd, ok := m.held[id]; ok {
		return fd, nil
	}
	fd, err := sup.Open()
	if err != nil {
		return -1, err
	}
	m.held[id] = fd
	return fd, nil
}

func (m *Manager) release(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fd, ok := m.held[id]; ok {
		unix.Close(fd)
		delete(m.held, id)
	}
}

// Start starts a durable process: a detached supervisor (see the package
// documentation) that builds spec's sandbox and runs spec's command in
// it. Start returns once the command runs, with its record; the process
// outlives the caller. A Spec or Policy the runtime refuses is a
// *runtime.PolicyError, and nothing is left behind by any error.
func (m *Manager) Start(ctx context.Context, spec Spec) (*Process, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	resolved, err := m.policy(spec.Policy, spec.Dir)
	if err != nil {
		return nil, err
	}
	spec.Policy = resolved.Policy()
	prog, err := m.supervisorProgram()
	if err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	dir := m.store.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	p, ready, sup, err := m.launch(id, spec, resolved, prog)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go sup.Wait() // reap it, should it end while this program runs
	if err := waitReady(ctx, ready); err != nil {
		m.abandon(id, *p.Supervisor, spec.StopGrace, ctx.Err() != nil)
		return nil, fmt.Errorf("processes: start %q: %w", spec.Args[0], err)
	}
	got, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	return &got, nil
}

// abandon undoes a Start that failed: nothing may be left. A supervisor
// that reported its failure is on its way out, its sandbox closed; one
// given up on (the caller's ctx) is stopped as Stop would, so that it
// closes its sandbox itself, and killed if it does not end in time (its
// sandbox dies with it; a cgroup it leaves is swept by the runtime later).
func (m *Manager) abandon(id string, sup Identity, grace time.Duration, cancelled bool) {
	if fd, err := m.adopt(id, sup); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
		if cancelled {
			unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
		}
		if waitExit(ctx, fd) != nil {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			waitExit(context.Background(), fd)
		}
		cancel()
	}
	m.release(id)
	os.RemoveAll(m.store.dir(id))
}

// policy decides the sandbox of a durable process: the caller's policy,
// checked by runtime.Check as for any command, with the output going to
// the log instead of a capped buffer and this manager's records hidden
// from it. Its supervisor runs that decision (runtime.NewResolved), not
// the policy decided again. The records must not lie where the command could write: it could
// move or replace them under its supervisor.
//
// dir, the Spec's working directory, is checked against it as Start
// checks a Cmd.Dir: a refusal is the caller's, named Spec.Dir, before any
// supervisor starts.
func (m *Manager) policy(p runtime.Policy, dir string) (*runtime.Resolved, error) {
	p.OutputLimit = runtime.Unlimited
	// One command at a time, restarted after seconds: a pool of inits
	// (a server's --prewarm) would sit idle for the process's life.
	p.Prewarm = 0
	p.Deny = append(slices.Clone(p.Deny), m.store.root)
	checked, err := runtime.Check(p)
	if err != nil {
		return nil, err
	}
	resolved := checked.Policy()
	if resolved.Backend == runtime.BackendOCI {
		// Checked for package oci; its supervisor's NewResolved would
		// refuse it, after starting.
		return nil, &runtime.BackendError{Backend: runtime.BackendOCI, Reason: "a durable process runs under hutch's own backends (auto, namespaces, landlock); an OCI runtime runs commands through package oci"}
	}
	_, err = checked.WorkDir(dir)
	var pe *runtime.PolicyError
	if errors.As(err, &pe) {
		return nil, &runtime.PolicyError{Field: "Spec.Dir", Value: pe.Value, Reason: pe.Reason}
	}
	if err != nil {
		return nil, err
	}
	root, err := filepath.EvalSymlinks(m.store.root)
	if err != nil {
		return nil, err
	}
	for _, tree := range append([]string{resolved.Workspace, resolved.Home}, resolved.Writable...) {
		if tree != "" && (mounts.Within(root, tree) || mounts.Within(tree, root)) {
			return nil, &runtime.PolicyError{Field: "Spec.Policy", Value: tree, Reason: fmt.Sprintf("writable in the sandbox, and the data directory %s is within it or it within the data directory", filepath.Dir(root))}
		}
	}
	return checked, nil
}

func newID() (string, error) {
	b := make([]byte, idLen/2)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// launch writes id's sandbox.json (spec and the decision r) and first
// record and starts its supervisor, the program prog, all under the
// record's lock: no other manager sees a record without its supervisor's
// identity.
func (m *Manager) launch(id string, spec Spec, r *runtime.Resolved, prog string) (Process, *os.File, *exec.Cmd, error) {
	dir := m.store.dir(id)
	b, err := json.MarshalIndent(newSandboxDoc(spec, r), "", "  ")
	if err != nil {
		return Process{}, nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, sandboxFile), append(b, '\n'), 0o600); err != nil {
		return Process{}, nil, nil, err
	}
	unlock, err := m.store.lock(id)
	if err != nil {
		return Process{}, nil, nil, err
	}
	defer unlock()
	p := Process{ID: id, Name: spec.Name, Args: spec.Args, Created: time.Now().UTC(), Desired: DesiredRunning,
		Status: StatusStarting, Restart: spec.Restart, Log: filepath.Join(dir, logFile)}
	if err := m.store.write(id, p); err != nil {
		return p, nil, nil, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return p, nil, nil, err
	}
	defer readyW.Close()
	sup, err := startSupervisor(prog, dir, readyW)
	if err != nil {
		ready.Close()
		return p, nil, nil, err
	}
	ident, err := Identify(sup.Process.Pid)
	if err != nil {
		// It died at once; its log says why.
		sup.Wait()
		ready.Close()
		return p, nil, nil, fmt.Errorf("processes: the supervisor ended at once: %s", tail(filepath.Join(dir, supervisorLog)))
	}
	p.Supervisor = &ident
	return p, ready, sup, m.store.write(id, p)
}

// supervisorProgram is the program Start runs as a supervisor: Supervisor,
// or the hutch on $PATH.
func (m *Manager) supervisorProgram() (string, error) {
	if m.Supervisor != "" {
		return m.Supervisor, nil
	}
	path, err := exec.LookPath("hutch")
	if err != nil {
		return "", fmt.Errorf("processes: no supervisor program: Manager.Supervisor is empty and %w (install hutch: go install github.com/hutchbox/hutch/cmd/hutch)", err)
	}
	return path, nil
}

// startSupervisor starts the supervisor program prog (supervisorArg0,
// taken over by its SupervisorMain) as the supervisor of the process in
// dir: in a session of its own, so that the host's terminal and process
// group do not reach it, with its diagnostics in supervisor.log and ready
// as fd 3.
func startSupervisor(prog, dir string, ready *os.File) (*exec.Cmd, error) {
	logf, err := os.OpenFile(filepath.Join(dir, supervisorLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        []string{supervisorArg0, dir},
		Env:         os.Environ(),
		Dir:         "/",
		Stdout:      logf,
		Stderr:      logf,
		ExtraFiles:  []*os.File{ready},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("processes: start the supervisor: %w", err)
	}
	return cmd, nil
}

// readyMsg is the supervisor's one message on its ready pipe.
type readyMsg struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// waitReady reads the supervisor's verdict on its first run.
func waitReady(ctx context.Context, ready *os.File) error {
	type read struct {
		msg readyMsg
		err error
	}
	ch := make(chan read, 1)
	go func() {
		var r read
		r.err = json.NewDecoder(ready).Decode(&r.msg)
		ch <- r
	}()
	defer ready.Close()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case r := <-ch:
		switch {
		case r.err != nil:
			return fmt.Errorf("the supervisor ended before the command started (%v)", r.err)
		case r.msg.Error != "":
			return errors.New(r.msg.Error)
		}
		return nil
	}
}

// waitExit waits until the process of pidfd fd has ended.
func waitExit(ctx context.Context, fd int) error {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 100)
		if err != nil && err != unix.EINTR {
			return err
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
}

// tail is the end of a diagnostics file, for an error.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return "(nothing in " + path + ")"
	}
	return s
}

// Get returns id's record, checked as Open checks every record.
func (m *Manager) Get(id string) (Process, error) {
	if err := checkID(id); err != nil {
		return Process{}, err
	}
	p, err := m.refresh(id)
	if unreadable(err) {
		return unreadableRecord(id, err), nil
	}
	return p, err
}

// unreadable says err is a record's that exists but cannot be read.
func unreadable(err error) bool {
	var re *recordError
	return errors.As(err, &re)
}

// unreadableRecord stands for the record of id that err kept from being
// read.
func unreadableRecord(id string, err error) Process {
	return Process{ID: id, Status: StatusUnreadable, Reason: err.Error()}
}

// List returns every record, oldest first, each checked as Get does.
func (m *Manager) List() ([]Process, error) {
	ids, err := m.ids()
	if err != nil {
		return nil, err
	}
	var list []Process
	for _, id := range ids {
		p, err := m.refresh(id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // removed meanwhile
		case unreadable(err):
			p = unreadableRecord(id, err) // listed, and the others with it
		case err != nil:
			return nil, err
		}
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b Process) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return list, nil
}

// Stop stops id for good: desired stopped is recorded first, then its
// supervisor is told (SIGTERM through its pidfd) and stops the command:
// SIGTERM to its process group, the SIGKILL of its whole sandbox after
// Spec.StopGrace, then the sandbox's cgroup and mounts go, and the
// supervisor ends. Stop returns once it has ended, or with ctx's error;
// a stop it did not see to the end is finished by the supervisor alone,
// or by the next manager that reads the record. A stale or ended process
// is never signalled.
func (m *Manager) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := m.refresh(id); unreadable(err) {
		return m.stopHolder(ctx, id)
	} else if err != nil {
		return err
	}
	p, err := m.store.update(id, func(p *Process) error {
		p.Desired = DesiredStopped
		if p.Status.Active() {
			p.Status = StatusStopping
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !p.Status.Active() || p.Supervisor == nil {
		// The record says nothing runs; a supervisor that still holds
		// its lock (a record judged stale while it ran) says otherwise,
		// and is stopped too: stopped means nothing of it runs.
		return m.stopHolder(ctx, id)
	}
	fd, err := m.adopt(id, *p.Supervisor)
	if errors.Is(err, ErrGone) {
		_, err = m.refresh(id)
		return err
	}
	if err != nil {
		return err
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil && err != unix.ESRCH {
		return fmt.Errorf("processes: %s: signal its supervisor: %w", id, err)
	}
	if err := waitExit(ctx, fd); err != nil {
		return fmt.Errorf("processes: %s: stop: %w", id, err)
	}
	m.release(id)
	// A supervisor that ended without its last word (killed) leaves the
	// record active: nothing of it runs any more, by the stop.
	_, err = m.store.update(id, func(p *Process) error {
		if !p.Status.Active() {
			return errUnchanged
		}
		p.Status, p.Pid, p.Supervisor = StatusStopped, 0, nil
		return nil
	})
	return err
}

// stopHolder stops the supervisor that holds id's lock, whatever its
// record says (unreadable, stale), and waits for its end: SIGTERM, which
// has it stop its command as for any stop.
func (m *Manager) stopHolder(ctx context.Context, id string) error {
	fd, err := m.store.lockHolder(id)
	if err != nil || fd < 0 {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil && err != unix.ESRCH {
		return fmt.Errorf("processes: %s: signal the supervisor holding its lock: %w", id, err)
	}
	if err := waitExit(ctx, fd); err != nil {
		return fmt.Errorf("processes: %s: stop the supervisor holding its lock: %w", id, err)
	}
	return nil
}

// StopAll stops every process that runs or is meant to, all at once, and
// returns when all have ended.
func (m *Manager) StopAll(ctx context.Context) error {
	list, err := m.List()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(list))
	for i, p := range list {
		if !p.Status.Active() && p.Desired == DesiredStopped && !m.store.supervised(p.ID) {
			continue
		}
		wg.Go(func() { errs[i] = m.Stop(ctx, p.ID) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Remove deletes the record and log of a process that does not run
// (ErrActive otherwise).
func (m *Manager) Remove(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := m.refresh(id); err != nil && !unreadable(err) {
		return err
	}
	unlock, err := m.store.lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	// An unreadable record goes too, once nothing of it runs (its
	// supervisor, found by its lock, stopped by Stop).
	p, err := m.store.read(id)
	if err != nil && !unreadable(err) {
		return err
	}
	if unreadable(err) {
		p.Status = StatusUnreadable
	}
	if p.Status.Active() || m.store.supervised(id) {
		return fmt.Errorf("processes: %s is %s: %w", id, p.Status, ErrActive)
	}
	// Out of the way in one rename, then deleted: no reader sees half.
	gone := filepath.Join(m.store.root, ".removed-"+id)
	if err := os.Rename(m.store.dir(id), gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// Log returns id's log, process.log.1 (the part rotated out) then
// process.log, as the supervisor wrote them.
func (m *Manager) Log(id string) (io.ReadCloser, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	dir := m.store.dir(id)
	// The current log first, then the old one: a rotation between the
	// two opens makes them the same file (read once), never loses what
	// was rotated away.
	cur, err := os.Open(filepath.Join(dir, logFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("processes: %s: %w", id, ErrNotFound)
		}
		// None yet, or caught between a rotation's rename and the new
		// file: what was rotated is the log.
		if old, err := os.Open(filepath.Join(dir, oldLogFile)); err == nil {
			return old, nil
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	if err != nil {
		return nil, err
	}
	old, err := os.Open(filepath.Join(dir, oldLogFile))
	if err != nil {
		return cur, nil
	}
	if a, aerr := old.Stat(); aerr == nil {
		if b, berr := cur.Stat(); berr == nil && os.SameFile(a, b) {
			old.Close()
			return cur, nil
		}
	}
	return &logReader{Reader: io.MultiReader(old, cur), files: []*os.File{old, cur}}, nil
}

type logReader struct {
	io.Reader
	files []*os.File
}

func (r *logReader) Close() error {
	for _, f := range r.files {
		f.Close()
	}
	return nil
}

// gone says why the process id names is gone, or "" if it runs.
func (id Identity) gone() (string, error) {
	boot, err := bootID()
	if err != nil {
		return "", err
	}
	if id.BootID != boot {
		return fmt.Sprintf("its supervisor (pid %d) ran in boot %s; this is boot %s", id.Pid, id.BootID, boot), nil
	}
	st, err := startTime(id.Pid)
	switch {
	case errors.Is(err, ErrGone):
		return fmt.Sprintf("its supervisor (pid %d) is gone", id.Pid), nil
	case err != nil:
		return "", err
	case st != id.StartTime:
		return fmt.Sprintf("pid %d, its supervisor's, now names another process (started at tick %d, not %d)", id.Pid, st, id.StartTime), nil
	}
	return "", nil
}

// supervised says whether a supervisor holds id's supervisor.lock.
func (s store) supervised(id string) bool {
	f, err := os.Open(filepath.Join(s.dir(id), supervisorLock))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	return false
}
