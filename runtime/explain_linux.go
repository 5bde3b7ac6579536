//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/mounts"
)

// explainer is what Explain answers from: the plan a command started now
// would get (the Sandbox's spec with the deny-name matches and the
// repositories' guards read fresh), and where each of its masks and
// read-only paths came from. It decides nothing of its own: every answer
// is what Plan.Lookup says of the path, named by its origin. The plan is
// built at the first question, not by Check, which makes one for every
// decision.
type explainer struct {
	policy Policy
	level  Level
	spec   mounts.Spec
	fresh  fresh
	names  []string
	// deny is the resolved deny-list (spec.Deny), denyGiven each entry
	// as written, the first defaults of them DefaultDeny's.
	deny      []string
	denyGiven []string
	defaults  int
	ceiling   ceiling
	// home is the host's home, for naming ~/... paths.
	home string

	once sync.Once
	plan mounts.Plan
	// named are the deny-name matches in the writable trees; guards are
	// the paths the git guard keeps read-only.
	named  []string
	guards map[string]guard
}

// explainer is the explainer of sb's decision with the writable trees as
// f has them.
func (sb *Sandbox) explainer(f fresh) *explainer {
	return &explainer{
		policy: sb.policy, level: sb.level, spec: sb.spec, fresh: f, names: sb.names,
		deny: sb.spec.Deny, denyGiven: sb.denyGiven, defaults: sb.denyDefaults,
		ceiling: sb.ceiling, home: hostHome(),
	}
}

// view builds the plan and the guards' origins, once.
func (e *explainer) view() {
	e.once.Do(func() {
		e.plan = planOf(e.spec, e.fresh, e.policy)
		e.named = e.fresh.named.paths
		e.guards = map[string]guard{}
		for _, r := range e.fresh.repos {
			// What stays read-only when commits are allowed is the
			// repository's configuration and code: no policy unguards it.
			always, _ := gitGuard([]gitRepo{r}, true)
			ro, _ := gitGuard([]gitRepo{r}, e.policy.AllowGitWrite)
			for _, p := range ro {
				e.guards[p] = guard{repo: path.Dir(r.Entry), always: slices.Contains(always, p)}
			}
		}
	})
}

// guard is a path the git guard keeps read-only: the repository's
// directory, and whether it stays so with AllowGitWrite.
type guard struct {
	repo   string
	always bool
}

// Explain says which rule decides the path name for access in a command
// started on sb now, and how the caller could allow it where a policy
// can: name as a command would give it (absolute, or relative to the
// workspace), every symlink followed in the sandbox's view (not the
// host's: a bind's target or an image's root is resolved where the
// command finds it). The deny-name matches and repositories are those of
// the writable trees now. It starts nothing and tries nothing: the answer
// is the view's, the one the kernel enforces for every command.
//
// Explain answers from the mounts' view; at level landlock, which has
// none, it returns an error matching errors.ErrUnsupported. A name no
// command could give (empty, a NUL, too long) or an access other than
// read, write or execute is a *FilePathError naming "path" or "access".
func (sb *Sandbox) Explain(name string, access Access) (Explanation, error) {
	cur := sb.inEffect()
	var f fresh
	if cur.level != LevelUnsandboxed && cur.level != LevelLandlock {
		var err error
		if f, err = cur.scanFresh(); err != nil {
			return Explanation{}, err
		}
	}
	return cur.explainer(f).explain(name, access)
}

// Explain is Sandbox.Explain for the decision r, with the writable trees
// as Check read them. A Resolved read from JSON carries no view to answer
// from (NewResolved's Sandbox does): its Explain is an error.
func (r *Resolved) Explain(name string, access Access) (Explanation, error) {
	if r.explain == nil {
		return Explanation{}, errors.New("hutch: this decision holds no view to explain (read from JSON, or checked for an OCI runtime): make a Sandbox of it with NewResolved")
	}
	return r.explain.explain(name, access)
}

