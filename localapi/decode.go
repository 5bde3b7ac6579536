package localapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ExecRequest is the body of POST /v1/exec: exactly one of Argv and
// Command (run as sh -c COMMAND).
type ExecRequest struct {
	Argv    []string          `json:"argv,omitempty"`
	Command *string           `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Stdin   string            `json:"stdin,omitempty"`
	// TimeoutMS stops the command after this many milliseconds (SIGTERM
	// to its process group, SIGKILL of the sandbox after the server's
	// --kill-after); 0 means the server's policy alone.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
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

// decode reads one JSON object from body into v, strictly: an unknown
// field, a wrong type or anything after the object is refused with an
// *Error naming the field, so that a client's typo is never silently
// ignored (a misspelled "timeout_ms" would otherwise run unbounded).
func decode(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
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
		return badRequest(typ.Field, fmt.Sprintf("a JSON %s: want %s", typ.Value, jsonKind(typ.Type.Kind().String())))
	}
	// encoding/json has no type for an unknown field; its message is
	// `json: unknown field "name"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest(strings.Trim(name, `"`), "unknown field")
	}
	return badRequest("", err.Error())
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
	switch {
	case req.Argv != nil && req.Command != nil:
		return nil, badRequest("command", "give argv or command, not both")
	case req.Argv == nil && req.Command == nil:
		return nil, badRequest("argv", "missing: give argv (an array) or command (a shell string)")
	case req.Command != nil && *req.Command == "":
		return nil, badRequest("command", "empty")
	case req.Argv != nil && len(req.Argv) == 0:
		return nil, badRequest("argv", "empty")
	case req.Argv != nil && req.Argv[0] == "":
		return nil, badRequest("argv", `argv[0] is ""`)
	case req.TimeoutMS < 0:
		return nil, badRequest("timeout_ms", fmt.Sprintf("%d: negative (0 means the server's policy alone)", req.TimeoutMS))
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, badRequest("env", fmt.Sprintf("%q: not a variable name", k))
		}
	}
	return &req, nil
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
