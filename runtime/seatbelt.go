package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchbox/hutch/darwin"
	"github.com/hutchbox/hutch/mounts"
)

// seatbeltPolicy validates p's paths as New does on Linux and maps them
// onto the macOS backend's policy, storing the resolved paths back in p.
// home is what "~" stands for. It is portable so that the mapping is
// tested where the tests run; only macOS uses it.
//
// It repeats the path and environment checks of the Linux validate, less
// those only namespaces need (kernel trees, hidden directories, host
// sockets): those checks live in a Linux-only file, interleaved with the
// mount plan. The environment's is the same function, checkEnv.
func seatbeltPolicy(p *Policy, home string) (darwin.Policy, error) {
	if p.Workspace == "" {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Reason: "required"}
	}
	if err := checkPath("Workspace", p.Workspace); err != nil {
		return darwin.Policy{}, err
	}
	if !filepath.IsAbs(p.Workspace) {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "must be an absolute path"}
	}
	ws, err := filepath.EvalSymlinks(p.Workspace)
	if err != nil {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "does not exist"}
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "not a directory"}
	}
	if ws == "/" {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "the whole host tree cannot be the workspace"}
	}
	if home == "" {
		// The keychains and privacy database under it could not be denied.
		return darwin.Policy{}, errors.New("hutch: no home directory ($HOME is not set)")
	}
	if mounts.Within(resolve(home, "/"), ws) {
		return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "contains the home directory " + home + "; use a project directory"}
	}
	p.Workspace = ws

	var deny []string
	if !p.NoDefaultDeny {
		for _, d := range DefaultDeny {
			if rest, ok := strings.CutPrefix(d, "~/"); ok {
				d = filepath.Join(home, rest)
			}
			deny = append(deny, resolve(d, ws))
		}
	}
	for i, d := range p.Deny {
		field := fmt.Sprintf("Deny[%d]", i)
		if err := checkPath(field, d); err != nil {
			return darwin.Policy{}, err
		}
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			d = filepath.Join(home, rest)
		}
		r := resolve(d, ws)
		if lex := lexical(d, ws); lex != r && mounts.Within(lex, ws) && !mounts.Within(r, ws) {
			return darwin.Policy{}, &PolicyError{Field: field, Value: d, Reason: "resolves through a symlink in the workspace to " + r}
		}
		if r == "/" || mounts.Within(ws, r) {
			return darwin.Policy{}, &PolicyError{Field: field, Value: d, Reason: "would mask the workspace itself"}
		}
		deny = append(deny, r)
		p.Deny[i] = r
	}
	for _, d := range deny {
		if mounts.Within(ws, d) {
			return darwin.Policy{}, &PolicyError{Field: "Workspace", Value: ws, Reason: "lies under the denied path " + d}
		}
	}

	var writable []string
	for i, w := range p.Writable {
		field := fmt.Sprintf("Writable[%d]", i)
		if err := checkPath(field, w); err != nil {
			return darwin.Policy{}, err
		}
		r := resolve(w, ws)
		// A symlink planted in a writable tree must not turn a writable
		// path into one outside it.
		lex := lexical(w, ws)
		for _, root := range append([]string{ws}, writable...) {
			if mounts.Within(lex, root) && !mounts.Within(r, root) {
				return darwin.Policy{}, &PolicyError{Field: field, Value: w, Reason: "resolves through a symlink in writable " + root + " to " + r}
			}
		}
		if _, err := os.Stat(r); err != nil {
			return darwin.Policy{}, &PolicyError{Field: field, Value: w, Reason: "does not exist"}
		}
		if r == "/" {
			return darwin.Policy{}, &PolicyError{Field: field, Value: w, Reason: "the whole host tree cannot be writable"}
		}
		if mounts.Within(resolve(home, "/"), r) {
			return darwin.Policy{}, &PolicyError{Field: field, Value: w, Reason: "contains the home directory " + home}
		}
		for _, d := range deny {
			if mounts.Within(r, d) {
				return darwin.Policy{}, &PolicyError{Field: field, Value: w, Reason: "lies under the denied path " + d}
			}
		}
		writable = append(writable, r)
		p.Writable[i] = r
	}

	if err := checkEnv("Env", p.Env); err != nil {
		return darwin.Policy{}, err
	}
	if err := checkDenyNames(p.DenyNames); err != nil {
		return darwin.Policy{}, err
	}
	for i, n := range p.DenyNames {
		if err := darwin.CheckDenyName(fmt.Sprintf("DenyNames[%d]", i), n); err != nil {
			return darwin.Policy{}, seatbeltError(err)
		}
	}

	roots := append([]string{ws}, writable...)
	repos := append(topRepos(roots), deepRepos(roots)...)
	if p.AllowGitWrite {
		makeGitCodeDirs(repos)
	}
	readOnly, pins := gitGuard(repos, p.AllowGitWrite)

	return darwin.Policy{
		Workspace: ws,
		Writable:  writable,
		ReadOnly:  readOnly,
		Pins:      pins,
		Deny:      deny,
		HomeDir:   home,
		DenyNames: denyNames(p),
		// Linux gives every sandbox its own devpts; ptys are as harmless
		// here, where only those the command made can be opened.
		AllowPTY:    true,
		HostNetwork: p.Network == NetworkHost,
	}, nil
}

// seatbeltError is err from package darwin as a PolicyError when it names
// a field.
func seatbeltError(err error) error {
	var fe *darwin.FieldError
	if errors.As(err, &fe) {
		return &PolicyError{Field: fe.Field, Value: fe.Value, Reason: fe.Reason}
	}
	return err
}
