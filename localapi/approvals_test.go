package localapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/approvals"
)

// serveApprovals sends method path body to a Handler with opts and
// returns the status and the body.
func serveApprovals(opts Options, method, path, body string) (int, []byte) {
	rec := httptest.NewRecorder()
	NewHandler(nil, opts).ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.Bytes()
}

// TestDecideRefuses: a decide body is decoded as strictly as the other
// routes', and a call without a tool is refused, each a 400 naming the
// field at fault, before the engine is asked.
func TestDecideRefuses(t *testing.T) {
	opts := Options{Approvals: &approvals.Engine{}}
	for _, tt := range []struct {
		name, body, field string
	}{
		{"empty body", ``, ""},
		{"not JSON", `tool=bash`, ""},
		{"cut short", `{"tool":"bash"`, ""},
		{"an array", `["bash"]`, ""},
		{"two objects", `{"tool":"bash"}{"tool":"bash"}`, ""},
		{"unknown field", `{"tool":"bash","command":"ls"}`, "command"},
		{"a grant's field", `{"tool":"bash","arg":"ls","decision":"allow"}`, "decision"},
		{"a key in another case", `{"tool":"bash","Arg":"ls"}`, "Arg"},
		{"a key twice", `{"tool":"bash","arg":"ls","arg":"rm -rf ~"}`, "arg"},
		{"tool a number", `{"tool":1}`, "tool"},
		{"arg an array", `{"tool":"bash","arg":["ls"]}`, "arg"},
		{"agent a bool", `{"tool":"bash","agent":true}`, "agent"},
		{"workspace an object", `{"tool":"bash","workspace":{}}`, "workspace"},
		{"missing tool", `{"arg":"ls"}`, "tool"},
		{"empty tool", `{"tool":"","arg":"ls"}`, "tool"},
		{"null", `null`, "tool"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := serveApprovals(opts, "POST", "/v1/approvals/decide", tt.body)
			var resp ErrorResponse
			if err := json.Unmarshal(body, &resp); err != nil || resp.Error == nil {
				t.Fatalf("%s: %d %s is no JSON error", tt.body, status, body)
			}
			if e := resp.Error; status != http.StatusBadRequest || e.Code != "bad_request" || e.Field != tt.field || e.Message == "" {
				t.Errorf("%s: %d %+v, want 400 bad_request naming %q", tt.body, status, e, tt.field)
			}
		})
	}
}

// TestApprovalRoutes: the approvals routes are served only with an
// engine (or said unavailable with why), are read-only (no route keeps
// grants), and answer the engine's Verdict and rules.
func TestApprovalRoutes(t *testing.T) {
	for _, tt := range []struct {
		name         string
		opts         Options
		method, path string
		status       int
	}{
		{"no engine", Options{}, "POST", "/v1/approvals/decide", 404},
		{"no engine, rules", Options{}, "GET", "/v1/approvals/rules", 404},
		{"off", Options{ApprovalsOff: "no database"}, "GET", "/v1/approvals/rules", 503},
		{"decide is POST", Options{Approvals: &approvals.Engine{}}, "GET", "/v1/approvals/decide", 405},
		{"rules is GET", Options{Approvals: &approvals.Engine{}}, "POST", "/v1/approvals/rules", 405},
		{"no route adds grants", Options{Approvals: &approvals.Engine{}}, "POST", "/v1/approvals/grants", 404},
	} {
		if status, body := serveApprovals(tt.opts, tt.method, tt.path, "{}"); status != tt.status {
			t.Errorf("%s: %s %s = %d %s, want %d", tt.name, tt.method, tt.path, status, body, tt.status)
		}
	}
	for path := range NewHandler(nil, Options{Approvals: &approvals.Engine{}}).routes {
		if strings.HasPrefix(path, "/v1/approvals/") && path != "/v1/approvals/decide" && path != "/v1/approvals/rules" {
			t.Errorf("%s: the approvals routes are decide and rules alone (consent is not the agents' to write)", path)
		}
	}

	rules := approvals.DefaultRules()
	rules["deploy"] = approvals.Rule{Decision: approvals.Deny, Danger: approvals.DangerHigh}
	e := &approvals.Engine{Rules: rules}
	status, body := serveApprovals(Options{Approvals: e}, "POST", "/v1/approvals/decide", `{"tool":"deploy","agent":"a","workspace":"/w","arg":"prod"}`)
	var v approvals.Verdict
	want, _ := e.Lookup(approvals.Call{Tool: "deploy", Agent: "a", Workspace: "/w", Arg: "prod"})
	if status != 200 || json.Unmarshal(body, &v) != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("decide: %d %s, want the engine's %+v", status, body, want)
	}
	status, body = serveApprovals(Options{Approvals: e}, "GET", "/v1/approvals/rules", "")
	var rows RulesResponse
	if status != 200 || json.Unmarshal(body, &rows) != nil || !reflect.DeepEqual(rows.Rules, approvals.RuleRows(rules)) {
		t.Errorf("rules: %d %s, want approvals.RuleRows", status, body)
	}
}
