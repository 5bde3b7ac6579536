package policyfile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/runtime"
)

// Layer is one policy file of a stack, and whether it is trusted: a
// trusted layer (the system's, the user's) may set anything; an
// untrusted one (the project's, in the workspace a sandboxed command can
// write) may only narrow what the layers below it allow.
type Layer struct {
	File    *File
	Trusted bool
}

// Discover finds the standard layers that exist, lowest first: the
// system's /etc/hutch/policy.toml and the user's
// $XDG_CONFIG_HOME/hutch/policy.toml (~/.config/hutch/policy.toml),
// trusted; the project's <workspace>/.hutch/policy.toml, untrusted.
func Discover(workspace string) ([]Layer, error) {
	candidates := []Layer{{File: &File{Name: "/etc/hutch/policy.toml"}, Trusted: true}}
	if dir, err := os.UserConfigDir(); err == nil {
		candidates = append(candidates, Layer{File: &File{Name: filepath.Join(dir, "hutch", "policy.toml")}, Trusted: true})
	}
	candidates = append(candidates, Layer{File: &File{Name: filepath.Join(workspace, ".hutch", "policy.toml")}})
	var layers []Layer
	for _, c := range candidates {
		read := ReadFile
		if !c.Trusted {
			// In the workspace: what a command may have written.
			read = func(string) (*File, error) { return readUntrusted(workspace, ".hutch", "policy.toml") }
		}
		f, err := read(c.File.Name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		layers = append(layers, Layer{File: f, Trusted: c.Trusted})
	}
	return layers, nil
}

// Layered is the policy of the embedded default and then each layer in
// order, each with its [sandbox] table and the profile's table if it has
// one, for workspace. An untrusted layer that would widen what the
// layers below allow is refused, naming its file, line and key.
func Layered(workspace, profile string, layers ...Layer) (runtime.Policy, error) {
	p := runtime.Policy{Workspace: workspace}
	if err := Default().Apply(&p, ""); err != nil {
		return p, err
	}
	found := profile == ""
	var names []string
	for _, l := range layers {
		names = append(names, l.File.Name)
		prof := ""
		if _, ok := l.File.doc.Profiles[profile]; ok {
			prof, found = profile, true
		}
		before := p.Clone()
		if err := l.File.Apply(&p, prof); err != nil {
			return p, err
		}
		if l.Trusted {
			continue
		}
		if field, why := widens(before, p); field != "" {
			k := fields[field]
			table := "sandbox"
			if prof != "" && l.File.lines["profiles."+prof+"."+k] > 0 {
				table = "profiles." + prof
			}
			return p, l.File.keyError(table+"."+k, "an untrusted layer may only narrow the policy below it: "+why, nil)
		}
	}
	if !found {
		return p, &Error{File: strings.Join(names, ", "), Key: "profiles." + profile, Reason: "no such profile"}
	}
	return p, nil
}

// widens names the first Policy field in which p allows more than base,
// and why; "" when p allows nothing base does not.
func widens(base, p runtime.Policy) (string, string) {
	def := runtime.DefaultPolicy("")
	switch {
	case p.Unsandboxed && !base.Unsandboxed:
		return "Unsandboxed", "it disables the sandbox"
	case networkRank(p.Network) > networkRank(base.Network):
		return "Network", fmt.Sprintf("%s is more than %s", p.Network, orNone(base.Network))
	case p.NoDefaultDeny && !base.NoDefaultDeny:
		return "NoDefaultDeny", "it drops the default masks"
	case p.AllowGitWrite && !base.AllowGitWrite:
		return "AllowGitWrite", "it lets commands commit"
	case p.AllowNested && !base.AllowNested:
		return "AllowNested", "it lets commands create namespaces"
	case base.Reads == runtime.ReadsListed && p.Reads != runtime.ReadsListed:
		return "Reads", "the host's whole tree is more than the listed trees"
	case p.Root != base.Root:
		return "Root", "it changes the root file system the layer below chose"
	case (base.Reads == runtime.ReadsListed || base.Root != "") && !subset(p.Read, base.Read):
		return "Read", "it lists a tree the layer below does not"
	case slices.ContainsFunc(p.Binds, func(b runtime.Bind) bool { return !slices.Contains(base.Binds, b) }):
		return "Binds", "it binds a host tree the layer below does not"
	case !subset(p.AllowSystemWrite, base.AllowSystemWrite):
		return "AllowSystemWrite", "it lets a system tree be writable"
	case !reflect.DeepEqual(p.Seccomp, base.Seccomp):
		return "Seccomp", "another system-call profile"
	case leakRank(p.Leaks) < leakRank(base.Leaks):
		return "Leaks", fmt.Sprintf("%s does less than %s", p.Leaks, base.Leaks)
	case p.Denials == runtime.DenialsOff && base.Denials != runtime.DenialsOff:
		return "Denials", "off records less than record"
	case !p.Explain && base.Explain:
		return "Explain", "it stops explaining the refusals"
	case backendRank(p.Backend) < backendRank(base.Backend):
		return "Backend", fmt.Sprintf("%s accepts less isolation than %s", orDefault(p.Backend), orDefault(base.Backend))
	case levelRank(p.MinLevel) > levelRank(base.MinLevel):
		return "MinLevel", fmt.Sprintf("%s is weaker than %s", p.MinLevel, base.MinLevel)
	case base.Apps != nil && (p.Apps == nil || *p.Apps != *base.Apps):
		return "Apps", "it changes the app isolation below"
	case !reflect.DeepEqual(p.Grantable, base.Grantable) && !grantWithin(p.Grantable, base.Grantable):
		return "Grantable", "it grants more than the layer below"
	}
	if p.Network == runtime.NetworkAllow {
		rules, err := netns.ParseRules(base.AllowDomains, base.PackageManagers)
		if err != nil {
			return "AllowDomains", err.Error()
		}
		for _, d := range p.AllowDomains {
			if ok, _ := rules.Covers(d); !ok && base.Network != runtime.NetworkHost {
				return "AllowDomains", d + " is not allowed below"
			}
		}
		for _, pm := range p.PackageManagers {
			if !slices.Contains(base.PackageManagers, pm) && base.Network != runtime.NetworkHost {
				return "PackageManagers", pm + " is not allowed below"
			}
		}
		for _, l := range p.AllowLocal {
			if !slices.Contains(base.AllowLocal, l) && base.Network != runtime.NetworkHost {
				return "AllowLocal", l + " is not allowed below"
			}
		}
	}
	trees := append([]string{base.Workspace, base.Home}, base.Writable...)
	for _, w := range append(slices.Clone(p.Writable), p.Home) {
		if w != "" && !within(w, base.Workspace, trees) {
			return map[bool]string{true: "Home", false: "Writable"}[w == p.Home], w + " is not writable below"
		}
	}
	for _, sub := range []struct {
		field     string
		have, old []string
	}{{"ReadOnly", p.ReadOnly, base.ReadOnly}, {"Deny", p.Deny, base.Deny}, {"DenyNames", p.DenyNames, base.DenyNames}, {"SeccompDeny", p.SeccompDeny, base.SeccompDeny}} {
		for _, v := range sub.old {
			if !slices.Contains(sub.have, v) {
				return sub.field, v + " is dropped"
			}
		}
	}
	for _, sup := range []struct {
		field     string
		have, old []string
	}{{"SeccompAllow", p.SeccompAllow, base.SeccompAllow}, {"AllowDegraded", layerNames(p.AllowDegraded), layerNames(base.AllowDegraded)}, {"SkipLayers", layerNames(p.SkipLayers), layerNames(base.SkipLayers)}} {
		for _, v := range sup.have {
			if !slices.Contains(sup.old, v) {
				return sup.field, v + " is not allowed below"
			}
		}
	}
	for _, l := range []struct {
		field   string
		v, b, d float64
	}{
		{"Timeout", float64(p.Timeout), float64(base.Timeout), float64(def.Timeout)},
		{"OutputLimit", float64(p.OutputLimit), float64(base.OutputLimit), float64(def.OutputLimit)},
		{"Memory", float64(p.Memory), float64(base.Memory), float64(def.Memory)},
		{"Pids", float64(p.Pids), float64(base.Pids), float64(def.Pids)},
		{"CPUs", p.CPUs, base.CPUs, def.CPUs},
		{"TmpSize", float64(p.TmpSize), float64(base.TmpSize), float64(def.TmpSize)},
		{"FileSize", float64(p.FileSize), float64(base.FileSize), float64(def.FileSize)},
	} {
		if limit(l.v, l.d) > limit(l.b, l.d) {
			return l.field, "a higher limit than below"
		}
	}
	return "", ""
}

// limit is a limit's value for comparing: Unlimited and an unset
// default-none are infinite.
func limit(v, def float64) float64 {
	if v == 0 {
		v = def
	}
	if v == runtime.Unlimited || v == 0 {
		return math.Inf(1)
	}
	return v
}

func networkRank(n runtime.NetworkMode) int {
	switch n {
	case runtime.NetworkHost:
		return 2
	case runtime.NetworkAllow:
		return 1
	}
	return 0
}

func orNone(n runtime.NetworkMode) string {
	if n == "" {
		return string(runtime.NetworkNone)
	}
	return string(n)
}

// leakRank orders leak actions by what they do, "" as the default
// (report); an unknown one, which New refuses, below all.
func leakRank(a runtime.LeakAction) int {
	if a == "" {
		a = runtime.LeaksReport
	}
	return slices.Index([]runtime.LeakAction{runtime.LeaksOff, runtime.LeaksReport, runtime.LeaksRedact, runtime.LeaksKill}, a)
}

// backendRank orders backends by the least isolation each accepts: none,
// then Landlock alone (landlock, auto), then namespaces without a fresh
// /proc, then "" (namespaces, MinLevel's default).
func backendRank(b runtime.Backend) int {
	switch b {
	case runtime.BackendNone:
		return 0
	case runtime.BackendLandlock, runtime.BackendAuto:
		return 1
	case "":
		return 3
	}
	return 2
}

func orDefault[T ~string](v T) string {
	if v == "" {
		return `""`
	}
	return string(v)
}

// levelRank orders levels weakest last, "" as namespaces.
func levelRank(l runtime.Level) int {
	switch l {
	case runtime.LevelNamespacesNoProc:
		return 1
	case runtime.LevelLandlock:
		return 2
	}
	return 0
}

func layerNames(ls []runtime.Layer) []string {
	var s []string
	for _, l := range ls {
		s = append(s, string(l))
	}
	return s
}

// within says whether path, resolved as far as it exists (relative to
// ws, as the runtime takes it), lies in one of trees (resolved the same
// way): a symlink on the way, to a place the trees do not hold, is
// followed as the kernel would, also when the path's end is yet to be
// made.
func within(path, ws string, trees []string) bool {
	real := mounts.Resolve(path, ws)
	for _, t := range trees {
		if t == "" {
			continue
		}
		if mounts.Within(real, mounts.Resolve(t, ws)) {
			return true
		}
	}
	return false
}

// grantWithin says whether g's tags are all among base's (a conservative
// test: the runtime's own check is finer).
func grantWithin(g, base runtime.Grant) bool {
	have := base.Tags()
	for _, t := range g.Tags() {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// subset reports whether every entry of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
