// Package mounts owns the sandbox's filesystem view.
//
// A Plan describes the new root as plain data: which host paths appear
// read-only or read-write, which are masked, where private tmpfs mounts go.
// Plans are built and tested without privileges; the sandbox init turns
// one into mounts inside a fresh mount namespace (package nsinit expands it
// into primitive steps that its C stage performs).
package mounts

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Kind says what one Mount does.
type Kind string

const (
	// HostRoot binds the host's whole tree at / read-only, submounts
	// included, with nosuid and nodev. It must be the first mount of a plan.
	HostRoot Kind = "host-root"
	// EmptyRoot makes the root an empty tmpfs, read-only once the view is
	// built: the host shows only where later steps bind it (a listed
	// view, Spec.Listed). A plan starts with it or with HostRoot.
	EmptyRoot Kind = "empty-root"
	// Symlink makes a symlink at Target holding Link, in a tmpfs of the
	// plan: the host's top-level links (/bin -> usr/bin) in a listed view.
	Symlink Kind = "symlink"
	// BindRW binds host Source at Target read-write (recursively).
	BindRW Kind = "bind-rw"
	// BindRO binds host Source at Target read-only (recursively).
	BindRO Kind = "bind-ro"
	// Tmpfs mounts a fresh tmpfs at Target with Mode and an optional size cap.
	Tmpfs Kind = "tmpfs"
	// EmptyRO mounts an empty, read-only tmpfs at Target: it hides a host
	// directory (such as /run and its sockets) without leaving a writable place.
	EmptyRO Kind = "empty-ro"
	// Proc mounts a fresh procfs for the sandbox's pid namespace at Target,
	// with the kernel interfaces a command has no business touching made
	// read-only or masked.
	Proc Kind = "proc"
	// Dev builds a minimal /dev at Target: null, zero, full, random,
	// urandom, tty, a private devpts and shm.
	Dev Kind = "dev"
	// Dir creates a directory at Target inside a tmpfs of the plan.
	Dir Kind = "dir"
	// Mask makes the file or directory at Target unreadable: an empty
	// mode-0000 file or directory is bound over it, read-only.
	Mask Kind = "mask"
	// Pin binds a directory onto itself so that it is a mount point and
	// cannot be renamed or removed (EBUSY); it keeps masks below it in place.
	Pin Kind = "pin"
	// ReadOnly re-binds Target (already in the view) read-only, e.g. the
	// workspace's .git/hooks.
	ReadOnly Kind = "read-only"
	// File binds a read-only file holding Content over the file at Target
	// (the sandbox's /etc/hosts, which names its hostname): made by the
	// init, nothing of it on the host.
	File Kind = "file"
)

// MaxFileContent bounds a File's Content.
const MaxFileContent = 64 << 10

// Mount is one step of a Plan. Paths are absolute and clean; Target is a
// path inside the new root, Source a path on the host.
type Mount struct {
	Kind   Kind   `json:"kind"`
	Source string `json:"source,omitempty"`
	Target string `json:"target"`
	// Mode is the permission of a Tmpfs or Dir.
	Mode uint32 `json:"mode,omitempty"`
	// SizeBytes caps a Tmpfs; 0 means the kernel default (half of RAM).
	SizeBytes int64 `json:"size,omitempty"`
	// Link is a Symlink's content, as the host's link holds it.
	Link string `json:"link,omitempty"`
	// Content is a File's.
	Content string `json:"content,omitempty"`
	// Optional skips the step when its path does not exist at apply time
	// (a masked file that was deleted, a socket that went away). A missing
	// path of a required step fails the whole setup.
	Optional bool `json:"optional,omitempty"`
}

// String implements fmt.Stringer.
func (m Mount) String() string {
	s := string(m.Kind) + " " + m.Target
	if m.Source != "" && m.Source != m.Target {
		s += " <- " + m.Source
	}
	if m.Link != "" {
		s += " -> " + m.Link
	}
	if m.Optional {
		s += " (optional)"
	}
	return s
}

// Plan is the ordered list of mounts that make up a sandbox's view.
type Plan struct {
	Mounts []Mount `json:"mounts"`
}

