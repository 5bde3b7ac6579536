// Package localapi owns hutch's local API: the protocol that hutch serve
// speaks on a unix socket, so that an agent in any language runs commands
// and uses the file door of one runtime.Sandbox with nothing but its
// standard library's HTTP client.
//
// The protocol is plain JSON over HTTP/1.1, versioned by its path prefix
// (/v1/; ProtocolVersion). Every request body is one JSON object, decoded
// strictly (an unknown field is an error, not ignored); every error is
// {"error":{"code","message","field"}} with an HTTP status saying whose
// fault it was. POST /v1/exec streams newline-delimited JSON events, the
// command's output as it comes and its runtime.Result at the end.
//
// Access control is the socket's (Listen): a directory only its owner can
// enter, the socket mode 0600, and every connection's peer credentials
// checked against the server's uid and an explicit allow-list before any
// request is read. Nothing listens on TCP.
package localapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// ProtocolVersion is the version of the protocol, the N of /vN/. It
// changes when a route, field or event changes meaning or goes away, not
// when one is added.
const ProtocolVersion = 1

// DefaultMaxBody is the largest request body a Handler reads when
// Options.MaxBody is 0: a file written through the API travels in one
// body, base64 inflating it by a third.
const DefaultMaxBody = 32 << 20

// Options are a Handler's.
type Options struct {
	// Version is hutch's version, for GET /v1/version.
	Version string
	// WaitDelay is each command's Cmd.WaitDelay: the grace between the
	// SIGTERM of a timeout or a gone client and the SIGKILL of its
	// sandbox (0: runtime.DefaultWaitDelay).
	WaitDelay time.Duration
	// MaxBody caps a request's body (0: DefaultMaxBody).
	MaxBody int64
	// Logger gets the server's records (nil: slog.Default()).
	Logger *slog.Logger
	// Processes, when set, serves the durable-process routes
	// (/v1/processes...); a process's grace between SIGTERM and SIGKILL
	// on stop is WaitDelay.
	Processes Processes
	// ProcessesOff, with Processes nil, says why there are no durable
	// processes: their routes answer 503 unavailable with it.
	ProcessesOff string
	// Reload, when set, serves POST /v1/policy/reload: it reads the
	// server's policy again and puts it in effect (runtime.Sandbox.Reload).
	// An *Error it returns is the answer as it is (hutch serve answers a
	// --policy file that does not parse with a 400); any other error is
	// said as the Sandbox's are.
	Reload func() error
	// Policy, when set, serves GET /v1/policy: the policy as the
	// server's flags and files say it (what a client compares its own
	// with), before what the server adds (its grant ceiling, its hidden
	// directories, its pool).
	Policy func() runtime.Policy
	// Approvals, when set, serves the approvals engine's read-only
	// routes: POST /v1/approvals/decide judges a tool call as
	// Engine.Lookup does (a prompt is answered as it is, for the agent
	// to put to its user; Approvals.Approve is never called), and GET
	// /v1/approvals/rules lists the tools' rules. There is deliberately
	// no route that adds, revokes or lists remembered grants: the API's
	// callers are the agents whose calls the grants judge, and consent
	// must not be writable by the one it binds (hutch grants, run by the
	// user, keeps them).
	Approvals *approvals.Engine
	// ApprovalsOff, with Approvals nil, says why there is no approvals
	// engine: its routes answer 503 unavailable with it.
	ApprovalsOff string
}

// PolicyResponse is GET /v1/policy's answer.
type PolicyResponse struct {
	Policy runtime.Policy `json:"policy"`
	// KillAfterMS is the grace between a stop's SIGTERM and its SIGKILL.
	KillAfterMS int64 `json:"kill_after_ms"`
	// Grantable is the ceiling of a call's grant, as permission tags.
	Grantable []string `json:"grantable"`
}

// Handler serves the API over one Sandbox. It is safe for concurrent use.
type Handler struct {
	sb     *runtime.Sandbox
	opts   Options
	routes map[string]route
}

