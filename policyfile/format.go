package policyfile

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/runtime"
)

// Format writes p as a policy file of its own: every key of [sandbox]
// with p's value, limits in words ("none", sizes, durations). Read back
// onto the default it gives p again, but for Workspace (a comment: it is
// the caller's) and a custom Seccomp profile, which a file names by path
// (a comment says it is there).
func Format(p runtime.Policy) ([]byte, error) {
	type out struct {
		Mode            string    `toml:"mode"`
		Writable        []string  `toml:"writable"`
		ReadOnly        []string  `toml:"read_only"`
		Deny            []string  `toml:"deny"`
		Reads           string    `toml:"reads"`
		Read            []string  `toml:"read"`
		Root            string    `toml:"root,omitempty"`
		Binds           []string  `toml:"binds"`
		DenyNames       []string  `toml:"deny_names"`
		DefaultDeny     bool      `toml:"default_deny"`
		AllowGitWrite   bool      `toml:"allow_git_write"`
		AllowNested     bool      `toml:"allow_nested"`
		AllowSystem     []string  `toml:"allow_system_write"`
		Env             []string  `toml:"env"`
		Home            string    `toml:"home"`
		Tools           string    `toml:"tools"`
		Apps            *apps     `toml:"apps,omitempty,inline"`
		Network         string    `toml:"network"`
		AllowDomains    []string  `toml:"allow_domains"`
		PackageManagers []string  `toml:"package_managers"`
		AllowLocal      []string  `toml:"allow_local"`
		Leaks           string    `toml:"leaks"`
		Denials         string    `toml:"denials"`
		Explain         bool      `toml:"explain"`
		Timeout         string    `toml:"timeout"`
		OutputLimit     any       `toml:"output_limit"`
		Memory          any       `toml:"memory"`
		Pids            any       `toml:"pids"`
		CPUs            any       `toml:"cpus"`
		TmpSize         any       `toml:"tmp_size"`
		FileSize        any       `toml:"file_size"`
		SeccompAllow    []string  `toml:"seccomp_allow"`
		SeccompDeny     []string  `toml:"seccomp_deny"`
		AllowDegraded   []string  `toml:"allow_degraded"`
		SkipLayers      []string  `toml:"skip_layers"`
		MinLevel        string    `toml:"min_level"`
		Backend         string    `toml:"backend"`
		Prewarm         int       `toml:"prewarm"`
		Grantable       grantable `toml:"grantable"`
	}
	o := out{
		Mode:     map[bool]string{false: "enabled", true: "disabled"}[p.Unsandboxed],
		Writable: list(p.Writable), ReadOnly: list(p.ReadOnly), Deny: list(p.Deny), Reads: string(orHost(p.Reads)), Read: list(p.Read), Root: p.Root, DenyNames: list(p.DenyNames),
		DefaultDeny: !p.NoDefaultDeny, AllowGitWrite: p.AllowGitWrite, AllowNested: p.AllowNested, AllowSystem: list(p.AllowSystemWrite), Env: list(p.Env), Home: p.Home, Tools: p.Tools,
		Network: string(p.Network), AllowDomains: list(p.AllowDomains), PackageManagers: list(p.PackageManagers),
		AllowLocal: list(p.AllowLocal), Leaks: string(p.Leaks), Denials: string(cmp.Or(p.Denials, runtime.DenialsRecord)), Explain: p.Explain, Timeout: formatDuration(p.Timeout), OutputLimit: formatSize(p.OutputLimit),
		Memory: formatSize(p.Memory), TmpSize: formatSize(p.TmpSize), FileSize: formatSize(p.FileSize),
		SeccompAllow: list(p.SeccompAllow), SeccompDeny: list(p.SeccompDeny), MinLevel: string(p.MinLevel), Backend: string(p.Backend), Prewarm: p.Prewarm,
	}
	if p.Apps != nil {
		o.Apps = &apps{Dir: p.Apps.Dir, ID: p.Apps.ID}
	}
	for _, b := range p.Binds {
		o.Binds = append(o.Binds, b.String())
	}
	o.Binds = list(o.Binds)
	g := p.Grantable
	o.Grantable = grantable{Network: g.Network, Domains: list(g.Domains), PackageManagers: list(g.PackageManagers),
		HostNetwork: g.HostNetwork, Writable: list(g.Writable), GitWrite: g.GitWrite}
	o.Pids = formatNumber(p.Pids)
	o.CPUs = formatNumber(p.CPUs)
	for _, l := range p.AllowDegraded {
		o.AllowDegraded = append(o.AllowDegraded, string(l))
	}
	for _, l := range p.SkipLayers {
		o.SkipLayers = append(o.SkipLayers, string(l))
	}
	o.AllowDegraded, o.SkipLayers = list(o.AllowDegraded), list(o.SkipLayers)
	body, err := toml.Marshal(struct {
		Version int `toml:"version"`
		Sandbox out `toml:"sandbox"`
	}{Version, o})
	if err != nil {
		return nil, err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "# workspace: %s\n", p.Workspace)
	if p.Seccomp != nil {
		head.WriteString("# seccomp: a profile of its own (not the built-in one), which a file names by path\n")
	}
	return append([]byte(head.String()), body...), nil
}

// list is v, never nil: a file writes [] for none.
func list(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// formatSize is n in words when they say it exactly, else in bytes.
func formatSize(n int64) any {
	switch {
	case n == runtime.Unlimited:
		return "none"
	case n == 0:
		return "default"
	}
	if s := units.FormatSize(n); mustParse(s) == n {
		return s
	}
	return n
}

func mustParse(s string) int64 {
	n, _ := units.ParseSize(s)
	return n
}

func formatDuration(d time.Duration) string {
	switch {
	case d == runtime.Unlimited:
		return "none"
	case d == 0:
		return "default"
	}
	return d.String()
}

func formatNumber[T int64 | float64](v T) any {
	switch {
	case v == runtime.Unlimited:
		return "none"
	case v == 0:
		return "default"
	}
	return v
}

// orHost is r, or ReadsHost for the default "".
func orHost(r runtime.ReadScope) runtime.ReadScope {
	if r == "" {
		return runtime.ReadsHost
	}
	return r
}