func (e *explainer) explain(name string, access Access) (Explanation, error) {
	if err := checkFilePath("path", name); err != nil {
		return Explanation{}, err
	}
	if _, err := ParseAccess(string(access)); err != nil {
		return Explanation{}, &FilePathError{Field: "access", Path: string(access), Reason: "not an access: read, write or execute"}
	}
	abs := name
	if !path.IsAbs(abs) {
		abs = e.policy.Workspace + "/" + abs
	}
	x := Explanation{Path: name, View: path.Clean(abs), Access: access}
	switch e.level {
	case LevelUnsandboxed:
		x.Allowed, x.Rule, x.Reason = true, RuleUnsandboxed, "commands run unsandboxed (the disabled mode): the host's own permissions decide"
		return x, nil
	case LevelLandlock:
		return Explanation{}, fmt.Errorf("hutch: Explain answers from the mounts' view, and this sandbox runs at level landlock, which has none: %w", errors.ErrUnsupported)
	}
	e.view()
	v, ok := e.plan.ResolveView(abs)
	if !ok {
		return Explanation{}, &FilePathError{Field: "path", Path: name, Reason: "too many levels of symbolic links in the sandbox's view"}
	}
	x.View = v
	step, ro := e.plan.Decider(v)
	pl := e.plan.Lookup(v)
	x.HostPath = pl.HostPath
	switch step.Kind {
	case mounts.Mask:
		e.masked(&x, step.Target)
	case mounts.EmptyRO:
		e.hidden(&x, step.Target)
	case mounts.Tmpfs:
		x.Allowed, x.Rule = true, RulePrivateTmp
		x.Reason = fmt.Sprintf("%s is in the sandbox's private /tmp: each command gets an empty one of its own; the host's /tmp is not there", e.tilde(v))
		if e.spec.Home != "" && mounts.Within(v, e.spec.Home) {
			x.Reason = fmt.Sprintf("%s is in the sandbox's HOME %s, in its private /tmp: each command gets an empty one of its own (--home DIR keeps one across commands)", v, e.spec.Home)
		}
	case mounts.Dev:
		x.Rule = RuleKernelTree
		x.Allowed = access == AccessRead || slices.Contains(devNodes, v) || mounts.Within(v, "/dev/shm") || mounts.Within(v, "/dev/pts")
		x.Reason = fmt.Sprintf("%s is in the sandbox's own /dev: its device nodes (null, zero, full, random, urandom, tty), a private devpts and /dev/shm; nothing else can be made there", v)
		if access == AccessExecute {
			// Mounted noexec but /dev/shm, a tmpfs of the command's.
			x.Allowed = mounts.Within(v, "/dev/shm")
			x.Reason = fmt.Sprintf("%s is in the sandbox's own /dev, mounted noexec but /dev/shm", v)
		}
	case mounts.Proc:
		x.Rule, x.Allowed = RuleKernelTree, access == AccessRead
		x.Reason = fmt.Sprintf("%s is in the sandbox's own /proc: its own processes only, the kernel's settings read-only, nothing executable (noexec)", v)
	case mounts.EmptyRoot, mounts.Symlink:
		e.viewRoot(&x, v)
	case mounts.BindRO:
		e.readOnlyTree(&x, step)
	case mounts.BindRW:
		if ro.Kind != "" {
			e.guarded(&x, ro.Target)
			break
		}
		x.Allowed, x.Rule = true, RuleWritableTree
		x.Reason = fmt.Sprintf("%s is in %s: writable", e.tilde(v), e.treeName(step))
	case mounts.HostRoot:
		e.hostTree(&x)
	case mounts.File:
		// Bound read-only and noexec (nsinit's attrsSealed): read only.
		e.hostTree(&x)
		x.Allowed = access == AccessRead
		x.Reason = fmt.Sprintf("%s is the view's own, made for each sandbox (the host's with the sandbox's hostname %s added), read-only and not executable", v, sandboxHostname)
	default:
		return Explanation{}, fmt.Errorf("hutch: %s: no rule for a view step %s", v, step)
	}
	if x.Allowed {
		x.Allow = nil
	}
	return x, nil
}