// route is one path's method and handler.
type route struct {
	method string
	serve  func(http.ResponseWriter, *http.Request) error
}

// NewHandler returns the API's handler over sb, which the caller keeps
// and closes.
func NewHandler(sb *runtime.Sandbox, opts Options) *Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Handler{sb: sb, opts: opts}
	h.routes = map[string]route{
		"/v1/health":      {http.MethodGet, h.health},
		"/v1/version":     {http.MethodGet, h.version},
		"/v1/exec":        {http.MethodPost, h.exec},
		"/v1/files/read":  {http.MethodPost, h.read},
		"/v1/files/write": {http.MethodPost, h.write},
		"/v1/files/stat":  {http.MethodPost, h.stat},
		"/v1/files/list":  {http.MethodPost, h.list},
		"/v1/explain":     {http.MethodPost, h.explain},
	}
	switch {
	case opts.Processes != nil:
		maps.Copy(h.routes, h.processRoutes())
	case opts.ProcessesOff != "":
		maps.Copy(h.routes, unavailable(h.processRoutes(), opts.ProcessesOff))
	}
	if opts.Reload != nil {
		h.routes["/v1/policy/reload"] = route{http.MethodPost, h.reload}
	}
	if opts.Policy != nil {
		h.routes["/v1/policy"] = route{http.MethodGet, h.policy}
	}
	switch {
	case opts.Approvals != nil:
		maps.Copy(h.routes, h.approvalRoutes())
	case opts.ApprovalsOff != "":
		maps.Copy(h.routes, unavailable(h.approvalRoutes(), opts.ApprovalsOff))
	}
	return h
}

// unavailable is routes, each answering 503 unavailable with why: routes
// the server would serve, but cannot.
func unavailable(routes map[string]route, why string) map[string]route {
	out := make(map[string]route, len(routes))
	for path, rt := range routes {
		out[path] = route{rt.method, func(http.ResponseWriter, *http.Request) error {
			return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: why}
		}}
	}
	return out
}

// BodyTimeout bounds the reading of a request's body (but a streamed
// stdin's): past it the request fails and its connection is closed.
const BodyTimeout = 60 * time.Second

// bodyTimeout is BodyTimeout; the tests shorten it.
var bodyTimeout = BodyTimeout

// ServeHTTP routes by exact path (no redirects, no pattern matching: the
// routes are few and a client's mistake should be a JSON error, not a
// ServeMux's text/plain one).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := h.routes[r.URL.Path]
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no route " + r.URL.Path + "; routes: " + strings.Join(slices.Sorted(maps.Keys(h.routes)), ", ")})
		return
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.URL.Path + " takes " + rt.method})
		return
	}
	if streamsStdin(r) {
		// The body is the request, then the command's stdin for as long
		// as the client sends it: only the request is capped. The
		// response may begin while it is read.
		hl := &headLimit{ReadCloser: r.Body, left: h.opts.MaxBody}
		r.Body = hl
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			writeError(w, apiError(err))
			return
		}
		if err := rt.serve(w, r); err != nil {
			// Refused before its command ran: the client may still be
			// sending the stdin. Closed on it, the connection would fail
			// the client's writes, and a client that then drops the
			// exchange loses the error it was sent: it is read and
			// dropped, for a bounded time, as after a result.
			writeError(w, apiError(err))
			_ = rc.Flush()
			hl.lifted = true
			_ = rc.SetReadDeadline(time.Now().Add(stdinDrainTime))
			_, _ = io.Copy(io.Discard, r.Body)
		}
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBody)
	// A body is read whole before anything runs: one sent byte by byte
	// holds a connection and a goroutine, not the server. (A streamed
	// stdin is the command's, read as long as it runs.)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
	if err := rt.serve(w, r); err != nil {
		writeError(w, apiError(err))
	}
}

