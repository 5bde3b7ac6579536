package runtime

import (
	"errors"
	"slices"

	"github.com/hutchbox/hutch/darwin"
)

// darwinRules are what macOS adds to resolvePolicy's rules: "~" must be
// known (the keychains, privacy database and cookies under it are always
// denied), and a deny name must be one a Seatbelt profile can spell. It
// is portable so that the macOS resolution is tested where the tests run.
func darwinRules(home string) hostRules {
	return hostRules{
		home:     home,
		needHome: true,
		noWrite:  slices.Clone(kernelTrees),
		checkName: func(field, name string) error {
			return seatbeltError(darwin.CheckDenyName(field, name))
		},
	}
}

// seatbeltLevel refuses a MinLevel macOS cannot reach: it has no
// namespaces. Its Seatbelt profile holds what LevelLandlock does, so
// "" (the strongest there is), LevelSeatbelt and LevelLandlock pass.
func seatbeltLevel(min Level) error {
	switch min {
	case "", LevelSeatbelt, LevelLandlock:
		return nil
	}
	return &LevelError{Need: min, Have: LevelSeatbelt, Reasons: []string{"macOS has no namespaces; the Seatbelt profile is its sandbox"}}
}

// seatbeltPolicy maps a resolved policy onto the macOS backend's. It
// reads the writable trees for git repositories, which it returns too
// (New makes the missing code directories of those that will be
// writable), and changes nothing.
func seatbeltPolicy(r resolved) (darwin.Policy, []gitRepo) {
	roots := r.roots()
	repos := append(topRepos(roots), deepRepos(roots)...)
	readOnly, pins := gitGuard(repos, r.policy.AllowGitWrite)
	readOnly = append(readOnly, r.policy.ReadOnly...)
	return darwin.Policy{
		Workspace: r.policy.Workspace,
		Writable:  slices.Clone(r.policy.Writable),
		ReadOnly:  readOnly,
		Pins:      pins,
		Deny:      slices.Clone(r.deny),
		HomeDir:   r.home,
		DenyNames: slices.Clone(r.names),
		// Linux gives every sandbox its own devpts; ptys are as harmless
		// here, where only those the command made can be opened.
		AllowPTY:    true,
		HostNetwork: r.policy.Network == NetworkHost,
	}, repos
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
