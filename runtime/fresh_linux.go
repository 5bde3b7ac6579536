//go:build linux

package runtime

import (
	"slices"

	"github.com/hutchbox/hutch/mounts"
)

// roots are the trees of the workspace and Writable the view shows, where
// deny names and repositories are looked for: the workspace, or for an app
// (Policy.Apps.ID) only its directory, then Writable (mounts.Spec.Trees).
func (sb *Sandbox) roots() []string { return sb.spec.Trees() }

// dirRoots are the trees a command's working directory may lie in, as
// workDir checks it: the workspace (for an app an empty directory on the
// way to its own) and Writable.
func (sb *Sandbox) dirRoots() []string {
	return append([]string{sb.spec.Workspace}, sb.spec.Writable...)
}

// nameMounts is the number of mounts masking paths and guarding repos
// takes: what mounts.Build plans for them (a mask or read-only bind each,
// a pin for each directory between a writable root and a path in it, and
// the pinned .git of repositories commands may commit to), counted from
// the plan itself, built from spec with them, so the bound follows the one
// rule that makes the mounts (an app's hidden workspace needs none).
func nameMounts(spec mounts.Spec, paths []string, repos []gitRepo, allowGitWrite bool) int {
	spec.Deny = paths
	spec.ReadOnly, spec.Pins = gitGuard(repos, allowGitWrite)
	plan := mounts.Build(spec)
	n := 0
	for _, m := range plan.Mounts {
		if m.Kind == mounts.Mask || m.Kind == mounts.Pin || m.Kind == mounts.ReadOnly {
			n++
		}
	}
	return n
}

// checkNamed refuses a set of matches that would take more than
// MaxNameMounts mounts to mask.
func (sb *Sandbox) checkNamed(all named, repos []gitRepo) error {
	count := all.total()
	mountsNeeded := 0
	if count <= MaxNameMounts {
		if mountsNeeded = nameMounts(sb.spec, all.paths, repos, sb.policy.AllowGitWrite); mountsNeeded <= MaxNameMounts {
			return nil
		}
	}
	e := &MaskLimitError{Names: sb.names, Count: count, Mounts: mountsNeeded, Limit: MaxNameMounts}
	for i, root := range sb.roots() {
		if c := all.counts[i]; c > 0 {
			tree := "writable " + root
			switch {
			case i == 0 && root != sb.spec.Workspace:
				tree = "app directory " + root
			case i == 0:
				tree = "workspace " + root
			}
			e.Trees = append(e.Trees, TreeCount{Tree: tree, Count: c})
		}
	}
	return e
}

// fresh is what the view takes from the host at the moment an init is
// built rather than once per Sandbox: the entries of the writable trees
// that match deny names, and the repositories there, at any depth. A
// pooled init (or the file server) built with other values than the
// current ones is stale. (The host's unix sockets are not
// among them: the unix-sockets layer decides at connect time, so no list
// of them is ever read.)
type fresh struct {
	named named
	repos []gitRepo
}

// readFresh reads the writable trees for an init about to be built, refuses
// them as scanFresh does, and makes the missing code directories of the
// repositories' writable git directories, so that the view can keep them
// read-only.
func (sb *Sandbox) readFresh() (fresh, error) {
	f, err := sb.scanFresh()
	if err == nil {
		makeGitCodeDirs(sb.repos(f), sb.policy.AllowGitWrite)
	}
	return f, err
}

// scanFresh reads what the writable trees hold now, as the watch on them
// has it, and refuses it if it is more than MaxNameMounts can mask. It
// changes nothing on the host.
func (sb *Sandbox) scanFresh() (fresh, error) {
	all, repos, err := sb.treesNow()
	if err != nil {
		return fresh{}, err
	}
	f := fresh{named: all, repos: repos}
	if err := sb.checkNamed(all, f.repos); err != nil {
		return fresh{}, err
	}
	return f, nil
}

func (f fresh) equal(g fresh) bool {
	return slices.Equal(f.named.paths, g.named.paths) && sameRepos(f.repos, g.repos)
}

// repos are the repositories in the writable trees for an init built
// with f.
func (sb *Sandbox) repos(f fresh) []gitRepo { return f.repos }

// plan is the mount plan for an init: the Sandbox's spec plus what is
// read fresh.
func (sb *Sandbox) plan(f fresh) mounts.Plan {
	return planOf(sb.spec, f, sb.policy)
}

// planOf is the plan of spec with f read fresh, under policy p's git
// guard and read-only paths: the one rule sb.plan and Explain's view
// follow.
func planOf(spec mounts.Spec, f fresh, p Policy) mounts.Plan {
	spec.Deny = append(slices.Clone(spec.Deny), f.named.paths...)
	spec.ReadOnly, spec.Pins = gitGuard(f.repos, p.AllowGitWrite)
	spec.ReadOnly = append(spec.ReadOnly, p.ReadOnly...)
	return mounts.Build(spec)
}
