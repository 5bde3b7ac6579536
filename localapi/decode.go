package localapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hutchbox/hutch/runtime"
)

// CommandRequest is what runs, in POST /v1/exec and
// /v1/processes/start: exactly one of Argv and Command (run as sh -c
// COMMAND), and what the call is granted beyond the server's policy.
type CommandRequest struct {
	Argv    []string          `json:"argv,omitempty"`
	Command *string           `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// AllowedDomains opens the network, through hutch's egress proxy, to
	// these domains ("example.com", "*.example.com", "*" for any);
	// omitted or empty, the call gets no network beyond the server's
	// policy. PackageManagers do the same for registries' presets
	// (python, node...). Grant names further permission tags
	// (runtime.ParseGrant). Each must lie within the server's
	// --grantable ceiling, or the call is refused (403 not_permitted).
	AllowedDomains  []string `json:"allowed_domains,omitempty"`
	PackageManagers []string `json:"package_managers,omitempty"`
	Grant           []string `json:"grant,omitempty"`
	// Publish are ports of the command's sandbox reachable from the host,
	// each "[HOST_IP:]HOST_PORT:PORT[/tcp]" as hutch run --publish reads
	// it (runtime.Publish): HOST_PORT 0 picks a free port, which the
	// answer reports. Through the API only loopback host addresses are
	// accepted: a client never opens the host's other interfaces.
	Publish []string `json:"publish,omitempty"`
}

// ExecRequest is the body of POST /v1/exec.
type ExecRequest struct {
	CommandRequest
	// Reach are "ID:PORT": the command's 127.0.0.1:PORT leads to the
	// durable process ID's port PORT, which it publishes, as hutch run
	// --reach does (runtime.Reach); nothing else of the network opens.
	Reach []string `json:"reach,omitempty"`
	Stdin string   `json:"stdin,omitempty"`
	// TimeoutMS stops the command after this many milliseconds (SIGTERM
	// to its process group, SIGKILL of the sandbox after the server's
	// --kill-after); 0 means the server's policy alone.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Explain appends to the command's stderr, after its own output, a
	// few lines naming what it was refused, by which rule, and how to
	// allow each (runtime.Cmd.Explain); the result's denials hold them
	// either way.
	Explain bool `json:"explain,omitempty"`
}

// ProcessStartRequest is the body of POST /v1/processes/start: a
// durable process (package processes) in the server's policy.
type ProcessStartRequest struct {
	CommandRequest
	Name string `json:"name,omitempty"`
	// Restart is always (the default), on-failure or never.
	Restart string `json:"restart,omitempty"`
	// Explain appends to the process's log, at the end of each run, a
	// few lines naming what the run was refused, by which rule, and how
	// to allow each (Policy.Explain); the record's runs hold them either
	// way.
	Explain bool `json:"explain,omitempty"`
}

// ProcessRequest is the body of the routes on one durable process.
type ProcessRequest struct {
	ID string `json:"id"`
}

// ProcessLogsRequest is the body of POST /v1/processes/logs.
type ProcessLogsRequest struct {
	ID string `json:"id"`
	// TailBytes keeps the log's last bytes only (0: all of it).
	TailBytes int64 `json:"tail_bytes,omitempty"`
}

// ReadRequest is the body of POST /v1/files/read, runtime.ReadOptions
// in JSON.
type ReadRequest struct {
	Path     string `json:"path"`
	Offset   int64  `json:"offset,omitempty"`
	Limit    int64  `json:"limit,omitempty"`
	Mode     string `json:"mode,omitempty"`
	NoFollow bool   `json:"no_follow,omitempty"`
}

// WriteRequest is the body of POST /v1/files/write: exactly one of
// Content (text) and ContentBase64.
type WriteRequest struct {
	Path          string  `json:"path"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 *string `json:"content_base64,omitempty"`
	Append        bool    `json:"append,omitempty"`
	// Perm is the octal mode of a file the write creates ("644").
	Perm     string `json:"perm,omitempty"`
	NoFollow bool   `json:"no_follow,omitempty"`
}

// PathRequest is the body of POST /v1/files/stat and /v1/files/list.
type PathRequest struct {
	Path string `json:"path"`
}

// ExplainRequest is the body of POST /v1/explain: a path as a command
// would name it (absolute, or relative to the workspace) and the access
// to explain, "read" (the default) or "write".
type ExplainRequest struct {
	Path   string `json:"path"`
	Access string `json:"access,omitempty"`
}