// Spec is what a Plan is built from: validated, absolute, clean and
// symlink-resolved host paths. Validation is the caller's job (package
// runtime); Build only orders and combines.
type Spec struct {
	// Workspace is bound read-write at its own path.
	Workspace string
	// Writable are further host paths bound read-write at their own paths.
	Writable []string
	// Deny are host paths masked in the view. A path that does not exist
	// when the command starts is skipped; inside a writable tree its
	// ancestors are pinned (see Build).
	Deny []string
	// ReadOnly are paths inside writable trees that stay read-only (the
	// git directories of the repositories there). A path that does not
	// exist when the command starts is skipped.
	ReadOnly []string
	// Pins are directories inside writable trees that cannot be renamed
	// or removed while what is in them stays writable (a repository's
	// .git when commands may commit).
	Pins []string
	// Home is the sandbox's HOME, created inside the private /tmp.
	Home string
	// TmpSizeBytes caps the private /tmp (and so the home); 0: no cap.
	TmpSizeBytes int64
	// HideDirs are host directories replaced by an empty read-only tmpfs,
	// typically the host's socket directories (/run).
	HideDirs []string
	// Apps, when set, hides a directory of app directories in a writable
	// tree but for one of them.
	Apps *Apps
	// Binds show host trees at other paths of the view (Bind). What Deny,
	// ReadOnly and Pins name inside a bind's Source holds at its Target
	// too, and deny names and repositories are looked for in the sources
	// (Trees).
	Binds []Bind
	// Listed, when set, builds the view on an empty read-only root instead
	// of the host's: of the host, only the trees it lists, the workspace,
	// the writable trees and Home are there.
	Listed *Listed
	// NoProc leaves /proc an empty read-only directory instead of a fresh
	// procfs, for hosts where procfs cannot be mounted (nested in a
	// container whose /proc has masked submounts).
	NoProc bool
	// Files are files the view shows in place of the ones at their paths,
	// read-only: the caller's to make sure the path is a file the view
	// shows read-only (an /etc/hosts naming the sandbox's hostname).
	Files []FileContent
}

// FileContent is a file the view shows at Path, holding Content.
type FileContent struct {
	Path, Content string
}

// Apps hides Dir (absolute, in the workspace) behind an empty read-only
// tmpfs. With an ID, the sandbox runs as that app and is confined to it:
// the whole workspace is hidden so, an empty read-only directory holding
// only the way down to <Dir>/<ID>, which shows read-only with its "data"
// directory the one writable tree of the workspace. Without one, an
// ordinary agent's workspace stays writable but for Dir.
type Apps struct {
	Dir, ID string
}

// Bind shows the host tree Source (absolute, clean, resolved) at Target,
// a path of the view, read-only unless Writable.
type Bind struct {
	Source, Target string
	Writable       bool
}

// Listed is what a listed view shows of the host besides the workspace
// and the writable trees.
type Listed struct {
	// Trees are host directories (or files) shown read-only at their own
	// paths: the system trees programs need and those the caller listed.
	Trees []string
	// Links are the host's symlinks among its top-level system trees
	// (/bin -> usr/bin on a merged /usr), made again at their own paths.
	Links []Link
	// Root, when set, is a root file system of the caller's (an image's)
	// that the view shows read-only instead of an empty root: its
	// entries are bound from it, so that nothing of the host is there
	// but what the view lists, and the host's deny-list has nothing of
	// its own to mask in it.
	Root *Root
}

// Link is a symlink of a listed view: its path and its content.
type Link struct {
	Path, Target string
}

// app is the app's directory, <Dir>/<ID>, or "" for an ordinary agent.
func (a *Apps) app() string {
	if a == nil || a.ID == "" {
		return ""
	}
	return path.Join(a.Dir, a.ID)
}

// Trees are the host trees the workspace and Writable show in the view,
// where deny names and repositories are looked for: the workspace, or for
// an app the app's directory only, then Writable.
func (s Spec) Trees() []string {
	top := s.Workspace
	if app := s.Apps.app(); app != "" {
		top = app
	}
	trees := append([]string{top}, s.Writable...)
	for _, b := range s.Binds {
		trees = append(trees, b.Source)
	}
	return trees
}

// WritableView are the paths of the view a command may write, besides
// its private /tmp: WritableTrees, at their own paths, then the targets of
// the writable Binds. Landlock and the unix-sockets layer take these.
func (s Spec) WritableView() []string {
	out := s.WritableTrees()
	for _, b := range s.Binds {
		if b.Writable {
			out = append(out, b.Target)
		}
	}
	return out
}

// bound adds to paths, host paths, where each of them inside a bind's
// Source also is in the view: at the bind's Target.
func (s Spec) bound(paths []string) []string {
	if len(s.Binds) == 0 {
		return paths // every command's plan: nothing to add
	}
	out := slices.Clone(paths)
	for _, p := range paths {
		for _, b := range s.Binds {
			if rel, ok := within(p, b.Source); ok {
				out = append(out, path.Join(b.Target, rel))
			}
		}
	}
	return out
}

