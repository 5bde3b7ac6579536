package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hutchbox/hutch/leaks"
	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/netns"
)

// resolved is a Policy that passed every check that does not depend on the
// host's isolation level, with its paths resolved as the host has them
// now. Every backend builds its sandbox from one; making it changes
// nothing on disk.
type resolved struct {
	// policy is the caller's, copied, with Workspace, Writable and Deny
	// resolved in place and Network "" made NetworkNone: what
	// Sandbox.Policy reports.
	policy Policy
	// deny are the denied paths: DefaultDeny's (unless NoDefaultDeny),
	// "~" expanded, then policy.Deny.
	deny []string
	// denyGiven are deny's entries as written ("~/.aws", a Deny as the
	// caller gave it), and defaults how many of them come from
	// DefaultDeny: where each mask came from, for Explain.
	denyGiven []string
	defaults  int
	// names are the deny names in effect.
	names []string
	// home is what "~" stood for, "" when the host has none.
	home string
	// rules is the parsed allow-list of NetworkAllow.
	rules *netns.Rules
	// leaks scans every command's arguments, environment and output, and
	// what the file door reads; nil for LeaksOff.
	leaks *leaks.Scanner
}

// roots are the writable trees: the workspace, then Writable.
func (r *resolved) roots() []string {
	return append([]string{r.policy.Workspace}, r.policy.Writable...)
}

// hostRules are what a platform adds to the rules of resolvePolicy, as
// data, so that the rules themselves exist once.
type hostRules struct {
	// home is what "~" stands for in Deny and DefaultDeny; "" when the
	// host has none.
	home string
	// needHome refuses every policy when home is "" (macOS: the
	// keychains under it could not be denied).
	needHome bool
	// noWrite are trees neither the workspace nor a writable path may lie
	// in, by the path as given or as resolved, with why.
	noWrite []hostTree
	// sandboxHome is the HOME of the sandbox's commands when it is a fixed
	// host path (Linux: Home, in the private /tmp): no writable tree may
	// be or hold it.
	sandboxHome string
	// checkName refuses a deny name the platform cannot enforce; nil when
	// every valid name can be.
	checkName func(field, name string) error
}

// hostTree is a directory no writable tree may lie in, and why.
type hostTree struct{ dir, why string }

// kernelTrees are never writable: the sandbox gets its own /proc and /dev,
// and /sys is the host kernel's. Bound read-write over the sandbox's own,
// the host's would be what the command sees and, as root, changes; on
// macOS a writable /dev is every disk's device node.
var kernelTrees = []hostTree{
	{"/proc", "kernel interfaces cannot be writable"},
	{"/sys", "kernel interfaces cannot be writable"},
	{"/dev", "kernel interfaces cannot be writable"},
}

