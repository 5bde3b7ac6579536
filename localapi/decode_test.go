package localapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// badExec are exec bodies the decoder refuses, with the field it names.
var badExec = []struct {
	name, body, field string
}{
	{"empty body", ``, ""},
	{"not JSON", `argv=ls`, ""},
	{"cut short", `{"argv":["ls"`, ""},
	{"an array", `["ls"]`, ""},
	{"a string", `"ls"`, ""},
	{"two objects", `{"argv":["ls"]}{"argv":["ls"]}`, ""},
	{"unknown field", `{"argv":["ls"],"timeout":5}`, "timeout"},
	{"argv a string", `{"argv":"ls -l"}`, "argv"},
	{"argv of numbers", `{"argv":[1,2]}`, "argv"},
	{"command a number", `{"command":5}`, "command"},
	{"timeout a string", `{"command":"ls","timeout_ms":"5"}`, "timeout_ms"},
	{"timeout fractional", `{"command":"ls","timeout_ms":1.5}`, "timeout_ms"},
	{"timeout negative", `{"command":"ls","timeout_ms":-1}`, "timeout_ms"},
	{"explain a string", `{"command":"ls","explain":"yes"}`, "explain"},
	{"env an array", `{"command":"ls","env":["A=1"]}`, "env"},
	{"env value a number", `{"command":"ls","env":{"A":1}}`, "env"},
	{"env key with =", `{"command":"ls","env":{"A=B":"1"}}`, "env"},
	{"env key empty", `{"command":"ls","env":{"":"1"}}`, "env"},
	{"stdin a number", `{"command":"ls","stdin":1}`, "stdin"},
	{"missing argv and command", `{"cwd":"."}`, "argv"},
	{"null", `null`, "argv"},
	{"both", `{"argv":["ls"],"command":"ls"}`, "command"},
	{"argv empty", `{"argv":[]}`, "argv"},
	{"argv[0] empty", `{"argv":[""]}`, "argv"},
	{"command empty", `{"command":""}`, "command"},
	// Strict as documented (issue 41): exact, case-sensitive keys, none
	// twice, and numbers within their type's range.
	{"a key twice", `{"argv":["true"],"argv":["rm","-rf","x"]}`, "argv"},
	{"a key in another case", `{"argv":["true"],"Argv":["rm","-rf","x"]}`, "Argv"},
	{"a key in another case alone", `{"Command":"ls"}`, "Command"},
	{"an env variable twice", `{"command":"ls","env":{"A":"1","A":"2"}}`, "env.A"},
	{"timeout of 2^63 ms", `{"command":"ls","timeout_ms":9223372036854775807}`, "timeout_ms"},
	{"timeout past a Duration", `{"command":"ls","timeout_ms":9223372036855}`, "timeout_ms"},
	{"publish not a port", `{"command":"ls","publish":["abc"]}`, "publish"},
	{"publish out of range", `{"command":"ls","publish":["99999:80"]}`, "publish"},
	{"publish off loopback", `{"command":"ls","publish":["0.0.0.0:0:80"]}`, "publish"},
	{"publish a string", `{"command":"ls","publish":"0:80"}`, "publish"},
}

func TestDecodeExecRefuses(t *testing.T) {
	for _, tt := range badExec {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeExec(strings.NewReader(tt.body))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("decodeExec(%q) = %v, want an *Error", tt.body, err)
			}
			if e.Status != http.StatusBadRequest || e.Field != tt.field || e.Message == "" {
				t.Errorf("decodeExec(%q) = %d field %q %q, want 400 naming %q", tt.body, e.Status, e.Field, e.Message, tt.field)
			}
		})
	}
}

func TestDecodeExecAccepts(t *testing.T) {
	req, err := decodeExec(strings.NewReader(`{"command":"ls","cwd":"sub","env":{"A":"1"},"stdin":"x","timeout_ms":1500} `))
	if err != nil {
		t.Fatal(err)
	}
	if *req.Command != "ls" || req.Cwd != "sub" || req.Env["A"] != "1" || req.Stdin != "x" || req.TimeoutMS != 1500 {
		t.Errorf("decoded %+v", req)
	}
}