// WritableTrees are the trees the view lets a command write, besides its
// private /tmp: the workspace, or for an app its data directory only,
// then Writable. Landlock must be given these, to agree with the mounts.
func (s Spec) WritableTrees() []string {
	top := s.Workspace
	if app := s.Apps.app(); app != "" {
		top = path.Join(app, "data")
	}
	return append([]string{top}, s.Writable...)
}

// hidden reports whether p lies where Apps hides the host's tree (Dir, or
// for an app the whole workspace, but the app's directory): the view holds
// nothing there to mask, pin or guard, and a step there would only make
// its path appear.
func (s Spec) hidden(p string) bool {
	if s.Listed != nil && !s.listedShows(p) {
		return true
	}
	a := s.Apps
	switch {
	case a == nil:
		return false
	case a.ID == "":
		return Within(p, a.Dir)
	}
	return Within(p, s.Workspace) && !Within(p, a.app())
}

// listedShows reports whether a listed view holds host path p: it lies in
// a listed tree, a writable one or the workspace. (Only a Listed Spec asks.)
func (s Spec) listedShows(p string) bool {
	in := func(trees []string) bool {
		return slices.ContainsFunc(trees, func(t string) bool { return Within(p, t) })
	}
	if in(s.Listed.Trees) || in(s.WritableTrees()) {
		return true
	}
	top := s.Workspace
	if app := s.Apps.app(); app != "" {
		top = app
	}
	return in([]string{top}) || in(s.Writable) || slices.ContainsFunc(s.Binds, func(b Bind) bool { return Within(p, b.Target) })
}

// Build turns a Spec into a Plan. Order matters and is fixed: the host root
// first, then private mounts, then writable binds, then pins and read-only
// rebinds inside them, and masks last so nothing can be mounted over them.
func Build(s Spec) Plan {
	var p Plan
	add := func(m Mount) { p.Mounts = append(p.Mounts, m) }

	switch {
	case s.Listed == nil:
		add(Mount{Kind: HostRoot, Source: "/", Target: "/"})
	case s.Listed.Root != nil:
		add(Mount{Kind: EmptyRoot, Target: "/"})
		for _, m := range s.Listed.Root.steps("/", s.ownPaths()) {
			add(m)
		}
	default:
		// Links first: a tree is bound at its resolved path, never
		// through one (the executor follows no symlink).
		add(Mount{Kind: EmptyRoot, Target: "/"})
		links := slices.Clone(s.Listed.Links)
		slices.SortFunc(links, func(a, b Link) int { return strings.Compare(a.Path, b.Path) })
		for _, l := range links {
			add(Mount{Kind: Symlink, Target: l.Path, Link: l.Target})
		}
	}
	add(Mount{Kind: Dev, Target: "/dev"})
	if s.NoProc {
		add(Mount{Kind: EmptyRO, Target: "/proc"})
	} else {
		add(Mount{Kind: Proc, Target: "/proc"})
	}
	add(Mount{Kind: Tmpfs, Target: "/tmp", Mode: 0o1777, SizeBytes: s.TmpSizeBytes})
	for _, d := range s.shown(s.HideDirs) {
		add(Mount{Kind: EmptyRO, Target: d, Optional: true})
	}
	if s.Listed != nil {
		// After the private mounts, which would bury a tree listed in
		// /tmp; a listed tree that went away since the policy was
		// checked is not there to show.
		for _, t := range outermost(sortedUnique(s.Listed.Trees)) {
			add(Mount{Kind: BindRO, Source: t, Target: t, Optional: true})
		}
	}

	writable := s.WritableTrees()
	app := s.Apps.app()
	for _, w := range sortedUnique(writable) {
		if app == "" || w != writable[0] {
			add(Mount{Kind: BindRW, Source: w, Target: w})
		}
	}
	if s.Home != "" {
		// The home lives in the private /tmp unless it is elsewhere in a
		// writable tree; mkdir -p its components below /tmp.
		if rel, ok := within(s.Home, "/tmp"); ok && rel != "." {
			cur := "/tmp"
			for _, c := range strings.Split(rel, "/") {
				cur = path.Join(cur, c)
				add(Mount{Kind: Dir, Target: cur, Mode: 0o700})
			}
		}
	}
	// Over the writable binds (one holding the workspace must not bury
	// it), under the pins, read-only paths and masks (which may lie in
	// the app's directory).
	if app != "" {
		add(Mount{Kind: EmptyRO, Target: s.Workspace})
		add(Mount{Kind: BindRO, Source: app, Target: app, Optional: true})
		add(Mount{Kind: BindRW, Source: writable[0], Target: writable[0], Optional: true})
	} else if s.Apps != nil {
		add(Mount{Kind: EmptyRO, Target: s.Apps.Dir, Optional: true})
	}
	// Host trees at other paths: after the private mounts and the trees
	// at their own paths, which a target may lie in (/tmp, a listed
	// root), before the masks and guards that hold inside them.
	binds := slices.Clone(s.Binds)
	slices.SortFunc(binds, func(a, b Bind) int { return strings.Compare(a.Target, b.Target) })
	for _, b := range binds {
		kind := BindRO
		if b.Writable {
			kind = BindRW
			writable = append(writable, b.Target)
		}
		add(Mount{Kind: kind, Source: b.Source, Target: b.Target})
	}
	// A masked or read-only path inside a writable tree could otherwise
	// be moved away by renaming one of its ancestors (and another put in
	// its place): pin every ancestor between the writable root and it.
	masks := outermost(s.shown(s.bound(s.Deny)))
	readOnly := s.shown(s.bound(s.ReadOnly))
	pinned := map[string]bool{}
	var pins []string
	pin := func(dir string) {
		if !pinned[dir] {
			pinned[dir] = true
			pins = append(pins, dir)
		}
	}
	pinsShown := s.shown(s.bound(s.Pins))
	for _, d := range append(append(slices.Clone(masks), readOnly...), pinsShown...) {
		root, ok := longestPrefix(d, writable)
		if !ok {
			continue
		}
		for dir := path.Dir(d); dir != root && strings.HasPrefix(dir, root+"/"); dir = path.Dir(dir) {
			pin(dir)
		}
	}
	for _, d := range pinsShown {
		if root, ok := longestPrefix(d, writable); ok && d != root {
			pin(d)
		}
	}
	// Shallow first: pinning a parent after its child would bury the child's pin.
	sort.Slice(pins, func(i, j int) bool {
		return strings.Count(pins[i], "/") < strings.Count(pins[j], "/") ||
			(strings.Count(pins[i], "/") == strings.Count(pins[j], "/") && pins[i] < pins[j])
	})
	for _, d := range pins {
		add(Mount{Kind: Pin, Target: d, Optional: true})
	}
	// Over the trees they lie in, under the masks (a masked path stays
	// masked).
	for _, f := range s.Files {
		add(Mount{Kind: File, Target: f.Path, Content: f.Content, Optional: true})
	}
	for _, r := range readOnly {
		add(Mount{Kind: ReadOnly, Target: r, Optional: true})
	}
	for _, d := range masks {
		add(Mount{Kind: Mask, Target: d, Optional: true})
	}
	return p
}