// systemTrees hold the host's programs, libraries, configuration and boot
// files. A writable one is far more often a slip (an unset variable in
// --write "$PREFIX/etc") than a wish, and, run as root, a command then
// rewrites the host: each is refused as a writable tree, or inside one,
// unless Policy.AllowSystemWrite names that tree. (The whole host tree and
// the home directory are refused whatever that says.)
var systemTrees = []string{"/etc", "/usr", "/var", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// resolvedSystemTrees are systemTrees with their symlinks resolved (/bin
// is /usr/bin on a merged-/usr host), once per process.
var resolvedSystemTrees = sync.OnceValue(func() []string {
	out := make([]string, len(systemTrees))
	for i, t := range systemTrees {
		out[i] = resolve(t, "/")
	}
	return out
})

// checkSystemTree refuses tree (lex as given, res resolved) when it is,
// or holds, one of systemTrees, unless allowed (Policy.AllowSystemWrite,
// resolved) names it.
func checkSystemTree(field, given, lex, res string, allowed []string) error {
	for i, t := range systemTrees {
		if !mounts.Within(resolvedSystemTrees()[i], res) && !mounts.Within(t, lex) {
			continue
		}
		if slices.Contains(allowed, res) {
			return nil
		}
		return &PolicyError{Field: field, Value: given, Reason: fmt.Sprintf("is or holds the system tree %s: writable, a command could change the host's programs or configuration; if that is meant, name it in AllowSystemWrite (--allow-system-write %s)", t, res)}
	}
	return nil
}

// resolveAllowSystemWrite checks Policy.AllowSystemWrite and resolves it
// in place: each entry is an absolute path to one of systemTrees (or a
// tree holding one), as a writable tree would name it.
func resolveAllowSystemWrite(p *Policy) error {
	for i, a := range p.AllowSystemWrite {
		field := fmt.Sprintf("AllowSystemWrite[%d]", i)
		if err := checkPath(field, a); err != nil {
			return err
		}
		if !filepath.IsAbs(a) {
			return &PolicyError{Field: field, Value: a, Reason: "must be an absolute path"}
		}
		res := resolve(a, "/")
		if checkSystemTree(field, a, filepath.Clean(a), res, nil) == nil {
			return &PolicyError{Field: field, Value: a, Reason: "not a system tree (" + strings.Join(systemTrees, ", ") + "), nor one holding one: nothing to allow"}
		}
		p.AllowSystemWrite[i] = res
	}
	return nil
}

// resolvePolicy checks p as every backend does and resolves its paths:
// limits, the workspace, Deny ("~" is host.home), Writable, Env, Tools,
// the layers to skip or degrade, deny names, MinLevel's name and the
// network fields. It only reads the file system. The returned error is a
// *PolicyError naming the field, but for a host without the home
// host.needHome asks for.
func resolvePolicy(p Policy, host hostRules) (resolved, error) {
	r := resolved{policy: p.clone(), home: host.home}
	// Numbers first: a layer that then fails to apply a limit fails for
	// the host's reasons, not the caller's value. The defaults of limits
	// left at 0 go into r.policy, which is what Policy() reports.
	if err := checkLimits(&r.policy); err != nil {
		return resolved{}, err
	}
	p = r.policy // for reading; r.policy takes what is resolved
	if err := resolveAllowSystemWrite(&r.policy); err != nil {
		return resolved{}, err
	}
	ws, err := resolveWorkspace(p.Workspace, host, r.policy.AllowSystemWrite)
	if err != nil {
		return resolved{}, err
	}
	r.policy.Workspace = ws
	if r.deny, err = resolveDeny(&r, host); err != nil {
		return resolved{}, err
	}
	if err := resolveWritable(&r, host); err != nil {
		return resolved{}, err
	}
	if err := resolveHome(&r, host); err != nil {
		return resolved{}, err
	}
	if err := resolveReadOnly(&r); err != nil {
		return resolved{}, err
	}
	if err := resolveApps(&r); err != nil {
		return resolved{}, err
	}
	if err := resolveReads(&r, host); err != nil {
		return resolved{}, err
	}
	if err := resolveBinds(&r, host); err != nil {
		return resolved{}, err
	}
	if err := resolveRoot(&r, host); err != nil {
		return resolved{}, err
	}
	if err := checkEnv("Env", p.Env); err != nil {
		return resolved{}, err
	}
	if r.leaks, err = resolveLeaks(&r.policy); err != nil {
		return resolved{}, err
	}
	if err := resolveDenials(&r.policy); err != nil {
		return resolved{}, err
	}
	if err := resolveBackend(&r.policy); err != nil {
		return resolved{}, err
	}
	if p.Tools != "" {
		if err := checkPath("Tools", p.Tools); err != nil {
			return resolved{}, err
		}
		if !filepath.IsAbs(p.Tools) {
			return resolved{}, &PolicyError{Field: "Tools", Value: p.Tools, Reason: "must be an absolute path"}
		}
		fi, err := os.Stat(p.Tools)
		switch {
		case err != nil:
			return resolved{}, &PolicyError{Field: "Tools", Value: p.Tools, Reason: pathReason(err)}
		case !fi.IsDir():
			return resolved{}, &PolicyError{Field: "Tools", Value: p.Tools, Reason: "not a directory"}
		}
	}
	for i, l := range p.SkipLayers {
		if !slices.Contains(skippable, l) {
			return resolved{}, &PolicyError{Field: fmt.Sprintf("SkipLayers[%d]", i), Value: string(l), Reason: "not a layer that can be skipped (one of " + fmt.Sprint(skippable) + ")"}
		}
	}
	for i, l := range p.AllowDegraded {
		if !slices.Contains(degradable, l) {
			return resolved{}, &PolicyError{Field: fmt.Sprintf("AllowDegraded[%d]", i), Value: string(l), Reason: "not a layer that can degrade (one of " + fmt.Sprint(degradable) + ")"}
		}
	}
	if err := checkDenyNames(p.DenyNames); err != nil {
		return resolved{}, err
	}
	if host.checkName != nil {
		for i, n := range p.DenyNames {
			if err := host.checkName(fmt.Sprintf("DenyNames[%d]", i), n); err != nil {
				return resolved{}, err
			}
		}
	}
	r.names = denyNames(&p)
	// Which levels a host reaches is the backend's to say; a name that is
	// no level at all is the caller's mistake everywhere.
	if p.MinLevel != "" && p.MinLevel.rank() < 0 && p.MinLevel != LevelSeatbelt {
		return resolved{}, &PolicyError{Field: "MinLevel", Value: string(p.MinLevel), Reason: fmt.Sprintf("not a level (one of %v)", levels)}
	}
	if err := resolveNetwork(&r); err != nil {
		return resolved{}, err
	}
	return r, nil
}

// resolveWorkspace checks the workspace and returns it with symlinks
// resolved.
func resolveWorkspace(given string, host hostRules, allowSystem []string) (string, error) {
	if given == "" {
		return "", &PolicyError{Field: "Workspace", Reason: "required"}
	}
	if err := checkPath("Workspace", given); err != nil {
		return "", err
	}
	if !filepath.IsAbs(given) {
		return "", &PolicyError{Field: "Workspace", Value: given, Reason: "must be an absolute path"}
	}
	ws, err := filepath.EvalSymlinks(given)
	if err != nil {
		return "", &PolicyError{Field: "Workspace", Value: given, Reason: pathReason(err)}
	}
	fi, err := os.Stat(ws)
	switch {
	case err != nil:
		return "", &PolicyError{Field: "Workspace", Value: given, Reason: pathReason(err)}
	case !fi.IsDir():
		return "", &PolicyError{Field: "Workspace", Value: given, Reason: "not a directory"}
	}
	if err := checkWritableTree(host, "Workspace", given, filepath.Clean(given), ws); err != nil {
		return "", err
	}
	if err := checkSystemTree("Workspace", given, filepath.Clean(given), ws, allowSystem); err != nil {
		return "", err
	}
	if err := checkGitTree("Workspace", given, filepath.Clean(given), ws, "", false); err != nil {
		return "", err
	}
	if host.home == "" && host.needHome {
		return "", errors.New("hutch: no home directory ($HOME is not set)")
	}
	// A writable home is a writable ~/.bashrc, ~/.profile, ~/.ssh (if it
	// does not exist yet: a mask needs something to cover) and autostart
	// directories: code that runs on the host at the user's next login.
	if host.home != "" && mounts.Within(resolve(host.home, "/"), ws) {
		return "", &PolicyError{Field: "Workspace", Value: given, Reason: "contains the home directory " + host.home + "; use a project directory"}
	}
	return ws, nil
}

// resolveDeny returns the denied paths, default ones first, and resolves
// r.policy.Deny in place.
func resolveDeny(r *resolved, host hostRules) ([]string, error) {
	ws := r.policy.Workspace
	var deny []string
	if !r.policy.NoDefaultDeny {
		for _, d := range defaultDeny {
			given := d
			if rest, ok := strings.CutPrefix(d, "~/"); ok {
				if host.home == "" {
					continue
				}
				d = filepath.Join(host.home, rest)
			}
			deny = append(deny, resolve(d, ws))
			r.denyGiven = append(r.denyGiven, given)
		}
	}
	r.defaults = len(deny)
	for i, d := range r.policy.Deny {
		field := fmt.Sprintf("Deny[%d]", i)
		if err := checkPath(field, d); err != nil {
			return nil, err
		}
		if rest, ok := strings.CutPrefix(d, "~/"); ok && host.home != "" {
			d = filepath.Join(host.home, rest)
		}
		res := resolve(d, ws)
		if lex := lexical(d, ws); lex != res && mounts.Within(lex, ws) && !mounts.Within(res, ws) {
			return nil, &PolicyError{Field: field, Value: d, Reason: "resolves through a symlink in the workspace to " + res}
		}
		if res == "/" || mounts.Within(ws, res) {
			return nil, &PolicyError{Field: field, Value: d, Reason: "would mask the workspace itself"}
		}
		deny = append(deny, res)
		r.denyGiven = append(r.denyGiven, r.policy.Deny[i])
		r.policy.Deny[i] = res
	}
	for _, d := range deny {
		if mounts.Within(ws, d) {
			return nil, &PolicyError{Field: "Workspace", Value: ws, Reason: "lies under the denied path " + d}
		}
	}
	return deny, nil
}

// resolveWritable checks r.policy.Writable and resolves it in place.
func resolveWritable(r *resolved, host hostRules) error {
	roots := []string{r.policy.Workspace}
	for i, w := range r.policy.Writable {
		res, err := resolveTree(r, host, fmt.Sprintf("Writable[%d]", i), w, roots)
		if err != nil {
			return err
		}
		roots = append(roots, res)
		r.policy.Writable[i] = res
	}
	return nil
}

// resolveTree is the one rule for a writable tree beside the workspace (a
// Writable path, Home), given as the caller wrote it, relative to the
// workspace or absolute: resolved, it must not go through a symlink in one
// of roots, the trees already writable (the command's to change: a symlink
// planted there must not turn a writable path into one outside it), pass
// checkWritableTree, exist, not hold the host's home, and lie under no
// denied path. It returns the path resolved.
func resolveTree(r *resolved, host hostRules, field, given string, roots []string) (string, error) {
	if err := checkPath(field, given); err != nil {
		return "", err
	}
	ws := r.policy.Workspace
	res, lex := resolve(given, ws), lexical(given, ws)
	for _, root := range roots {
		if mounts.Within(lex, root) && !mounts.Within(res, root) {
			return "", &PolicyError{Field: field, Value: given, Reason: "resolves through a symlink in writable " + root + " to " + res}
		}
	}
	if err := checkWritableTree(host, field, given, lex, res); err != nil {
		return "", err
	}
	if err := checkSystemTree(field, given, lex, res, r.policy.AllowSystemWrite); err != nil {
		return "", err
	}
	if err := checkGitTree(field, given, lex, res, ws, r.policy.AllowGitWrite); err != nil {
		return "", err
	}
	if _, err := os.Stat(res); err != nil {
		return "", &PolicyError{Field: field, Value: given, Reason: pathReason(err)}
	}
	if host.home != "" && mounts.Within(resolve(host.home, "/"), res) {
		return "", &PolicyError{Field: field, Value: given, Reason: "contains the home directory " + host.home}
	}
	for _, d := range r.deny {
		if mounts.Within(res, d) {
			return "", &PolicyError{Field: field, Value: given, Reason: "lies under the denied path " + d}
		}
	}
	return res, nil
}

// resolveHome checks Policy.Home, a writable tree of its own (resolveTree)
// that must be an absolute path to a directory, and resolves it in place.
func resolveHome(r *resolved, host hostRules) error {
	h := r.policy.Home
	if h == "" {
		return nil
	}
	if err := checkPath("Home", h); err != nil {
		return err
	}
	if !filepath.IsAbs(h) {
		return &PolicyError{Field: "Home", Value: h, Reason: "must be an absolute path"}
	}
	res, err := resolveTree(r, host, "Home", h, r.roots())
	if err != nil {
		return err
	}
	if fi, err := os.Stat(res); err != nil || !fi.IsDir() {
		return &PolicyError{Field: "Home", Value: h, Reason: "not a directory"}
	}
	r.policy.Home = res
	return nil
}

// resolveReads checks Policy.Reads and Policy.Read and resolves Read in
// place (resolveReadTree).
func resolveReads(r *resolved, host hostRules) error {
	p := &r.policy
	switch p.Reads {
	case "", ReadsHost, ReadsListed:
	default:
		return &PolicyError{Field: "Reads", Value: string(p.Reads), Reason: "not a read mode (host or listed)"}
	}
	if len(p.Read) > 0 && !p.listed() {
		return &PolicyError{Field: "Read", Value: p.Read[0], Reason: "only with Reads listed or a Root: otherwise the host's whole tree is readable already"}
	}

	for i, given := range p.Read {
		res, err := resolveReadTree(r, host, fmt.Sprintf("Read[%d]", i), given)
		if err != nil {
			return err
		}
		p.Read[i] = res
	}
	return nil
}

// listed reports whether p's view is a listed one: Reads listed, or built
// on a Root of the caller's.
func (p *Policy) listed() bool { return p.Reads == ReadsListed || p.Root != "" }

// resolveRoot checks Policy.Root and resolves it in place: a tree shown
// read-only (resolveReadTree's rule) that is a directory, not the host's
// whole tree, neither in nor holding a writable tree (a writable bind's
// host tree too), through which a command could change the root its later
// commands run on. Binds are resolved by then.
func resolveRoot(r *resolved, host hostRules) error {
	p := &r.policy
	if p.Root == "" {
		return nil
	}
	if err := checkPath("Root", p.Root); err != nil {
		return err
	}
	if filepath.IsAbs(p.Root) {
		if res, err := filepath.EvalSymlinks(p.Root); err == nil && res == "/" {
			return &PolicyError{Field: "Root", Value: p.Root, Reason: "the host's own root: leave Root empty for the host's tree"}
		}
	}
	res, err := resolveReadTree(r, host, "Root", p.Root)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(res); err != nil || !fi.IsDir() {
		return &PolicyError{Field: "Root", Value: p.Root, Reason: "not a directory: give an unpacked root file system"}
	}
	writable := append(r.roots(), p.Home)
	for _, b := range p.Binds {
		if !b.ReadOnly {
			writable = append(writable, b.Host)
		}
	}
	for _, w := range writable {
		switch {
		case w == "":
		case mounts.Within(res, w):
			return &PolicyError{Field: "Root", Value: p.Root, Reason: "lies in the writable tree " + w + ": a command could change the root its later commands run on"}
		case mounts.Within(w, res):
			return &PolicyError{Field: "Root", Value: p.Root, Reason: "holds the writable tree " + w + ": a command could change the root its later commands run on"}
		}
	}
	p.Root = res
	return nil
}

// listedView is what a listed view (ReadsListed, or a Root) shows of the
// host beside the writable trees: the ListedSystemTrees the host has, each
// a tree or a link made again with the tree it resolves to (not with a
// Root, which has its own), then Tools and Read; nil for the host's reads.
func listedView(p *Policy) *mounts.Listed {
	if !p.listed() {
		return nil
	}
	l := &mounts.Listed{}
	if p.Root != "" {
		l.Root = &mounts.Root{Dir: p.Root}
	}
	for _, t := range ListedSystemTrees {
		if l.Root != nil {
			break // the image's own
		}
		fi, err := os.Lstat(t)
		switch {
		case err != nil:
			// Not on this host (/lib32, /libx32 on most).
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(t)
			if err != nil {
				continue
			}
			l.Links = append(l.Links, mounts.Link{Path: t, Target: target})
			if res, err := filepath.EvalSymlinks(t); err == nil {
				l.Trees = append(l.Trees, res)
			}
		default:
			l.Trees = append(l.Trees, t)
		}
	}
	if p.Tools != "" {
		if res, err := filepath.EvalSymlinks(p.Tools); err == nil {
			l.Trees = append(l.Trees, res)
		}
	}
	l.Trees = append(l.Trees, p.Read...)
	return l
}

// resolveReadTree is the one rule for a host tree shown read-only beside
// the view's own (a Read, a read-only bind's Host): absolute, existing,
// not / itself (the host's whole tree, ReadsHost), in no kernel tree or
// hidden directory (the view has its own, or hides it: a host one there
// would show what the view keeps out) and under no denied path. It
// returns the path resolved.
func resolveReadTree(r *resolved, host hostRules, field, given string) (string, error) {
	if err := checkPath(field, given); err != nil {
		return "", err
	}
	if !filepath.IsAbs(given) {
		return "", &PolicyError{Field: field, Value: given, Reason: "must be an absolute path"}
	}
	res, err := filepath.EvalSymlinks(given)
	if err != nil {
		return "", &PolicyError{Field: field, Value: given, Reason: pathReason(err)}
	}
	if res == "/" {
		return "", &PolicyError{Field: field, Value: given, Reason: "the host's whole tree: that is Reads host"}
	}
	for _, t := range host.noWrite {
		if mounts.Within(res, t.dir) {
			return "", &PolicyError{Field: field, Value: given, Reason: "lies in " + t.dir + ", which every view has of its own or hides"}
		}
	}
	for _, d := range r.deny {
		if mounts.Within(res, d) {
			return "", &PolicyError{Field: field, Value: given, Reason: "lies under the denied path " + d}
		}
	}
	return res, nil
}

// resolveReadOnly checks Policy.ReadOnly and resolves it in place: each
// path lies in a writable tree (the workspace, Writable, Home), by the
// path as given and as resolved, so that a symlink there cannot point the
// carve-out elsewhere.
func resolveReadOnly(r *resolved) error {
	ws := r.policy.Workspace
	roots := r.roots()
	if r.policy.Home != "" {
		roots = append(roots, r.policy.Home)
	}
	for i, ro := range r.policy.ReadOnly {
		field := fmt.Sprintf("ReadOnly[%d]", i)
		if err := checkPath(field, ro); err != nil {
			return err
		}
		lex, res := lexical(ro, ws), resolve(ro, ws)
		in := func(p string) bool {
			return slices.ContainsFunc(roots, func(root string) bool { return mounts.Within(p, root) && p != root })
		}
		switch {
		case !in(lex):
			return &PolicyError{Field: field, Value: ro, Reason: "not inside the workspace, a Writable path or Home: everything else is read-only already"}
		case !in(res):
			return &PolicyError{Field: field, Value: ro, Reason: "resolves through a symlink to " + res + ", outside the writable trees"}
		}
		r.policy.ReadOnly[i] = res
	}
	return nil
}

// resolveApps checks Policy.Apps: Dir a path that stays in the workspace,
// resolved too, ID a single name. Dir is made absolute, and an absolute
// Dir in the workspace is taken as resolution leaves it.
func resolveApps(r *resolved) error {
	a := r.policy.Apps
	if a == nil {
		return nil
	}
	ws := r.policy.Workspace
	if a.Dir == "" {
		a.Dir = "apps"
	}
	if err := checkPath("Apps.Dir", a.Dir); err != nil {
		return err
	}
	dir := a.Dir
	if filepath.IsAbs(dir) {
		// The form resolution leaves it in (a Resolved's policy,
		// checked again): a path in the workspace, made relative.
		if rel, err := filepath.Rel(ws, dir); err == nil && rel != "." {
			dir = rel
		}
	}
	if filepath.IsAbs(dir) || !filepath.IsLocal(dir) {
		return &PolicyError{Field: "Apps.Dir", Value: a.Dir, Reason: "must be a path inside the workspace, relative to it"}
	}
	res := resolve(dir, ws)
	if !mounts.Within(res, ws) || res == ws {
		return &PolicyError{Field: "Apps.Dir", Value: a.Dir, Reason: "resolves through a symlink to " + res + ", outside the workspace"}
	}
	if a.ID != "" {
		if err := checkPath("Apps.ID", a.ID); err != nil {
			return err
		}
		if strings.ContainsRune(a.ID, '/') || a.ID == "." || a.ID == ".." {
			return &PolicyError{Field: "Apps.ID", Value: a.ID, Reason: "must be a single name, the app's directory in Apps.Dir"}
		}
		if err := checkAppTrees(r.policy, filepath.Join(res, a.ID, "data")); err != nil {
			return err
		}
	}
	a.Dir = res
	return nil
}

// checkAppTrees refuses, for an app whose only writable tree in the
// workspace is data, a Writable path or Home elsewhere in the workspace:
// the view hides the rest of the workspace, and a tree there would show
// it again.
func checkAppTrees(p Policy, data string) error {
	fields, trees := []string{"Home"}, []string{p.Home}
	for i, w := range p.Writable {
		fields, trees = append(fields, fmt.Sprintf("Writable[%d]", i)), append(trees, w)
	}
	for i, t := range trees {
		if t != "" && mounts.Within(t, p.Workspace) && !mounts.Within(t, data) {
			return &PolicyError{Field: fields[i], Value: t, Reason: "inside the workspace, of which app " + p.Apps.ID + " writes only " + data}
		}
	}
	return nil
}

// checkWritableTree is the one rule for what may be a writable tree (the
// workspace or a Writable path): given is the path as the caller wrote it
// (field names it), lex the same made absolute and clean, r with symlinks
// resolved. Refused are the whole host tree; the host's noWrite trees and
// anything in them, by either path (/proc/self/cwd names a kernel tree
// even though it resolves elsewhere); and a tree holding the sandbox's
// HOME, which would make the private /tmp and HOME the host's, shared with
// the host and every other sandbox. A tree below the host's /tmp is fine:
// on Linux it is bound at its own path inside the private /tmp.
func checkWritableTree(host hostRules, field, given, lex, r string) error {
	refuse := func(reason string) error {
		return &PolicyError{Field: field, Value: given, Reason: reason}
	}
	if r == "/" {
		return refuse("the whole host tree cannot be writable")
	}
	for _, t := range host.noWrite {
		if mounts.Within(lex, t.dir) || mounts.Within(r, t.dir) {
			return refuse("lies in " + t.dir + ": " + t.why)
		}
	}
	if h := host.sandboxHome; h != "" && (mounts.Within(h, lex) || mounts.Within(h, r) || mounts.Within(resolve(h, "/"), r)) {
		return refuse("would be, or hold, the sandbox's private " + filepath.Dir(h) + " and HOME " + h + ", making them the host's and shared with every other sandbox; use a directory of its own")
	}
	return nil
}

// resolveNetwork checks the network fields and parses the allow-list.
func resolveNetwork(r *resolved) error {
	p := &r.policy
	switch p.Network {
	case "":
		p.Network = NetworkNone
	case NetworkNone, NetworkAllow, NetworkHost:
	default:
		return &PolicyError{Field: "Network", Value: string(p.Network), Reason: "not a network mode (none, allow or host)"}
	}
	if err := checkPublishes(p); err != nil {
		return err
	}
	if err := checkReaches(p); err != nil {
		return err
	}
	if p.Network != NetworkAllow {
		for _, f := range []struct {
			name string
			list []string
		}{{"AllowDomains", p.AllowDomains}, {"PackageManagers", p.PackageManagers}, {"AllowLocal", p.AllowLocal}} {
			if len(f.list) > 0 {
				return &PolicyError{Field: f.name, Value: f.list[0], Reason: "only meaningful when the network mode is allow (it is " + string(p.Network) + ")"}
			}
		}
		return nil
	}
	rules, err := parseNetworkRules(p)
	r.rules = rules
	return err
}

// pathReason says why a path the caller named cannot be used: it is not
// there, or this process may not reach it (a directory on the way it
// cannot search), which the caller mends differently.
func pathReason(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "does not exist"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrPermission) {
		return "cannot be reached: permission denied"
	}
	return "cannot be reached: " + err.Error()
}

// degradable are the layers a policy may allow to be skipped.
var degradable = []Layer{LayerLoopback, LayerKeyring, LayerCgroup, LayerLandlock, LayerUnixSockets}

// skippable are the layers a policy may leave out altogether.
var skippable = []Layer{LayerSeccomp, LayerLoopback, LayerKeyring, LayerLandlock, LayerUnixSockets}
