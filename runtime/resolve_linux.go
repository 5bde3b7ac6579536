//go:build linux

package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchbox/hutch/mounts"
)

// hiddenDirs are replaced by an empty read-only directory in every view:
// they hold the host's unix sockets (systemd, dbus, docker, the user's
// session bus and agents), and a read-only bind does not stop connect().
var hiddenDirs = []string{"/run", "/var/run"}

func (sb *Sandbox) validate() error {
	p := &sb.policy
	if p.Workspace == "" {
		return &PolicyError{Field: "Workspace", Reason: "required"}
	}
	if err := checkPath("Workspace", p.Workspace); err != nil {
		return err
	}
	if !filepath.IsAbs(p.Workspace) {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "must be an absolute path"}
	}
	ws, err := filepath.EvalSymlinks(p.Workspace)
	if err != nil {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "does not exist"}
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "not a directory"}
	}
	if err := checkWritableTree("Workspace", p.Workspace, filepath.Clean(p.Workspace), ws); err != nil {
		return err
	}
	p.Workspace = ws

	home := hostHome()
	// A writable home is a writable ~/.bashrc, ~/.profile, ~/.ssh (if it
	// does not exist yet: a mask needs something to cover) and autostart
	// directories: code that runs on the host at the user's next login.
	if home != "" && mounts.Within(resolve(home, "/"), ws) {
		return &PolicyError{Field: "Workspace", Value: p.Workspace, Reason: "contains the home directory " + home + "; use a project directory"}
	}
	var deny []string
	if !p.NoDefaultDeny {
		for _, d := range DefaultDeny {
			if rest, ok := strings.CutPrefix(d, "~/"); ok {
				if home == "" {
					continue
				}
				d = filepath.Join(home, rest)
			}
			deny = append(deny, resolve(d, ws))
		}
	}
	for i, d := range p.Deny {
		field := fmt.Sprintf("Deny[%d]", i)
		if err := checkPath(field, d); err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(d, "~/"); ok && home != "" {
			d = filepath.Join(home, rest)
		}
		r := resolve(d, ws)
		if lex := lexical(d, ws); lex != r && mounts.Within(lex, ws) && !mounts.Within(r, ws) {
			return &PolicyError{Field: field, Value: d, Reason: "resolves through a symlink in the workspace to " + r}
		}
		if r == "/" || mounts.Within(ws, r) {
			return &PolicyError{Field: field, Value: d, Reason: "would mask the workspace itself"}
		}
		deny = append(deny, r)
		p.Deny[i] = r
	}
	for _, d := range deny {
		if mounts.Within(ws, d) {
			return &PolicyError{Field: "Workspace", Value: ws, Reason: "lies under the denied path " + d}
		}
	}

	var writable []string
	for i, w := range p.Writable {
		field := fmt.Sprintf("Writable[%d]", i)
		if err := checkPath(field, w); err != nil {
			return err
		}
		r := resolve(w, ws)
		// The workspace (and every writable tree) is the command's to
		// change: a symlink planted there must not turn a writable path
		// into one outside it.
		lex := lexical(w, ws)
		for _, root := range append([]string{ws}, writable...) {
			if mounts.Within(lex, root) && !mounts.Within(r, root) {
				return &PolicyError{Field: field, Value: w, Reason: "resolves through a symlink in writable " + root + " to " + r}
			}
		}
		if err := checkWritableTree(field, w, lex, r); err != nil {
			return err
		}
		if _, err := os.Stat(r); err != nil {
			return &PolicyError{Field: field, Value: w, Reason: "does not exist"}
		}
		if home != "" && mounts.Within(resolve(home, "/"), r) {
			return &PolicyError{Field: field, Value: w, Reason: "contains the home directory " + home}
		}
		for _, d := range deny {
			if mounts.Within(r, d) {
				return &PolicyError{Field: field, Value: w, Reason: "lies under the denied path " + d}
			}
		}
		writable = append(writable, r)
		p.Writable[i] = r
	}

	if err := checkEnv("Env", p.Env); err != nil {
		return err
	}
	if p.Tools != "" {
		if err := checkPath("Tools", p.Tools); err != nil {
			return err
		}
		if !filepath.IsAbs(p.Tools) {
			return &PolicyError{Field: "Tools", Value: p.Tools, Reason: "must be an absolute path"}
		}
		if fi, err := os.Stat(p.Tools); err != nil || !fi.IsDir() {
			return &PolicyError{Field: "Tools", Value: p.Tools, Reason: "not an existing directory"}
		}
	}
	for i, l := range p.SkipLayers {
		if !slices.Contains(skippable, l) {
			return &PolicyError{Field: fmt.Sprintf("SkipLayers[%d]", i), Value: string(l), Reason: "not a layer that can be skipped (one of " + fmt.Sprint(skippable) + ")"}
		}
	}
	for i, l := range p.AllowDegraded {
		if !slices.Contains(degradable, l) {
			return &PolicyError{Field: fmt.Sprintf("AllowDegraded[%d]", i), Value: string(l), Reason: "not a layer that can degrade (one of " + fmt.Sprint(degradable) + ")"}
		}
	}

	if err := checkDenyNames(p.DenyNames); err != nil {
		return err
	}
	sb.names = denyNames(p)

	sb.spec = mounts.Spec{
		Workspace:    ws,
		Writable:     writable,
		Deny:         deny,
		Home:         Home,
		TmpSizeBytes: enforced(p.TmpSize),
		HideDirs:     resolveAll(hiddenDirs),
		NoProc:       sb.level == LevelNamespacesNoProc,
	}
	if sb.level == LevelLandlock {
		tmp, err := sb.landlockTmp()
		if err != nil {
			return &SetupError{Layer: LayerLandlock, Op: "make a private temporary directory", Err: err}
		}
		sb.env = mergeEnv(baseEnvAt(p, filepath.Join(tmp, "home")), []string{"TMPDIR=" + tmp})
		sb.env = mergeEnv(sb.env, p.Env)
	} else {
		sb.env = baseEnv(p)
	}
	// The names below the top levels are looked for once; the whole
	// count, with the top levels as they are now, is bounded here too,
	// so that New refuses what every command would.
	sb.deep, sb.deepRepos = scanDeep(sb.roots(), sb.names)
	if _, err := sb.readFresh(); err != nil {
		return err
	}
	return sb.compileFilter()
}