// devNodes are the host's device nodes the sandbox's /dev holds
// (nsinit's devNodes), writable as the host's are.
var devNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// tilde is host-or-view path p as ~/... when it lies in the host's home,
// as the deny-list writes it.
func (e *explainer) tilde(p string) string {
	if e.home != "" && e.home != "/" && mounts.Within(p, e.home) {
		if p == e.home {
			return "~"
		}
		return "~/" + p[len(e.home)+1:]
	}
	return p
}

// sources are the host paths view path t stands for: itself (a path at its
// own place), and, in a bind's target, the same path in its Source: what
// the deny-list, the deny names and the guards name (mounts.Spec.bound).
func (e *explainer) sources(t string) []string {
	out := []string{t}
	for _, b := range e.spec.Binds {
		if mounts.Within(t, b.Target) {
			rel := strings.TrimPrefix(strings.TrimPrefix(t, b.Target), "/")
			out = append(out, path.Join(b.Source, rel))
		}
	}
	return out
}

// inWhat says where p lies when the rule is on t, one of its ancestors.
func (e *explainer) inWhat(p, t, what string) string {
	if p == t {
		return fmt.Sprintf("%s is %s", e.tilde(t), what)
	}
	return fmt.Sprintf("%s lies in %s, %s", e.tilde(p), e.tilde(t), what)
}

// masked explains a path under the Mask at t.
func (e *explainer) masked(x *Explanation, t string) {
	for _, src := range e.sources(t) {
		if i := slices.Index(e.deny, src); i >= 0 {
			given := e.denyGiven[i]
			if i < e.defaults {
				x.Rule = RuleDefaultDeny
				x.Reason = e.inWhat(x.View, t, "masked: default deny-list ("+given+")")
				x.Allow = &Remedy{Flag: "--no-default-deny (drops every default path and name; --deny and --deny-name put back the rest)", Key: "default_deny = false"}
				return
			}
			x.Rule = RuleDeny
			x.Reason = e.inWhat(x.View, t, "masked: the policy's deny-list ("+given+")")
			x.Allow = &Remedy{Flag: "drop --deny " + given, Key: "deny (remove " + given + ")"}
			return
		}
		if slices.Contains(e.named, src) {
			x.Rule = RuleDenyName
			base := path.Base(src)
			i := slices.IndexFunc(e.names, func(n string) bool { return matchName([]string{n}, base) })
			if i < 0 {
				// A link matching a name masks what it leads to.
				x.Reason = e.inWhat(x.View, t, "masked: a deny name's link in a writable tree leads here")
				return
			}
			n := e.names[i]
			if !e.policy.NoDefaultDeny && slices.Contains(defaultDenyNames, n) {
				x.Reason = e.inWhat(x.View, t, fmt.Sprintf("masked: default deny name %q in a writable tree", n))
				x.Allow = &Remedy{Flag: "--no-default-deny, with --deny-name for each default name to keep", Key: "default_deny = false, with deny_names"}
				return
			}
			x.Reason = e.inWhat(x.View, t, fmt.Sprintf("masked: the policy's deny name %q in a writable tree", n))
			x.Allow = &Remedy{Flag: "drop --deny-name " + n, Key: "deny_names (remove " + n + ")"}
			return
		}
	}
	x.Rule = RuleDeny
	x.Reason = e.inWhat(x.View, t, "masked")
}

