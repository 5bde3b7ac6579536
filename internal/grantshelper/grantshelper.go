// Package grantshelper is how the hutch CLI keeps remembered grants
// without linking SQLite: Open runs the hutch-grants helper
// (cmd/hutch-grants) on the database and asks it for each call of the
// Store, one JSON request a line on the helper's standard input and one
// JSON reply a line on its standard output. Open runs it to open the
// database, so that a database that cannot be kept is Open's error, and
// keeps it for the Store's calls; OpenIdle lets it end there and runs it
// again from the Store's first call. Either way it keeps the database
// open (package grantsdb) until its input ends, which the Store's Close
// or the CLI's own exit does.
//
// SQLite's packages (modernc.org/sqlite and its C library translated to
// Go) cost every hutch process a third of its start in package
// initialisation, and only hutch grants and hutch serve keep grants.
//
// The helper runs as the CLI's user, with the CLI's environment, on the
// path the CLI was given, as the database was opened when it was part of
// the CLI: it is a host program that no sandbox reaches.
package grantshelper

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/internal/helpers"
)

// Name is the helper's file name, looked for beside the running program
// and then on $PATH.
const Name = "hutch-grants"

// request is one call of a Backend: op is "add", "list" or "revoke".
type request struct {
	Op    string           `json:"op"`
	Grant *approvals.Grant `json:"grant,omitempty"`
	Now   time.Time        `json:"now,omitzero"`
	All   bool             `json:"all,omitempty"`
	ID    int64            `json:"id,omitempty"`
}

// reply answers a request, or, first of all, the database's opening.
type reply struct {
	ID     int64             `json:"id,omitempty"`
	Grants []approvals.Grant `json:"grants,omitempty"`
	Error  string            `json:"error,omitempty"`
	// NoGrant says that Error is Revoke's approvals.ErrNoGrant.
	NoGrant bool `json:"no_grant,omitempty"`
}

// maxLine bounds a line either way: a list of every grant ever kept is
// the longest, and 64 MiB holds hundreds of thousands.
const maxLine = 64 << 20

// Serve is the helper's side: it opens the database with open, replies
// whether it could, and then answers requests from r on w until r ends.
// A request it cannot read ends it with an error; one the database
// refuses is answered with the database's error.
func Serve(r io.Reader, w io.Writer, open func() (approvals.Backend, error)) error {
	out := bufio.NewWriter(w)
	send := func(rep reply) error {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
		return out.Flush()
	}
	b, err := open()
	if err != nil {
		send(reply{Error: err.Error()})
		return err
	}
	defer b.Close()
	if err := send(reply{}); err != nil {
		return err
	}
	in := bufio.NewScanner(r)
	in.Buffer(nil, maxLine)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return fmt.Errorf("%s: a request that is not JSON: %w", Name, err)
		}
		var rep reply
		switch req.Op {
		case "add":
			if req.Grant == nil {
				return fmt.Errorf("%s: add without a grant", Name)
			}
			rep.ID, err = b.Add(*req.Grant)
		case "list":
			rep.Grants, err = b.List(req.Now, req.All)
		case "revoke":
			err = b.Revoke(req.ID, req.Now)
			rep.NoGrant = errors.Is(err, approvals.ErrNoGrant)
		default:
			return fmt.Errorf("%s: unknown request %q", Name, req.Op)
		}
		if err != nil {
			rep.Error = err.Error()
		}
		if err := send(rep); err != nil {
			return err
		}
	}
	return in.Err()
}

// client is the CLI's side: an approvals.Backend whose calls a helper
// answers, one at a time. The helper runs from Open (or OpenIdle's
// Store's first call) until its Close, and again from the call after one
// it failed: a hutch serve that is never asked about grants keeps no
// helper.
type client struct {
	exe, path string

	mu     sync.Mutex
	run    *helperRun // the helper running, or nil
	closed bool
}

// helperRun is one run of the helper.
type helperRun struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stderr  *bytes.Buffer
	waited  bool // cmd.Wait was called; waitErr is what it returned
	waitErr error
}

// Open runs the helper on the grants database at path, which it creates
// as grantsdb.Open does, and returns it as a Store whose calls that run
// of the helper answers, for a caller about to make them (hutch grants).
// The helper opens the database and says whether it could: Open's error
// is its reason.
func Open(path string) (*approvals.Store, error) { return openFound(path, true) }