// resolveAll resolves symlinks in each of paths (/var/run is usually a
// link to /run) and drops duplicates.
func resolveAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		if r := resolve(p, "/"); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// kernelTrees are never writable: the sandbox gets its own /proc and /dev,
// and /sys is the host kernel's. Bound read-write over the sandbox's own,
// the host's would be what the command sees and, as root, changes.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// checkWritableTree is the one rule for what may be a writable tree (the
// workspace or a Writable path): given is the path as the caller wrote it
// (field names it), lex the same made absolute and clean, r with symlinks
// resolved. Refused are the whole host tree; the kernel trees and
// anything in them, by either path (/proc/self/cwd names a kernel tree
// even though it resolves elsewhere); the directories the view hides
// (hiddenDirs: the host's sockets, which the unix-sockets layer lets a
// command reach in a writable tree); and a tree holding the sandbox's
// HOME, which would make the private /tmp and HOME the host's, shared with
// the host and every other sandbox. A tree below the host's /tmp is
// fine: it is bound at its own path inside the private /tmp.
func checkWritableTree(field, given, lex, r string) error {
	refuse := func(reason string) error {
		return &PolicyError{Field: field, Value: given, Reason: reason}
	}
	if r == "/" {
		return refuse("the whole host tree cannot be writable")
	}
	for _, k := range kernelTrees {
		if mounts.Within(lex, k) || mounts.Within(r, k) {
			return refuse("lies in " + k + ": kernel interfaces cannot be writable")
		}
	}
	for _, h := range resolveAll(hiddenDirs) {
		if mounts.Within(lex, h) || mounts.Within(r, h) {
			return refuse("lies in " + h + ", which holds the host's sockets and is hidden from every sandbox")
		}
	}
	if mounts.Within(Home, lex) || mounts.Within(Home, r) || mounts.Within(resolve(Home, "/"), r) {
		return refuse("would be, or hold, the sandbox's private " + filepath.Dir(Home) + " and HOME " + Home + ", making them the host's and shared with every other sandbox; use a directory of its own")
	}
	return nil
}

// degradable are the layers a policy may allow to be skipped.
var degradable = []Layer{LayerLoopback, LayerKeyring, LayerCgroup, LayerLandlock, LayerUnixSockets}

// skippable are the layers a policy may leave out altogether.
var skippable = []Layer{LayerSeccomp, LayerLoopback, LayerKeyring, LayerLandlock, LayerUnixSockets}