// hidden explains a path under the empty read-only directory at t.
func (e *explainer) hidden(x *Explanation, t string) {
	switch {
	case slices.Contains(e.spec.HideDirs, t):
		x.Rule = RuleHiddenSockets
		x.Reason = e.inWhat(x.View, t, "hidden: it holds the host's unix sockets (systemd, dbus, docker, agents), an empty read-only directory in every sandbox")
	case t == "/proc":
		x.Rule = RuleKernelTree
		x.Reason = "/proc is an empty read-only directory: this host cannot give the sandbox a /proc of its own (level namespaces-no-proc)"
	default:
		x.Rule = RuleAppIsolation
		x.Reason = e.inWhat(x.View, t, "hidden: app isolation (--apps-dir, --app)")
	}
}

// guarded explains a path kept read-only in a writable tree by the
// ReadOnly step at t.
func (e *explainer) guarded(x *Explanation, t string) {
	x.Allowed = x.Access != AccessWrite
	for _, src := range e.sources(t) {
		g, ok := e.guards[src]
		if !ok {
			continue
		}
		x.Rule = RuleGitGuard
		x.Reason = e.inWhat(x.View, t, "read-only: git guard for repository "+g.repo)
		if !g.always {
			// The whole git directory: committing makes all but its
			// configuration and code writable.
			x.Allow = &Remedy{Flag: "--allow-git-write (objects, refs, the index and HEAD; config, hooks, info, modules, worktrees stay read-only)", Key: "allow_git_write = true"}
			if e.ceiling.check(Grant{GitWrite: true}) == nil {
				x.Allow.Grant = "@git-write"
			}
		} else {
			x.Reason += " (kept so whatever the policy says: run git there on the host with hutch git)"
		}
		return
	}
	x.Rule = RuleReadOnly
	x.Reason = e.inWhat(x.View, t, "read-only: kept so in a writable tree by the policy (--read-only)")
	x.Allow = &Remedy{Flag: "drop --read-only " + t, Key: "read_only (remove " + t + ")"}
}

// treeName names the writable tree a BindRW step shows.
func (e *explainer) treeName(step mounts.Mount) string {
	for _, b := range e.spec.Binds {
		if b.Target == step.Target && b.Writable {
			return fmt.Sprintf("the writable bind of %s at %s (--bind %s:%s)", b.Source, b.Target, b.Source, b.Target)
		}
	}
	switch t := step.Target; {
	case t == e.policy.Workspace:
		return "the workspace " + t
	case e.policy.Home != "" && t == e.policy.Home:
		return "the home " + t + " (--home)"
	case slices.Contains(e.policy.Writable, t):
		return "the writable tree " + t + " (--write)"
	}
	return "the writable tree " + step.Target
}

// readOnlyTree explains a path on a read-only bind: an image's entry, a
// listed tree, a read-only bind, an app's directory.
func (e *explainer) readOnlyTree(x *Explanation, step mounts.Mount) {
	x.Allowed, x.Rule = x.Access != AccessWrite, RuleReadOnlyTree
	if l := e.spec.Listed; l != nil && l.Root != nil && mounts.Within(step.Source, l.Root.Dir) {
		x.Rule = RuleImageRoot
		x.Reason = fmt.Sprintf("%s is the root file system's (%s), read-only: writes go to the workspace, the writable trees and /tmp", x.View, l.Root.Dir)
		return
	}
	for _, b := range e.spec.Binds {
		if b.Target == step.Target {
			x.Reason = fmt.Sprintf("%s is in the read-only bind of %s at %s", x.View, b.Source, b.Target)
			x.Allow = &Remedy{Flag: fmt.Sprintf("--bind %s:%s:rw", b.Source, b.Target), Key: fmt.Sprintf("binds = [%q]", b.Source+":"+b.Target+":rw")}
			return
		}
	}
	if a := e.spec.Apps; a != nil && a.ID != "" && step.Target == path.Join(a.Dir, a.ID) {
		x.Rule = RuleAppIsolation
		x.Reason = fmt.Sprintf("%s is in the app's directory %s, read-only but for its data directory: app isolation (--app)", x.View, step.Target)
		return
	}
	x.Reason = fmt.Sprintf("%s is in %s, shown read-only: reads are listed", e.tilde(x.View), step.Target)
	e.writeRemedy(x)
}