// decode reads one JSON object from body into v, strictly: an unknown
// field, a wrong type or anything after the object is refused with an
// *Error naming the field, so that a client's typo is never silently
// ignored (a misspelled "timeout_ms" would otherwise run unbounded).
func decode(body io.Reader, v any) error {
	b, err := readAll(body)
	if err != nil {
		return bodyError(err)
	}
	if err := strictKeys(b, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return bodyError(err)
		}
		return badRequest("", "the body holds more than one JSON value")
	}
	return nil
}

// bodyError says what was wrong with a body encoding/json refused.
func bodyError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)}
	case errors.Is(err, io.EOF):
		return badRequest("", "the body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the body ends inside its JSON object")
	case errors.As(err, &syn):
		return badRequest("", fmt.Sprintf("not JSON at byte %d: %s", syn.Offset, syn.Error()))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("", fmt.Sprintf("the body is a JSON %s: want an object", typ.Value))
		}
		return badRequest(jsonPath(typ.Field), fmt.Sprintf("a JSON %s: want %s", typ.Value, jsonKind(typ.Type.Kind().String())))
	}
	// encoding/json has no type for an unknown field; its message is
	// `json: unknown field "name"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest(strings.Trim(name, `"`), "unknown field")
	}
	return badRequest("", err.Error())
}

// jsonPath is a field's path as the request spells it: encoding/json
// names the field of an embedded struct through the struct's Go name
// (CommandRequest.argv), which no request holds; every key of the
// protocol is lower case.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	parts = slices.DeleteFunc(parts, func(p string) bool { return p != "" && unicode.IsUpper(rune(p[0])) })
	return strings.Join(parts, ".")
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "bool":
		return "true or false"
	case "int64", "int", "uint32":
		return "a whole number"
	}
	return k
}

// decodeExec reads and checks an exec request.
func decodeExec(body io.Reader) (*ExecRequest, error) {
	var req ExecRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

// check checks an exec request.
func (r *ExecRequest) check() error {
	if err := r.CommandRequest.check(); err != nil {
		return err
	}
	if r.TimeoutMS < 0 {
		return badRequest("timeout_ms", fmt.Sprintf("%d: negative (0 means the server's policy alone)", r.TimeoutMS))
	}
	if r.TimeoutMS > maxTimeoutMS {
		return badRequest("timeout_ms", fmt.Sprintf("%d: more than %d, the most a timeout can be (about 292 years; 0 means the server's policy alone)", r.TimeoutMS, maxTimeoutMS))
	}
	return nil
}

// maxTimeoutMS is the longest time.Duration in milliseconds: past it the
// conversion would wrap.
const maxTimeoutMS = math.MaxInt64 / int64(time.Millisecond)

// decodeExecStream reads and checks the request that starts a body
// whose rest is the command's stdin (StdinHeader), and returns that rest.
func decodeExecStream(body io.Reader, max int64) (*ExecRequest, io.Reader, error) {
	var req ExecRequest
	var raw json.RawMessage
	dec := json.NewDecoder(body)
	err := dec.Decode(&raw)
	if err == nil {
		err = strictKeys(raw, &req)
	}
	if err == nil {
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		err = strict.Decode(&req)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		var e *Error
		switch {
		case errors.As(err, &e):
			return nil, nil, err
		case errors.As(err, &mbe):
			mbe.Limit = max
		}
		return nil, nil, bodyError(err)
	}
	if err := req.check(); err != nil {
		return nil, nil, err
	}
	if req.Stdin != "" {
		return nil, nil, badRequest("stdin", "given with "+StdinHeader+": stream: the body after the request is the stdin")
	}
	return &req, io.MultiReader(dec.Buffered(), body), nil
}

// check checks what runs.
func (c *CommandRequest) check() error {
	switch {
	case c.Argv != nil && c.Command != nil:
		return badRequest("command", "give argv or command, not both")
	case c.Argv == nil && c.Command == nil:
		return badRequest("argv", "missing: give argv (an array) or command (a shell string)")
	case c.Command != nil && *c.Command == "":
		return badRequest("command", "empty")
	case c.Argv != nil && len(c.Argv) == 0:
		return badRequest("argv", "empty")
	case c.Argv != nil && c.Argv[0] == "":
		return badRequest("argv", `argv[0] is ""`)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return badRequest("env", fmt.Sprintf("%q: not a variable name", k))
		}
	}
	for _, f := range []struct {
		name string
		vs   []string
	}{{"allowed_domains", c.AllowedDomains}, {"package_managers", c.PackageManagers}} {
		for _, v := range f.vs {
			if v == "" {
				return badRequest(f.name, "an empty name")
			}
		}
	}
	if _, err := runtime.ParseGrant(c.Grant); err != nil {
		return badRequest("grant", err.Error())
	}
	_, err := c.published()
	return err
}

