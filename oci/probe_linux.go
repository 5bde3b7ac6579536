//go:build linux

package oci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hutchbox/hutch/runtime"
)

// RuntimeReport is what Probe found of one OCI runtime on this host.
type RuntimeReport struct {
	Runtime string `json:"runtime"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Rootless says the form run was the rootless one (Options.Rootless):
	// Probe runs as a user other than root.
	Rootless bool `json:"rootless,omitempty"`
	// Unavailable says why the runtime cannot run the form here (not
	// installed, not as this user), when it cannot; nothing ran then.
	Unavailable string `json:"unavailable,omitempty"`
	// Command is the command line that runs the default policy's bundle
	// under the runtime (RuntimeCommand, the bundle's directory DIR) and
	// Needs what else it needs on this host (RuntimeNotes).
	Command []string `json:"command,omitempty"`
	Needs   []string `json:"needs,omitempty"`
	// Checks are the protections judged on the host after the run; Error
	// is why the run failed, when it did.
	Checks []RuntimeCheck `json:"checks,omitempty"`
	Error  string         `json:"error,omitempty"`
	// Unenforced is what the run's Result says the form does not enforce.
	Unenforced []string `json:"unenforced,omitempty"`
}

// RuntimeCheck is one protection, judged on the host.
type RuntimeCheck struct {
	Name   string `json:"name"`
	Held   bool   `json:"held"`
	Detail string `json:"detail,omitempty"`
}

// Held says every check held.
func (r *RuntimeReport) Held() bool {
	return r.Unavailable == "" && r.Error == "" && len(r.Checks) > 0 && !slices.ContainsFunc(r.Checks, func(c RuntimeCheck) bool { return !c.Held })
}

// probeMarker is what the scratch workspace's .env holds, which the
// default deny-list masks.
const probeMarker = "HUTCH-DOCTOR-OCI-SECRET"

// Probe runs the default policy's OCI form of a probe command under the
// runtime named (one of Runtimes) as hutch run --backend oci runs it, in
// a scratch workspace, and judges on the host what held: the command's
// exit status came back, its workspace write landed, a write to a host
// directory outside it (writable by everyone on the host) did not, the
// workspace's .env (masked by the default deny-list) was not read, a
// chmod to mode 4755 (refused by the default seccomp profile) did not
// set the setuid bit, and the limits were in a cgroup. The scratch trees
// are removed afterwards.
func Probe(ctx context.Context, runtimeName string) RuntimeReport {
	rep := RuntimeReport{Runtime: runtimeName, Rootless: os.Geteuid() != 0}
	path, err := LookRuntime(runtimeName)
	if err != nil {
		rep.Unavailable = err.Error()
		return rep
	}
	rep.Path = path
	if out, err := exec.CommandContext(ctx, path, "--version").Output(); err == nil {
		rep.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	ws, err := os.MkdirTemp("", "hutch-doctor-oci-")
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer os.RemoveAll(ws)
	// Outside the private /tmp: a host tree the command sees read-only.
	outside, err := os.MkdirTemp("/var/tmp", "hutch-doctor-oci-outside-")
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer os.RemoveAll(outside)
	if err := errors.Join(os.Chmod(outside, 0o777),
		os.WriteFile(filepath.Join(ws, ".env"), []byte(probeMarker+"\n"), 0o644),
		os.WriteFile(filepath.Join(ws, "probe"), nil, 0o755)); err != nil {
		rep.Error = err.Error()
		return rep
	}
	p := runtime.DefaultPolicy(ws)
	p.Backend = runtime.BackendOCI
	checked, err := runtime.Check(p)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	script := "echo in > inside\necho out > " + outside + "/escaped\ncat .env > leak\nchmod 4755 probe\nexit 7"
	f, err := Export(checked, []string{"sh", "-c", script}, Options{Rootless: rep.Rootless})
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.Command = f.RuntimeCommand(runtimeName, "DIR", "ID")
	rep.Needs = f.RuntimeNotes(runtimeName)
	if err := rootlessUnavailable(runtimeName, f); err != nil {
		rep.Unavailable = err.Error()
		return rep
	}
	var stderr bytes.Buffer
	r, err := Run(ctx, f, path, Stdio{Stdout: &stderr, Stderr: &stderr})
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.Unenforced = r.Unenforced
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	leak, _ := os.ReadFile(filepath.Join(ws, "leak"))
	fi, err := os.Stat(filepath.Join(ws, "probe"))
	setuid := err == nil && fi.Mode()&os.ModeSetuid != 0
	// The limits: in a cgroup, or, rootless, the rlimits the Result's
	// unenforced lines describe.
	limits, limitsHeld, limitsDetail := "memory and pids limits in a cgroup", slices.Contains(r.Layers, runtime.LayerCgroup), "the runtime's group, below hutch's"
	if f.Rootless {
		limits, limitsHeld, limitsDetail = "memory and pids limits as rlimits", slices.Contains(r.Layers, runtime.LayerRlimits), "rootless: no cgroup is delegated to this user; RLIMIT_DATA per process, RLIMIT_NPROC per uid"
	}
	detail := func(ok bool, bad string) string {
		if ok {
			return ""
		}
		return bad
	}
	rep.Checks = []RuntimeCheck{
		{"the command ran, its exit status came back", r.ExitCode == 7, detail(r.ExitCode == 7, "exit "+strconv.Itoa(r.ExitCode)+": "+strings.TrimSpace(stderr.String()))},
		{"the workspace is writable", exists(filepath.Join(ws, "inside")), ""},
		{"the host's tree is read-only", !exists(filepath.Join(outside, "escaped")), detail(!exists(filepath.Join(outside, "escaped")), "the command wrote "+outside+"/escaped")},
		{"the deny-list's masks hold (.env)", !bytes.Contains(leak, []byte(probeMarker)), detail(!bytes.Contains(leak, []byte(probeMarker)), "the command read the workspace's .env")},
		{"seccomp refuses chmod 4755", !setuid, detail(!setuid, "the setuid bit was set: no filter")},
		{limits, limitsHeld, limitsDetail},
	}
	return rep
}