// shown are paths, sorted and unique, but those Apps hides.
func (s Spec) shown(paths []string) []string {
	return slices.DeleteFunc(sortedUnique(paths), s.hidden)
}

// Validate checks the plan's own shape: absolute clean paths and a root
// (HostRoot or EmptyRoot) first and only there. It does not look at the
// host.
func (p Plan) Validate() error {
	if len(p.Mounts) == 0 || !p.Mounts[0].isRoot() {
		return fmt.Errorf("mounts: plan must start with %s or %s", HostRoot, EmptyRoot)
	}
	for i, m := range p.Mounts {
		if !isAbsClean(m.Target) {
			return fmt.Errorf("mounts: step %d (%s): target %q is not absolute and clean", i, m.Kind, m.Target)
		}
		if m.Source != "" && !isAbsClean(m.Source) {
			return fmt.Errorf("mounts: step %d (%s): source %q is not absolute and clean", i, m.Kind, m.Source)
		}
		if (m.Kind == BindRO || m.Kind == BindRW) && m.Source == "" {
			return fmt.Errorf("mounts: step %d (%s): no source", i, m.Kind)
		}
		if i > 0 && m.isRoot() {
			return fmt.Errorf("mounts: step %d: %s only comes first", i, m.Kind)
		}
		if m.isRoot() && m.Target != "/" {
			return fmt.Errorf("mounts: step %d (%s): target %q is not /", i, m.Kind, m.Target)
		}
		if (m.Kind == Symlink) != (m.Link != "") {
			return fmt.Errorf("mounts: step %d (%s): a link's content goes with a symlink, and only there", i, m.Kind)
		}
		if m.Kind == Symlink && m.Target == "/" {
			return fmt.Errorf("mounts: step %d (%s): target is /", i, m.Kind)
		}
		if m.Kind != File && m.Content != "" {
			return fmt.Errorf("mounts: step %d (%s): content goes with a file, and only there", i, m.Kind)
		}
		if m.Kind == File && (m.Target == "/" || len(m.Content) > MaxFileContent || strings.IndexByte(m.Content, 0) >= 0) {
			return fmt.Errorf("mounts: step %d (%s): target / or content over %d bytes or holding a NUL", i, m.Kind, MaxFileContent)
		}
	}
	return nil
}