// viewRoot explains a path of a listed view's own root: a directory on
// the way to what it shows, or nothing at all.
func (e *explainer) viewRoot(x *Explanation, v string) {
	root := e.spec.Listed != nil && e.spec.Listed.Root != nil
	if v == "/" || e.plan.Holds(v) {
		x.Rule, x.Allowed = RuleViewRoot, x.Access != AccessWrite
		x.Reason = v + " is a directory of the view's own read-only root, on the way to what it shows"
		return
	}
	x.Rule = RuleNotInView
	if root {
		x.Reason = fmt.Sprintf("%s is not in the view: commands run on the root file system %s, which has no such path, and the host's files are not there", v, e.spec.Listed.Root.Dir)
	} else {
		x.Reason = fmt.Sprintf("%s is not in the view: reads are listed (the system trees, the workspace, the writable trees and --read paths only)", v)
	}
	if x.Access != AccessWrite {
		if _, err := os.Stat(v); err == nil && e.readable(v) {
			x.Allow = &Remedy{Flag: "--read " + v, Key: fmt.Sprintf("read = [%q]", v)}
		}
		return
	}
	e.writeRemedy(x)
}

// readable says whether host path p could be a listed tree
// (resolveReadTree's rule: not the host's root, nor in a kernel tree, a
// hidden directory or a denied path).
func (e *explainer) readable(p string) bool {
	if p == "/" {
		return false
	}
	for _, t := range linuxRules().noWrite {
		if mounts.Within(p, t.dir) {
			return false
		}
	}
	return !slices.ContainsFunc(e.deny, func(d string) bool { return mounts.Within(p, d) })
}

// hostTree explains a path on the host's read-only tree.
func (e *explainer) hostTree(x *Explanation) {
	v := x.View
	x.Allowed = x.Access != AccessWrite
	for _, t := range kernelTrees {
		if mounts.Within(v, t.dir) {
			x.Rule = RuleKernelTree
			x.Reason = fmt.Sprintf("%s is the host kernel's %s, read-only: kernel interfaces cannot be writable", v, t.dir)
			return
		}
	}
	x.Rule = RuleOutsideWritable
	top := v
	if i := strings.IndexByte(v[1:], '/'); i >= 0 {
		top = v[:i+1]
	}
	x.Reason = e.inWhat(v, top, "outside the writable trees: the host's tree, read-only")
	e.writeRemedy(x)
}

// writeRemedy says how a refused write of x.View could be allowed: the
// directory it is or lies in made a writable tree, where the policy's
// rules let one be (not the host's root, the home, a kernel tree, a
// hidden directory); a system tree needs --allow-system-write too, and a
// grant covers it when Grantable does.
func (e *explainer) writeRemedy(x *Explanation) {
	if x.Access != AccessWrite {
		return
	}
	dir := x.View
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = path.Dir(dir)
	}
	for dir != "/" {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = path.Dir(dir)
	}
	home := hostHome()
	if dir == "/" || (home != "" && mounts.Within(home, dir)) {
		return
	}
	for _, t := range linuxRules().noWrite {
		if mounts.Within(dir, t.dir) {
			return
		}
	}
	r := &Remedy{Flag: "--write " + dir, Key: fmt.Sprintf("writable = [%q]", dir)}
	for _, t := range resolvedSystemTrees() {
		if mounts.Within(dir, t) || mounts.Within(t, dir) {
			r.Flag += " --allow-system-write " + t
			r.Key += fmt.Sprintf(", allow_system_write = [%q]", t)
			break
		}
	}
	if e.ceiling.check(Grant{Writable: []string{dir}}) == nil {
		r.Grant = "write:" + dir
	}
	x.Allow = r
}