func TestDecodeWrite(t *testing.T) {
	for _, tt := range []struct {
		body, field, data string
	}{
		{`{"path":"/w/a","content":""}`, "", ""},
		{`{"path":"/w/a","content_base64":"aGk="}`, "", "hi"},
		{`{"path":"/w/a"}`, "content", ""},
		{`{"content":"x"}`, "path", ""},
		{`{"path":"/w/a","content":"x","content_base64":"eA=="}`, "content_base64", ""},
		{`{"path":"/w/a","content_base64":"not base64!"}`, "content_base64", ""},
		{`{"path":"/w/a","content":"x","mode":"644"}`, "mode", ""},
	} {
		_, data, err := decodeWrite(strings.NewReader(tt.body))
		var e *Error
		switch {
		case tt.field == "" && (err != nil || string(data) != tt.data):
			t.Errorf("decodeWrite(%s) = %q, %v; want %q", tt.body, data, err, tt.data)
		case tt.field != "" && (!errors.As(err, &e) || e.Status != 400 || e.Field != tt.field):
			t.Errorf("decodeWrite(%s) = %v, want a 400 naming %q", tt.body, err, tt.field)
		}
	}
}

// TestBodyTooLarge: a body past Options.MaxBody is a 413, read no further.
func TestBodyTooLarge(t *testing.T) {
	h := NewHandler(nil, Options{MaxBody: 64})
	body := `{"command":"` + strings.Repeat("x", 100) + `"}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/exec", strings.NewReader(body)))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"too_large"`) {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}

// TestRoutes: an unknown path or a wrong method is a JSON error, before any
// Sandbox is touched (there is none here).
func TestRoutes(t *testing.T) {
	h := NewHandler(nil, Options{})
	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/", 404, "not_found"},
		{"GET", "/v2/health", 404, "not_found"},
		{"POST", "/v1/health", 405, "method_not_allowed"},
		{"GET", "/v1/exec", 405, "method_not_allowed"},
		{"POST", "/v1/exec", 400, "bad_request"},
		{"POST", "/v1/files/read", 400, "bad_request"},
		{"POST", "/v1/files/write", 400, "bad_request"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader("{")))
		var body struct{ Error *Error }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == nil {
			t.Errorf("%s %s: body %q is no JSON error", tt.method, tt.path, rec.Body)
			continue
		}
		if rec.Code != tt.status || body.Error.Code != tt.code {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, rec.Code, body.Error.Code, tt.status, tt.code)
		}
	}
}

// FuzzDecodeExec: whatever the body, the decoders return either a request
// that holds what the handler relies on (exactly one of argv and command,
// neither empty, no negative timeout) or a 400 (or 413) *Error, which
// encodes as the API's error; never a panic. The seeds run in every go test.
func FuzzDecodeExec(f *testing.F) {
	for _, tt := range badExec {
		f.Add([]byte(tt.body))
	}
	for _, s := range []string{
		`{"argv":["ls","-l"],"cwd":".","env":{"A":"b"},"stdin":"in","timeout_ms":10}`,
		`{"command":"echo \u00e9"}`, "{\"command\":\"\xff\"}", `{"argv":["a"],"argv":["b"]}`,
		`{"ARGV":["ls"]}`, `{"argv":null,"command":null}`, `{"timeout_ms":1e400,"command":"x"}`,
		`{"path":"/a","content_base64":"===="}`, `{"path":"a","offset":-1,"limit":"2"}`,
		"\x00", "{\"argv\":[\"\\u0000\"]}", strings.Repeat("[", 10000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) || (e.Status != 400 && e.Status != 413) || e.Message == "" {
				t.Fatalf("%s(%q) = %#v, want a 400 *Error", what, body, err)
			}
			rec := httptest.NewRecorder()
			writeError(rec, e)
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s(%q): error body %q is not JSON", what, body, rec.Body)
			}
		}
		req, err := decodeExec(strings.NewReader(string(body)))
		check("decodeExec", err)
		if err == nil {
			if (req.Argv == nil) == (req.Command == nil) || req.Argv != nil && (len(req.Argv) == 0 || req.Argv[0] == "") ||
				req.Command != nil && *req.Command == "" || req.TimeoutMS < 0 {
				t.Fatalf("decodeExec(%q) accepted %+v", body, req)
			}
		}
		// Streamed, whatever follows the object is stdin: an object
		// decodeExec takes whole is taken the same, with no stdin left.
		sreq, rest, serr := decodeExecStream(strings.NewReader(string(body)), DefaultMaxBody)
		check("decodeExecStream", serr)
		if err == nil && req.Stdin == "" {
			if serr != nil || !reflect.DeepEqual(sreq, req) {
				t.Fatalf("decodeExecStream(%q) = %+v, %v; decodeExec %+v", body, sreq, serr, req)
			}
			if b, _ := io.ReadAll(rest); len(bytes.TrimSpace(b)) > 0 {
				t.Fatalf("decodeExecStream(%q): stdin %q after an object decodeExec took whole", body, b)
			}
		}
		_, _, err = decodeWrite(strings.NewReader(string(body)))
		check("decodeWrite", err)
		check("decode ReadRequest", decode(strings.NewReader(string(body)), new(ReadRequest)))
	})
}