// Reach is what a path of the view is on the host.
type Reach int

const (
	// OnHost: the host's file, at Place.HostPath.
	OnHost Reach = iota
	// Masked: hidden by a Mask or an EmptyRO; the view shows an empty file
	// or directory.
	Masked
	// Private: in a filesystem of the sandbox's own (Tmpfs, Dev, Proc),
	// which exists only inside a running sandbox.
	Private
	// Built: an empty root's directories and links (EmptyRoot, Symlink),
	// made on the way to what a listed view shows, and the plan's Files:
	// read-only, the same in every sandbox of the plan, none of them a
	// host's file.
	Built
)

// Place is where a path of the view lies: what Lookup returns.
type Place struct {
	Reach Reach
	// HostPath is the path's host file when Reach is OnHost.
	HostPath string
	// Writable says the mount the path lies on is read-write.
	Writable bool
	// Closed says a Masked path is a Mask's mode-0000 file or directory,
	// which a command cannot even enter (an EmptyRO's directory it can).
	Closed bool
}

// Lookup says what path p (absolute, clean, symlinks resolved) is in the
// view p builds, as the mount table would: each step whose target contains
// p replaces what was there before it, in plan order (a later step on an
// ancestor buries an earlier one on a descendant), except ReadOnly, which
// only takes writing away, and Pin and Dir, which change neither. It is the
// view a command sees, read on the host, for those who must act on it
// without a command (the sandbox's file operations).
func (p Plan) Lookup(target string) Place {
	var pl Place
	for _, m := range p.Mounts {
		rel, ok := within(target, m.Target)
		if !ok {
			continue
		}
		switch m.Kind {
		case HostRoot, BindRW, BindRO:
			src := m.Source
			if src == "" {
				src = m.Target
			}
			pl = Place{Reach: OnHost, HostPath: path.Join(src, rel), Writable: m.Kind == BindRW}
		case Tmpfs, Dev, Proc:
			pl = Place{Reach: Private, Writable: m.Kind == Tmpfs}
		case File:
			pl = Place{Reach: Built}
		case Mask, EmptyRO:
			pl = Place{Reach: Masked, Closed: m.Kind == Mask}
		case EmptyRoot, Symlink:
			pl = Place{Reach: Built}
		case ReadOnly:
			pl.Writable = false
		case Pin, Dir:
		}
	}
	return pl
}

// HostBelow reports whether a tree of the host's is bound somewhere
// strictly below target and not buried by a later step: a path on the way
// to it, private as it may be (a workspace under the private /tmp), holds
// the way there.
func (p Plan) HostBelow(target string) bool {
	for _, m := range p.Mounts {
		if (m.Kind == BindRW || m.Kind == BindRO) && m.Target != target && Within(m.Target, target) && p.Lookup(m.Target).Reach == OnHost {
			return true
		}
	}
	return false
}

func (m Mount) isRoot() bool { return m.Kind == HostRoot || m.Kind == EmptyRoot }

func isAbsClean(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// within reports whether p is dir or below it, and p relative to dir.
func within(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	// Not HasPrefix(p, dir+"/"): Lookup calls this for every mount and
	// every rule of a plan, and the concatenation allocated each time.
	if len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir) {
		return p[len(dir)+1:], true
	}
	return "", false
}

// Within reports whether path p is dir itself or lies below it.
func Within(p, dir string) bool {
	_, ok := within(p, dir)
	return ok
}

// Resolve makes p absolute (relative to base) and clean, and resolves the
// symlinks in the longest part of it that exists, so that a path yet to
// be made names where it will be, and a path through a symlink names what
// the kernel would reach. It is the one way hutch resolves a path it
// judges (a writable tree, a mask, a layer's narrowing) before the kernel
// does.
func Resolve(p, base string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// longestPrefix returns the deepest of roots that contains p.
func longestPrefix(p string, roots []string) (string, bool) {
	best, found := "", false
	for _, r := range roots {
		if Within(p, r) && len(r) >= len(best) {
			best, found = r, true
		}
	}
	return best, found
}

// outermost drops the paths that lie within another of them:
// a masked directory hides what is in it, and a mask below one could not
// be mounted (its target is in the mask's empty, read-only tmpfs).
func outermost(paths []string) []string {
	var out []string
	for _, p := range paths {
		if !slices.ContainsFunc(out, func(o string) bool { return Within(p, o) }) {
			out = append(out, p)
		}
	}
	return out
}

func sortedUnique(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
