package localapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// Processes keeps durable processes for the API: a *processes.Manager
// (Linux) is one. The processes outlive the server; the next server over
// the same data directory lists and stops them.
type Processes interface {
	Start(context.Context, processes.Spec) (*processes.Process, error)
	List() ([]processes.Process, error)
	Get(id string) (processes.Process, error)
	Stop(ctx context.Context, id string) error
	StopAll(context.Context) error
	Log(id string) (io.ReadCloser, error)
	Remove(id string) error
}

// maxLog caps what POST /v1/processes/logs returns: a log takes at most
// twice its LogMaxBytes on disk (see processes.Spec), 8 MiB by default.
const maxLog = 16 << 20

// processRoutes are the durable-process routes, served when
// Options.Processes is set.
func (h *Handler) processRoutes() map[string]route {
	return map[string]route{
		"/v1/processes":          {http.MethodGet, h.listProcesses},
		"/v1/processes/start":    {http.MethodPost, h.startProcess},
		"/v1/processes/get":      {http.MethodPost, h.onProcess(func(_ context.Context, id string) (any, error) { return h.opts.Processes.Get(id) })},
		"/v1/processes/stop":     {http.MethodPost, h.onProcess(h.stopProcess)},
		"/v1/processes/stop-all": {http.MethodPost, h.stopAll},
		"/v1/processes/logs":     {http.MethodPost, h.processLogs},
		"/v1/processes/remove": {http.MethodPost, h.onProcess(func(_ context.Context, id string) (any, error) {
			return RemoveResponse{Removed: id}, h.opts.Processes.Remove(id)
		})},
	}
}

func (h *Handler) startProcess(w http.ResponseWriter, r *http.Request) error {
	var req ProcessStartRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	// The process builds its sandbox in its supervisor, from the policy
	// the server's commands run under, with the call's grant checked
	// against the same ceiling as an exec's.
	pol, err := h.sb.PolicyWith(req.grant())
	var perm *runtime.PermissionError
	if errors.As(err, &perm) {
		return req.refused(perm)
	}
	if err != nil {
		return err
	}
	if pol.Publish, err = req.published(); err != nil {
		return err
	}
	if req.Explain {
		if pol.Denials == runtime.DenialsOff {
			return badRequest("explain", "explains the recorded denials, and the server records none (--denials off)")
		}
		pol.Explain = true
	}
	spec := processes.Spec{Name: req.Name, Policy: pol, Args: req.args(), Dir: req.Cwd, Env: req.env(), Restart: processes.Restart(req.Restart), StopGrace: h.opts.WaitDelay}
	p, err := h.opts.Processes.Start(r.Context(), spec)
	var pe *runtime.PolicyError
	if errors.As(err, &pe) && pe.Field == "Spec.Restart" {
		return badRequest("restart", pe.Value+": "+pe.Reason)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (h *Handler) listProcesses(w http.ResponseWriter, _ *http.Request) error {
	l, err := h.opts.Processes.List()
	if err != nil {
		return err
	}
	if l == nil {
		l = []processes.Process{}
	}
	writeJSON(w, http.StatusOK, ProcessesResponse{Processes: l})
	return nil
}

func (h *Handler) stopProcess(ctx context.Context, id string) (any, error) {
	if err := h.opts.Processes.Stop(ctx, id); err != nil {
		return nil, err
	}
	return h.opts.Processes.Get(id)
}

func (h *Handler) stopAll(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	if err := h.opts.Processes.StopAll(r.Context()); err != nil {
		return err
	}
	return h.listProcesses(w, r)
}

func (h *Handler) processLogs(w http.ResponseWriter, r *http.Request) error {
	var req ProcessLogsRequest
	if err := decode(r.Body, &req); err != nil {
		return err
	}
	switch {
	case req.ID == "":
		return badRequest("id", "missing")
	case req.TailBytes < 0:
		return badRequest("tail_bytes", "negative (0 means all of the log)")
	}
	rc, err := h.opts.Processes.Log(req.ID)
	if err != nil {
		return err
	}
	defer rc.Close()
	keep := int64(maxLog)
	if req.TailBytes > 0 && req.TailBytes < keep {
		keep = req.TailBytes
	}
	data, truncated, err := tail(rc, keep)
	if err != nil {
		return err
	}
	out := LogsResponse{ID: req.ID, Length: len(data), Truncated: truncated}
	if utf8.Valid(data) {
		text := string(data)
		out.Content = &text
	} else {
		out.ContentBase64 = data
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// onProcess serves a request naming one process by its id.
func (h *Handler) onProcess(do func(context.Context, string) (any, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req ProcessRequest
		if err := decode(r.Body, &req); err != nil {
			return err
		}
		if req.ID == "" {
			return badRequest("id", "missing")
		}
		v, err := do(r.Context(), req.ID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
}

// tail reads r to its end and returns its last n bytes, and whether
// there were more before them. A cut that falls inside a UTF-8 character
// drops the rest of that character too (at most 3 bytes), so that a log
// of text stays text.
func tail(r io.Reader, n int64) ([]byte, bool, error) {
	buf := make([]byte, 0, min(n, 64<<10))
	chunk := make([]byte, 32<<10)
	truncated := false
	for {
		k, err := r.Read(chunk)
		buf = append(buf, chunk[:k]...)
		if over := int64(len(buf)) - n; over > 0 {
			buf = append(buf[:0], buf[over:]...)
			truncated = true
		}
		if err == io.EOF {
			if truncated {
				for i := 0; i < utf8.UTFMax-1 && len(buf) > 0 && !utf8.RuneStart(buf[0]); i++ {
					buf = buf[1:]
				}
			}
			return buf, truncated, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}
