package localapi

import (
	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// The answers of the routes that are not a runtime or processes type of
// their own. Each is a type, so that the OpenAPI description (OpenAPI)
// can be checked against what the handler writes.

// HealthResponse is the answer of GET /v1/health.
type HealthResponse struct {
	Status    string `json:"status"` // "ok"
	Workspace string `json:"workspace"`
	// Prewarmed is how many pooled inits are ready now.
	Prewarmed int `json:"prewarmed"`
}

// VersionResponse is the answer of GET /v1/version.
type VersionResponse struct {
	Protocol     int    `json:"protocol"` // ProtocolVersion
	HutchVersion string `json:"hutch_version"`
}

// ReloadResponse is the answer of POST /v1/policy/reload.
type ReloadResponse struct {
	Status    string `json:"status"` // "reloaded"
	Workspace string `json:"workspace"`
}

// ListResponse is the answer of POST /v1/files/list.
type ListResponse struct {
	Entries []runtime.FileInfo `json:"entries"`
}

// ProcessesResponse is the answer of GET /v1/processes and POST
// /v1/processes/stop-all.
type ProcessesResponse struct {
	Processes []processes.Process `json:"processes"`
}

// LogsResponse is the answer of POST /v1/processes/logs: exactly one of
// Content (the log is UTF-8 text) and ContentBase64.
type LogsResponse struct {
	ID            string  `json:"id"`
	Length        int     `json:"length"`
	Truncated     bool    `json:"truncated"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 []byte  `json:"content_base64,omitempty"`
}

// RulesResponse is the answer of GET /v1/approvals/rules: the rows hutch
// grants rules --json prints, sorted by tool.
type RulesResponse struct {
	Rules []approvals.RuleRow `json:"rules"`
}

// RemoveResponse is the answer of POST /v1/processes/remove.
type RemoveResponse struct {
	Removed string `json:"removed"`
}

// ErrorResponse is the body of every answer that is not a success.
type ErrorResponse struct {
	Error *Error `json:"error"`
}