// OpenIdle is Open for a caller that may make no call for a long while,
// or none (hutch serve): the helper ends once it has opened the database,
// and runs again from the Store's first call.
func OpenIdle(path string) (*approvals.Store, error) { return openFound(path, false) }

// openFound is open with the helper that helpers.Find finds.
func openFound(path string, keep bool) (*approvals.Store, error) {
	exe, err := helpers.Find(Name, "the grants helper")
	if err != nil {
		return nil, err
	}
	return open(exe, path, keep)
}

func open(exe, path string, keep bool) (*approvals.Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	r, err := start(exe, abs)
	if err != nil {
		return nil, err
	}
	c := &client{exe: exe, path: abs}
	if keep {
		c.run = r
	} else {
		r.stop()
	}
	return approvals.NewStore(abs, c)
}

// start runs the helper on the database at path and reads its first
// reply, whether it opened the database.
func start(exe, path string) (*helperRun, error) {
	r := &helperRun{cmd: exec.Command(exe, "--db", path), stderr: new(bytes.Buffer)}
	r.cmd.Stderr = r.stderr
	var err error
	if r.in, err = r.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("approvals: run %s: %w", exe, err)
	}
	r.out = bufio.NewScanner(stdout)
	r.out.Buffer(nil, maxLine)
	var rep reply
	if err := r.read(&rep); err != nil {
		r.stop()
		return nil, err
	}
	if rep.Error != "" {
		r.stop()
		return nil, errors.New(rep.Error)
	}
	return r, nil
}

// wait waits for the helper's end, once.
func (r *helperRun) wait() error {
	if !r.waited {
		r.waited, r.waitErr = true, r.cmd.Wait()
	}
	return r.waitErr
}

// stop ends the helper's input, and so the helper, and waits for it.
func (r *helperRun) stop() error {
	r.in.Close()
	return r.wait()
}

// read reads the helper's next reply into rep. A helper that said
// nothing more has died: the error says how, with what it wrote on its
// standard error.
func (r *helperRun) read(rep *reply) error {
	if r.out.Scan() {
		if err := json.Unmarshal(r.out.Bytes(), rep); err != nil {
			return fmt.Errorf("approvals: %s: a reply that is not JSON: %w", Name, err)
		}
		return nil
	}
	err := r.out.Err()
	if err == nil {
		err = r.wait()
		if err == nil {
			err = errors.New("it ended")
		}
	}
	if msg := strings.TrimSpace(r.stderr.String()); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return fmt.Errorf("approvals: %s: %w", Name, err)
}

// call sends req to the helper, running it first if it is not, and
// reads its reply. A helper that fails a call is stopped; the next call
// runs it again (a call is not repeated: an add may have been kept).
func (c *client) call(req request) (reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rep reply
	if c.closed {
		return rep, errors.New("approvals: the grants database is closed")
	}
	if c.run == nil {
		r, err := start(c.exe, c.path)
		if err != nil {
			return rep, err
		}
		c.run = r
	}
	b, err := json.Marshal(req)
	if err != nil {
		return rep, err
	}
	// A helper that died before reading the request fails the write
	// (EPIPE): what it said on the way out is in its end, which read
	// returns, as when it dies after. Its input is closed on any failed
	// write, so that a helper left with half a request ends too.
	if _, err := c.run.in.Write(append(b, '\n')); err != nil {
		c.run.in.Close()
	}
	err = c.run.read(&rep)
	if err != nil {
		c.run.in.Close()
		c.run.cmd.Process.Kill()
		c.run.wait()
		c.run = nil
		return rep, err
	}
	if rep.NoGrant {
		return rep, fmt.Errorf("%s: %w", strings.TrimSuffix(rep.Error, ": "+approvals.ErrNoGrant.Error()), approvals.ErrNoGrant)
	}
	if rep.Error != "" {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

func (c *client) Add(g approvals.Grant) (int64, error) {
	rep, err := c.call(request{Op: "add", Grant: &g})
	return rep.ID, err
}

func (c *client) List(now time.Time, all bool) ([]approvals.Grant, error) {
	rep, err := c.call(request{Op: "list", Now: now, All: all})
	return rep.Grants, err
}

func (c *client) Revoke(id int64, now time.Time) error {
	_, err := c.call(request{Op: "revoke", ID: id, Now: now})
	return err
}

// Close stops the helper, if it runs, and waits for it.
func (c *client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.run == nil {
		return nil
	}
	r := c.run
	c.run = nil
	return r.stop()
}