// Error is the API's error, the body {"error": Error} of every response
// that is not a success.
type Error struct {
	Status int `json:"-"`
	// Code is a word a client can switch on: bad_request, denied,
	// private, not_found, too_large, leak, unsupported, internal...
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request's field at fault, when one is.
	Field string `json:"field,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// badRequest is a 400 naming field.
func badRequest(field, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Field: field, Message: msg}
}

// apiError says err, from a decoder or the Sandbox, as the API does.
func apiError(err error) *Error {
	var (
		e   *Error
		fpe *runtime.FilePathError
		pe  *runtime.PolicyError
		le  *runtime.LeakError
	)
	msg := strings.TrimPrefix(err.Error(), "hutch: ")
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &fpe):
		return &Error{Status: http.StatusBadRequest, Code: "bad_path", Field: "path", Message: msg}
	case errors.As(err, &pe):
		field := requestField(pe.Field)
		if field != "" {
			// In the request's words: the field is named apart.
			msg = pe.Reason
			if pe.Value != "" {
				msg = strconv.Quote(pe.Value) + ": " + msg
			}
		}
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Field: field, Message: msg}
	case errors.As(err, &le):
		return &Error{Status: http.StatusForbidden, Code: "leak", Message: msg}
	case errors.Is(err, runtime.ErrPrivate):
		return &Error{Status: http.StatusForbidden, Code: "private", Message: msg}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Status: http.StatusForbidden, Code: "denied", Message: msg}
	case errors.Is(err, processes.ErrActive):
		return &Error{Status: http.StatusConflict, Code: "active", Message: msg + ": stop it first"}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg}
	case errors.Is(err, errors.ErrUnsupported):
		return &Error{Status: http.StatusNotImplemented, Code: "unsupported", Message: msg}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: msg}
}

// requestField is the request's name for a Cmd or Spec field a
// PolicyError names (Cmd.Dir[...] is cwd).
func requestField(field string) string {
	name, _, _ := strings.Cut(field, "[")
	switch name {
	case "Cmd.Dir", "Spec.Dir":
		return "cwd"
	case "Cmd.Env", "Spec.Env":
		return "env"
	case "Cmd.Args", "Cmd.Path", "Spec.Args":
		return "argv"
	case "Cmd.Explain":
		return "explain"
	}
	return ""
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, ErrorResponse{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) error {
	p := h.sb.Policy()
	writeJSON(w, http.StatusOK, HealthResponse{Status: "ok", Workspace: p.Workspace, Prewarmed: h.sb.Prewarmed()})
	return nil
}

func (h *Handler) version(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, VersionResponse{Protocol: ProtocolVersion, HutchVersion: h.opts.Version})
	return nil
}

func (h *Handler) reload(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if err := h.opts.Reload(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReloadResponse{Status: "reloaded", Workspace: h.sb.Policy().Workspace})
	return nil
}

func (h *Handler) policy(w http.ResponseWriter, _ *http.Request) error {
	tags := h.sb.Policy().Grantable.Tags()
	if tags == nil {
		tags = []string{}
	}
	writeJSON(w, http.StatusOK, PolicyResponse{Policy: h.opts.Policy(), KillAfterMS: h.opts.WaitDelay.Milliseconds(), Grantable: tags})
	return nil
}

// Event is one line of POST /v1/exec's response (application/x-ndjson):
// "started" comes first, once the command runs; "stdout" and "stderr"
// carry output as it arrives (Data as text, or base64 when Base64 is
// set: a chunk that is not UTF-8); "result" comes last, once. A client
// ignores a type it does not know.
type Event struct {
	Type   string `json:"type"`
	Data   string `json:"data,omitempty"`
	Base64 bool   `json:"base64,omitempty"`
	// Result is the command's runtime.Result, as hutch run
	// --result-json writes its fields.
	Result *runtime.Result `json:"result,omitempty"`
	// ExitStatus is hutch run's exit status for the same end: the
	// command's, 128+N for signal N, 126 cannot execute, 127 not found,
	// 125 hutch failed.
	ExitStatus *int `json:"exit_status,omitempty"`
	// Error is why the command did not run, or what went wrong copying
	// its output.
	Error string `json:"error,omitempty"`
	// Published are the command's published ports (the request's
	// publish), host ports chosen filled in: in the "started" event, so
	// that the client can reach the command while it runs.
	Published []runtime.Publish `json:"published,omitempty"`
}

// StdinHeader, set to "stream" on POST /v1/exec, says the body is the
// request's JSON object and then, at once, the command's stdin, read as
// the command reads it until the client ends the body (HTTP/1.1 chunked,
// full duplex: output comes back meanwhile). A client that cannot end
// its stdin (a pipe nobody closes) lets the command finish all the same.
const StdinHeader = "Hutch-Stdin"

func streamsStdin(r *http.Request) bool {
	return r.URL.Path == "/v1/exec" && r.Header.Get(StdinHeader) == "stream"
}

// headLimit caps a body until lift: the request's object, not the
// stdin streamed after it.
type headLimit struct {
	io.ReadCloser
	left   int64
	lifted bool
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.lifted {
		return l.ReadCloser.Read(p)
	}
	if l.left <= 0 {
		return 0, &http.MaxBytesError{Limit: l.left}
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.ReadCloser.Read(p)
	l.left -= int64(n)
	return n, err
}

func (h *Handler) exec(w http.ResponseWriter, r *http.Request) error {
	var (
		req   *ExecRequest
		stdin io.Reader
		err   error
	)
	if hl, ok := r.Body.(*headLimit); ok {
		if req, stdin, err = decodeExecStream(r.Body, h.opts.MaxBody); err != nil {
			return err
		}
		hl.lifted = true
	} else if req, err = decodeExec(r.Body); err != nil {
		return err
	}
	// The request's context ends with the client: a client that hangs up
	// stops its command.
	ctx := r.Context()
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	argv := req.args()
	sb, grant, err := h.execSandbox(req)
	if err != nil {
		return err
	}
	if sb != h.sb {
		defer sb.Close()
	}
	cmd := sb.Command(ctx, argv[0], argv[1:]...)
	cmd.Dir = req.Cwd
	cmd.Env = req.env()
	cmd.Grant = grant
	cmd.Explain = req.Explain
	var streamed *sharedReader
	switch {
	case stdin != nil:
		streamed = &sharedReader{r: stdin}
		cmd.Stdin = streamed
	case req.Stdin != "":
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	cmd.WaitDelay = h.opts.WaitDelay
	st := &stream{w: w, rc: http.NewResponseController(w), published: sb.Published()}
	stdout, stderr := &chunker{st: st, name: "stdout"}, &chunker{st: st, name: "stderr"}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Start()
	var (
		pe   *runtime.PolicyError
		perm *runtime.PermissionError
	)
	switch {
	case st.begun():
	case errors.As(err, &perm):
		// A grant beyond the ceiling: nothing ran.
		return req.refused(perm)
	case errors.As(err, &pe):
		// The request's fault (a cwd outside the workspace, a refused
		// variable): nothing ran, so it is a 400, not a result.
		return err
	}
	if err == nil {
		// The command runs: a client streaming stdin sends it from now.
		st.event(Event{Type: "started"})
		err = cmd.Wait()
		stdout.flush()
		stderr.flush()
	}
	ev := Event{Type: "result", Result: cmd.Result}
	status := runtime.ExitStatus(cmd.Result, err)
	ev.ExitStatus = &status
	if err != nil && !errors.As(err, new(*runtime.ExitError)) {
		// An exit status or a kill is the Result's to say; this is
		// a command that did not start, or output that was lost.
		ev.Error = strings.TrimPrefix(err.Error(), "hutch: ")
	}
	// The result is the response's last line. When nothing is left to
	// do, it is not flushed on its own: net/http writes it with the
	// response's end once the handler returns, in one write, so a client
	// reading the result finds the end there already, without a wakeup
	// more (and the server makes a write less).
	last := streamed == nil && sb == h.sb
	if err := st.write(ev, !last); err != nil {
		h.opts.Logger.Debug("hutch serve: result not sent", "err", err)
	}
	if streamed != nil {
		// The command may have ended without reading all of its
		// stdin. Closed on unread data, the connection would fail the
		// client's writes (EPIPE), and a client that then drops the
		// exchange (Node's http) loses the result it was sent: what is
		// left is read and dropped, for a bounded time.
		_ = st.rc.SetReadDeadline(time.Now().Add(stdinDrainTime))
		streamed.drain()
	}
	return nil
}

// execSandbox is the Sandbox an exec runs in, and the grant its command
// asks for: the server's, or, for a request that publishes ports, a
// Sandbox of its own for this call (the server's policy with the grant
// and the ports), which the caller closes.
func (h *Handler) execSandbox(req *ExecRequest) (*runtime.Sandbox, runtime.Grant, error) {
	pub, err := req.published()
	if err != nil {
		return nil, runtime.Grant{}, err
	}
	reach, err := h.reaches(req.Reach)
	if err != nil || len(pub)+len(reach) == 0 {
		return h.sb, req.grant(), err
	}
	pol, err := h.sb.PolicyWith(req.grant())
	var perm *runtime.PermissionError
	if errors.As(err, &perm) {
		return nil, runtime.Grant{}, req.refused(perm)
	}
	if err != nil {
		return nil, runtime.Grant{}, err
	}
	// One command: no pool of inits kept ready for more.
	pol.Publish, pol.Reach, pol.Prewarm = pub, reach, 0
	sb, err := runtime.New(pol)
	return sb, runtime.Grant{}, err
}

// reaches resolves an exec's reach values through the durable processes
// the server keeps: each leads to the host port its process publishes.
func (h *Handler) reaches(values []string) ([]runtime.Reach, error) {
	var out []runtime.Reach
	for _, v := range values {
		id, port, err := reachID(v)
		if err != nil {
			return nil, err
		}
		if h.opts.Processes == nil {
			return nil, badRequest("reach", fmt.Sprintf("%q: this server keeps no durable processes", v))
		}
		p, err := h.opts.Processes.Get(id)
		if err == nil {
			var r runtime.Reach
			if r, err = p.Reach(port); err == nil {
				out = append(out, r)
				continue
			}
		}
		return nil, badRequest("reach", fmt.Sprintf("%q: %v", v, err))
	}
	return out, nil
}

// stdinDrainTime bounds how long an exec's connection reads a stdin
// the command left unread, after the result or a refusal: a client that
// never ends its stdin has the response's end that much later.
const stdinDrainTime = 2 * time.Second

// sharedReader is a streamed stdin, read by the command's copier while
// the command runs, then drained by the handler: one reader at a time.
type sharedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (s *sharedReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Read(p)
}

// drain reads s to its end, or to an error (the read deadline), and
// drops what it reads.
func (s *sharedReader) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.Copy(io.Discard, s.r)
}

// stream writes an exec response's events, one JSON line each, flushed
// at once: a client sees output as the command makes it.
type stream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	rc    *http.ResponseController
	begin bool
	// started: the "started" event is out. Output can reach the stream
	// before Start has returned; "started" goes before it all the same.
	started bool
	// published goes in the "started" event (Event.Published).
	published []runtime.Publish
	err       error // the first write error: the client is gone
}

func (s *stream) begun() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begin
}

func (s *stream) event(ev Event) error { return s.write(ev, true) }

// write writes ev, and flushes it when flush is set.
func (s *stream) write(ev Event, flush bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if !s.begin {
		s.begin = true
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.WriteHeader(http.StatusOK)
	}
	var out []byte
	switch {
	case ev.Type == "started" && s.started:
		return nil // said already, before the first output
	case ev.Type == "started", ev.Type == "stdout", ev.Type == "stderr":
		if !s.started {
			s.started = true
			b, err := json.Marshal(Event{Type: "started", Published: s.published})
			if err != nil {
				s.err = err
				return err
			}
			out = append(append(out, b...), '\n')
		}
	}
	if ev.Type != "started" {
		b, err := json.Marshal(ev)
		if err != nil {
			s.err = err
			return err
		}
		out = append(append(out, b...), '\n')
	}
	_, err := s.w.Write(out)
	if err == nil && flush {
		err = s.rc.Flush()
	}
	s.err = err
	return err
}

// chunker turns one output stream into events. A chunk is sent as text
// when it is UTF-8; a character cut by the end of a chunk waits for the
// rest, so that text split by a pipe's buffer is never sent as base64.
type chunker struct {
	st      *stream
	name    string
	pending []byte // at most 3 bytes: the start of a cut character
}

func (c *chunker) Write(p []byte) (int, error) {
	buf := append(c.pending[:len(c.pending):len(c.pending)], p...)
	cut := len(buf) - partialRune(buf)
	if !utf8.Valid(buf[:cut]) {
		cut = len(buf)
	}
	c.pending = slices.Clone(buf[cut:])
	if cut == 0 {
		return len(p), nil
	}
	return len(p), c.send(buf[:cut])
}

// flush sends what is pending once the stream has ended.
func (c *chunker) flush() {
	if len(c.pending) > 0 {
		c.send(c.pending)
		c.pending = nil
	}
}

func (c *chunker) send(b []byte) error {
	if utf8.Valid(b) {
		return c.st.event(Event{Type: c.name, Data: string(b)})
	}
	return c.st.event(Event{Type: c.name, Data: base64.StdEncoding.EncodeToString(b), Base64: true})
}

// partialRune is the length of the start of a UTF-8 character that b
// ends with, unfinished; 0 when b ends on a whole one (or on bytes that
// are no UTF-8 at all).
func partialRune(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

func (h *Handler) read(w http.ResponseWriter, r *http.Request) error {
	var req ReadRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return badRequest("path", "missing")
	}
	c, err := h.sb.ReadFile(req.Path, runtime.ReadOptions{Offset: req.Offset, Limit: req.Limit, Mode: runtime.ReadMode(req.Mode), NoFollow: req.NoFollow})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request) error {
	req, data, err := decodeWrite(r.Body)
	if err != nil {
		return err
	}
	var perm fs.FileMode
	if req.Perm != "" {
		if perm, err = units.ParsePerm(req.Perm); err != nil {
			return badRequest("perm", err.Error())
		}
	}
	fi, err := h.sb.WriteFile(req.Path, data, runtime.WriteOptions{Append: req.Append, Perm: perm, NoFollow: req.NoFollow})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

func (h *Handler) stat(w http.ResponseWriter, r *http.Request) error {
	return h.onPath(w, r, "", func(p string) (any, error) { return h.sb.Stat(p) })
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	return h.onPath(w, r, ".", func(p string) (any, error) {
		entries, err := h.sb.ReadDir(p)
		return ListResponse{Entries: entries}, err
	})
}

// explain answers which rule decides a path for an access
// (runtime.Sandbox.Explain): nothing is run or tried.
func (h *Handler) explain(w http.ResponseWriter, r *http.Request) error {
	var req ExplainRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return badRequest("path", "missing")
	}
	access := runtime.AccessRead
	if req.Access != "" {
		a, err := runtime.ParseAccess(req.Access)
		if err != nil {
			return badRequest("access", strconv.Quote(req.Access)+": not read, write or execute")
		}
		access = a
	}
	x, err := h.sb.Explain(req.Path, access)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

// onPath serves a request that is a path alone: it decodes the path
// (missing, it is def; with no def, a 400), and answers with what do
// returns for it.
func (h *Handler) onPath(w http.ResponseWriter, r *http.Request, def string, do func(string) (any, error)) error {
	var req PathRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if req.Path == "" && def == "" {
		return badRequest("path", "missing")
	}
	if req.Path == "" {
		req.Path = def // "." is the workspace
	}
	v, err := do(req.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