// published is Publish parsed, or a bad request naming the value.
func (c *CommandRequest) published() ([]runtime.Publish, error) {
	var out []runtime.Publish
	for _, s := range c.Publish {
		p, err := runtime.ParsePublish(s)
		var pe *runtime.PolicyError
		if errors.As(err, &pe) {
			return nil, badRequest("publish", fmt.Sprintf("%q: %s", s, pe.Reason))
		}
		if p.HostIP != "" {
			if a, err := netip.ParseAddr(p.HostIP); err != nil || !a.IsLoopback() {
				return nil, badRequest("publish", fmt.Sprintf("%q: host address %s is not loopback (the local API publishes on loopback only)", s, p.HostIP))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// args is the command's argv.
func (c *CommandRequest) args() []string {
	if c.Command != nil {
		return []string{"sh", "-c", *c.Command}
	}
	return c.Argv
}

// env is Env as NAME=VALUE, sorted.
func (c *CommandRequest) env() []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, k+"="+c.Env[k])
	}
	return env
}

// grant is what the call asks for beyond the server's policy: its
// permission tags, with a domain:NAME for each of AllowedDomains and a
// package-manager:NAME for each of PackageManagers (which bring the
// network with them, as runtime.ParseGrant reads them).
func (c *CommandRequest) grant() runtime.Grant {
	tags := slices.Clone(c.Grant)
	for _, d := range c.AllowedDomains {
		tags = append(tags, "domain:"+d)
	}
	for _, pm := range c.PackageManagers {
		tags = append(tags, "package-manager:"+pm)
	}
	g, _ := runtime.ParseGrant(tags) // checked by check
	return g
}

// refused says a grant the server's ceiling does not cover in the
// request's words: the field that asked for the tag.
func (c *CommandRequest) refused(pe *runtime.PermissionError) *Error {
	field := "grant"
	kind, arg, _ := strings.Cut(pe.Tag, ":")
	switch {
	case kind == "domain" && slices.Contains(c.AllowedDomains, arg),
		pe.Tag == "@network" && len(c.AllowedDomains) > 0 && !slices.Contains(c.Grant, "@network"):
		field = "allowed_domains"
	case kind == "package-manager" && slices.Contains(c.PackageManagers, arg),
		pe.Tag == "@network" && len(c.PackageManagers) > 0 && !slices.Contains(c.Grant, "@network"):
		field = "package_managers"
	}
	return &Error{Status: http.StatusForbidden, Code: "not_permitted", Field: field,
		Message: strings.TrimPrefix(pe.Error(), "hutch: ") + " (the server's --grantable ceiling)"}
}

// decodeWrite reads and checks a write request, and returns the data.
func decodeWrite(body io.Reader) (*WriteRequest, []byte, error) {
	var req WriteRequest
	if err := decode(body, &req); err != nil {
		return nil, nil, err
	}
	switch {
	case req.Path == "":
		return nil, nil, badRequest("path", "missing")
	case req.Content != nil && req.ContentBase64 != nil:
		return nil, nil, badRequest("content_base64", "give content or content_base64, not both")
	case req.Content != nil:
		return &req, []byte(*req.Content), nil
	case req.ContentBase64 != nil:
		data, err := base64.StdEncoding.DecodeString(*req.ContentBase64)
		if err != nil {
			return nil, nil, badRequest("content_base64", "not standard base64: "+err.Error())
		}
		return &req, data, nil
	}
	return nil, nil, badRequest("content", "missing: give content (text) or content_base64")
}

// reachID is one Reach value cut into the process's id and its port, or
// a bad request naming the value.
func reachID(v string) (string, int, error) {
	id, portText, ok := strings.Cut(v, ":")
	port, err := strconv.Atoi(portText)
	if !ok || id == "" || err != nil || port < 1 || port > 65535 {
		return "", 0, badRequest("reach", fmt.Sprintf("%q: not ID:PORT (a durable process's id and a port it publishes)", v))
	}
	return id, port, nil
}
