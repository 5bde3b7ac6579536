package localapi

import (
	"net/http"

	"github.com/hutchbox/hutch/approvals"
)

// DecideRequest is the body of POST /v1/approvals/decide: the tool call
// to judge, as hutch grants decide's flags say it (approvals.Call).
type DecideRequest struct {
	Tool      string `json:"tool"`
	Agent     string `json:"agent,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Arg is the call's argument: a shell tool's command line, judged
	// command by command, or a file tool's path.
	Arg string `json:"arg,omitempty"`
}

// approvalRoutes are the routes of Options.Approvals: read-only, by
// design (see Options.Approvals).
func (h *Handler) approvalRoutes() map[string]route {
	return map[string]route{
		"/v1/approvals/decide": {http.MethodPost, h.decide},
		"/v1/approvals/rules":  {http.MethodGet, h.rules},
	}
}

// decide answers the Verdict hutch grants decide prints for the same
// call: a prompt comes back as it is, for the caller to put to the user.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) error {
	var req DecideRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if req.Tool == "" {
		return badRequest("tool", "missing: the tool called (bash, read_file...; GET /v1/approvals/rules lists those with a rule)")
	}
	v, err := h.opts.Approvals.Lookup(approvals.Call{Tool: req.Tool, Agent: req.Agent, Workspace: req.Workspace, Arg: req.Arg})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// rules answers the tools' rules in effect, the rows hutch grants rules
// --json prints.
func (h *Handler) rules(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, RulesResponse{Rules: approvals.RuleRows(h.opts.Approvals.Rules)})
	return nil
}
