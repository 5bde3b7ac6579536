//go:build linux

package runtime

import (
	"os"
	"slices"

	"github.com/hutchbox/hutch/mounts"
)

// hiddenDirs are replaced by an empty read-only directory in every view:
// they hold the host's unix sockets (systemd, dbus, docker, the user's
// session bus and agents), and a read-only bind does not stop connect().
var hiddenDirs = []string{"/run", "/var/run"}

// linuxRules are what Linux adds to resolvePolicy's rules: the hidden
// directories, which the unix-sockets layer would let a command reach in
// a writable tree, and the private /tmp holding HOME.
func linuxRules() hostRules {
	noWrite := slices.Clone(kernelTrees)
	for _, h := range resolveAll(hiddenDirs) {
		noWrite = append(noWrite, hostTree{h, "it holds the host's sockets and is hidden from every sandbox"})
	}
	return hostRules{home: hostHome(), noWrite: noWrite, sandboxHome: Home}
}

// validate is what the level adds to the resolved policy r: the view,
// the names found below the writable trees' top levels, the filter. Like
// resolvePolicy it changes nothing on the host.
func (sb *Sandbox) validate(r resolved) error {
	p := &sb.policy
	if sb.level == LevelLandlock {
		if slices.Contains(p.SkipLayers, LayerLandlock) {
			return &PolicyError{Field: "SkipLayers", Value: string(LayerLandlock), Reason: "at level landlock, Landlock is the only filesystem boundary"}
		}
		if p.Network == NetworkAllow {
			return &PolicyError{Field: "Network", Value: string(p.Network), Reason: "the allow-list needs a network namespace of the sandbox's own, which level landlock does not have"}
		}
		if p.Apps != nil {
			return &PolicyError{Field: "Apps", Reason: "app isolation needs mounts, which level landlock does not have"}
		}
		if len(p.Binds) > 0 {
			return &PolicyError{Field: "Binds", Value: p.Binds[0].String(), Reason: "a host tree at another path needs mounts, which level landlock does not have"}
		}
		if p.Root != "" {
			return &PolicyError{Field: "Root", Value: p.Root, Reason: "a root file system of its own needs mounts, which level landlock does not have"}
		}
		if len(p.ReadOnly) > 0 {
			return &PolicyError{Field: "ReadOnly", Value: p.ReadOnly[0], Reason: "read-only paths inside writable trees need mounts, which level landlock does not have (Landlock cannot take back what a tree grants)"}
		}
	}
	if err := checkNested(p, sb.level, os.Geteuid(), kernelBefore(kernelRelease(), 5, 12)); err != nil {
		return err
	}
	home, writable := Home, slices.Clone(p.Writable)
	if p.Home != "" {
		// A writable tree of its own, bound like the others.
		home, writable = p.Home, append(writable, p.Home)
	}
	var apps *mounts.Apps
	if p.Apps != nil {
		apps = &mounts.Apps{Dir: p.Apps.Dir, ID: p.Apps.ID}
	}
	sb.spec = mounts.Spec{
		Apps:         apps,
		Workspace:    p.Workspace,
		Writable:     writable,
		Deny:         r.deny,
		Home:         home,
		TmpSizeBytes: enforced(p.TmpSize),
		HideDirs:     resolveAll(hiddenDirs),
		NoProc:       sb.level == LevelNamespacesNoProc,
		Listed:       listedView(p),
		Binds:        mountBinds(p.Binds),
	}
	if l := sb.spec.Listed; l != nil && l.Root != nil {
		// What the root holds on the way to the view's own paths, read
		// once: the entries of an image do not change.
		if err := mounts.ReadRoot(sb.spec); err != nil {
			return &PolicyError{Field: "Root", Value: p.Root, Reason: err.Error()}
		}
	}
	// The sandbox's /etc/hosts: the view's with its hostname added.
	sb.spec.Files = viewHosts(sb.spec, slices.Contains(sb.namespaceLayers(), LayerUTSNS) && !slices.Contains(p.SkipLayers, LayerUTSNS))
	// The writable trees are walked once, and watched from then on
	// (small ones walked at each look for a while: treewatch); the
	// count of what the names match is bounded here too, so that New
	// refuses what every command would.
	if err := sb.watchTrees(); err != nil {
		return err
	}
	f, err := sb.scanFresh()
	if err != nil {
		return err
	}
	sb.checked = f
	return sb.compileFilter()
}

// checkNested refuses Policy.AllowNested where a nested sandbox would
// not work or would reach past the sandbox:
//   - at level landlock, whose /proc is the host's and stays read-only to
//     Landlock: a nested user namespace's id maps could not be written;
//   - for a sandbox whose uid 0 is the host's root (euid, the uid hutch
//     runs as, is 0) on a kernel before 5.12 (oldKernel): there an
//     unprivileged process may map uid 0 into a user namespace of its
//     own, whose root then writes file capabilities that hold for the
//     host's root (Linux 5.12 requires CAP_SETFCAP for that mapping);
//     a file with capabilities left in the workspace is a privilege route
//     on the host, as a setuid file is (see seccomp's modeRules).
func checkNested(p *Policy, level Level, euid int, oldKernel bool) error {
	switch {
	case !p.AllowNested:
		return nil
	case level == LevelLandlock:
		return &PolicyError{Field: "AllowNested", Value: "true", Reason: "a nested sandbox writes its user namespace's id maps in /proc, which at level landlock is the host's and stays read-only"}
	case euid == 0 && oldKernel:
		return &PolicyError{Field: "AllowNested", Value: "true", Reason: "as root on a kernel before 5.12 a nested user namespace could map the host's root and write file capabilities that hold on the host; run hutch as another user, or on Linux 5.12+"}
	}
	return nil
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

// mountBinds are binds as the view takes them.
func mountBinds(binds []Bind) []mounts.Bind {
	var out []mounts.Bind
	for _, b := range binds {
		out = append(out, mounts.Bind{Source: b.Host, Target: b.Path, Writable: !b.ReadOnly})
	}
	return out
}
