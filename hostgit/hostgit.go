package hostgit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Command returns a command that runs the host's git (the first git in
// PATH) in dir with args, configured so that nothing a sandboxed command
// could have planted in dir's repository runs on the host.
//
// Running plain git in a workspace a command wrote to runs whatever that
// command planted: a repository's own configuration names programs git
// starts by itself (core.fsmonitor on every status, core.hooksPath and
// .git/hooks on commit, filter.<driver>.clean on add, diff.<driver>.textconv
// on diff, core.pager, aliases, core.sshCommand, credential.helper, ...),
// it can include further files or be redirected to another directory's
// configuration by .git/commondir, and git status runs git again inside
// every submodule, which reads that submodule's own configuration. Result
// lists the repositories a command created or replaced
// (Result.Repositories): those are the ones to handle with Command.
//
// A command may still be running, and rewriting the repository's
// configuration, while git starts: Command therefore gives git a copy
// of the repository's configuration file, made once and held where no
// sandbox can reach it (a directory hutch-git-PID-* in os.TempDir,
// removed when ctx is done; GIT_COMMON_DIR, with the rest of the repository linked in, and
// GIT_DIR and GIT_WORK_TREE naming the repository found), and checks that
// copy: what git reads is what was checked (see hostgit_hold.go). git
// cannot change the configuration, pack refs, delete a packed ref or
// deepen a shallow clone through it (it says a lock file exists), and a
// repository whose configuration includes other files (include.path,
// includeIf) or reads config.worktree (extensions.worktreeConfig) is
// refused, those files being read again by git. Outside any repository,
// git is given an empty directory as its repository, so that it finds
// none a command makes meanwhile.
//
// Command first lists that configuration (git config --list
// --show-scope --includes, which runs nothing) and overrides
// every setting of the repository's own file (the local scope, the
// configuration of the common directory a commondir redirect points to)
// with an empty value, except the few that only describe data (see
// repoKeys). It then sets, whatever the configuration says, the values in
// alwaysConfig: no fsmonitor, no hooks, no recursion into submodules, no
// ext:: transport, no local transport (a path or file:// remote), no bare
// repository found by discovery, no automatic gc. The overrides are
// passed in the environment (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>,
// GIT_CONFIG_VALUE_<n>; git 2.31 or later), so every git process git itself
// starts inherits them; an older git, which would ignore them, is an error.
// The user's system and global configuration are left as they are: they are
// the user's own. A setting the repository also sets is overridden all the
// same, so a repository that sets core.pager, say, runs git with no pager
// even if the user's global configuration names one.
//
// An empty value disables most settings and makes git fail on the rest
// (a diff driver's textconv, diff.external, core.sshCommand: "cannot run"),
// which is safe. Where no override can disable a setting, Command
// returns an error naming it instead of a command: remote.<name>.uploadpack
// and receivepack (git uses the first value it reads, the repository's),
// core.worktree (git reads it from the repository's file alone; it could
// point a checkout at the home directory), and the includes and
// extensions.worktreeConfig above. A planted
// core.gitProxy is disabled through GIT_PROXY_COMMAND, which git consults
// first.
//
// Starting from the caller's environment, Command removes the variables
// that would make git read another repository or other files than dir's:
// GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR, GIT_INDEX_FILE,
// GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES, GIT_CONFIG (which
// would make the listing read one file only) and any earlier
// GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n> and
// GIT_CONFIG_VALUE_<n>. Global options at the start of args that choose the
// repository or the configuration (-C, -c, --config-env, --git-dir,
// --work-tree, --bare) are given to the listing too, so it describes the
// repository the command will use.
//
// Not covered: git run by an explicit git submodule or --recurse-submodules
// reads each submodule's own configuration, with only alwaysConfig applied
// there.
//
// A missing git is an error wrapping exec.ErrNotFound.
func Command(ctx context.Context, dir string, args ...string) (*exec.Cmd, error) {
	return gitCommand(ctx, dir, true, args...)
}

// gitCommand is Command, with the repository's configuration held
// still or, with hold false, read by git from the repository's own file
// (listed, then read again by git): for git worktree add alone, which
// writes the common directory's path into the worktree it makes.
func gitCommand(ctx context.Context, dir string, hold bool, args ...string) (*exec.Cmd, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git in %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("git in %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("git in %s: not a directory", dir)
	}
	env := gitEnviron(os.Environ())
	if !hold {
		return heldCommand(ctx, git, dir, args, env)
	}
	always := configEnv(alwaysEntries())
	loc, inRepo, err := locateRepo(ctx, git, dir, repoOptions(args), slices.Concat(env, always))
	if err != nil {
		return nil, fmt.Errorf("git in %s: finding its repository: %w", dir, err)
	}
	var held []string
	var remove func()
	if inRepo {
		held, remove, err = holdRepo(&loc)
	} else {
		held, remove, err = holdRepo(nil)
	}
	if err != nil {
		return nil, fmt.Errorf("git in %s: holding its configuration still: %w", dir, err)
	}
	cmd, err := heldCommand(ctx, git, dir, args, slices.Concat(env, held))
	if err != nil {
		remove()
		return nil, err
	}
	context.AfterFunc(ctx, remove)
	return cmd, nil
}

// heldCommand lists the configuration git reads in dir with env (which
// points it at a held copy of the repository's) and returns the command
// that runs git with args and every override the listing calls for.
func heldCommand(ctx context.Context, git, dir string, args, env []string) (*exec.Cmd, error) {
	out, err := gitOutput(ctx, git, dir, slices.Concat(env, configEnv(alwaysEntries())),
		append(repoOptions(args), "config", "--list", "--show-scope", "-z", "--includes")...)
	if err != nil {
		return nil, fmt.Errorf("git in %s: listing its configuration: %w", dir, err)
	}
	entries, err := parseConfigList([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("git in %s: listing its configuration: %w", dir, err)
	}
	if !sawAlways(entries) {
		return nil, fmt.Errorf("git in %s: %s ignores GIT_CONFIG_COUNT (git 2.31 or later is needed)", dir, git)
	}
	overrides, extraEnv, err := repoOverrides(entries, env)
	if err != nil {
		return nil, fmt.Errorf("git in %s: %w", dir, err)
	}

	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = dir
	cmd.Env = slices.Concat(env, extraEnv, configEnv(append(overrides, alwaysEntries()...)))
	return cmd, nil
}

// A configEntry is one setting as git config --list --show-scope reports
// it: the scope (system, global, local, worktree, command) and the key
// with its value. noValue marks a key written without "=" (a boolean
// true).
type configEntry struct {
	scope, key, value string
	noValue           bool
}

// alwaysConfig are set for every command, whatever any configuration says,
// and so also in submodules and other repositories git itself enters.
var alwaysConfig = []struct{ key, value string }{
	// The fsmonitor hook runs on every command that reads the index.
	{"core.fsmonitor", "false"},
	// A file, not a directory: no hook can be found beneath it, neither
	// the repository's .git/hooks nor a directory the configuration names.
	// (An empty core.hooksPath would look for /pre-commit and the like.)
	{"core.hooksPath", "/dev/null"},
	// Commands that recurse run git inside each submodule, which reads that
	// submodule's own configuration; status and diff look into submodules
	// (git status --porcelain=2 in each) unless told to ignore them.
	{"submodule.recurse", "false"},
	{"diff.ignoreSubmodules", "all"},
	{"status.submoduleSummary", "false"},
	{"fetch.recurseSubmodules", "false"},
	{"push.recurseSubmodules", "no"},
	// ext::<command> URLs run the command; git's default already refuses
	// them, this keeps a user's protocol.allow from letting them through.
	{"protocol.ext.allow", "never"},
	// A local path or file:// URL (a remote's, or one a planted
	// url.<base>.insteadOf rewrites an ordinary-looking URL to) makes git
	// start receive-pack or upload-pack on a repository in the workspace,
	// with these overrides cleared: that repository's hooks and config
	// would run. Local transports are refused.
	{"protocol.file.allow", "never"},
	// A bare repository planted in a subdirectory would be found by
	// discovery, with its own configuration; explicit (--git-dir) ones are
	// still used.
	{"safe.bareRepository", "explicit"},
	// The held copy's packed-refs.lock is made in advance (see
	// hostgit_hold.go): fail at once rather than retry for a second.
	{"core.packedRefsTimeout", "0"},
	// No automatic gc or maintenance: they would pack refs, which the
	// held copy cannot keep.
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
}

func alwaysEntries() []configEntry {
	e := make([]configEntry, len(alwaysConfig))
	for i, c := range alwaysConfig {
		e[i] = configEntry{scope: "command", key: c.key, value: c.value}
	}
	return e
}

// A treatment is what Command does with a key the repository's own
// configuration sets.
type treatment int

const (
	overrideEmpty treatment = iota // the default: override with ""
	keep                           // data git needs to read the repository
	refuse                         // no override can disable it: no command
	emptyProxyEnv                  // disabled by an empty GIT_PROXY_COMMAND
)

// repoKeys says how to treat what a repository's own configuration sets.
// It is an allow-list: any key not named here, including keys a later git
// adds that run programs (git 2.46's hook.<name>.command, say), is
// overridden with an empty value. A deny-list would have to know every
// program-running key of every git version the host might have, and a
// planted key it missed would run.
//
// A pattern is section.name or section.subsection.name; "*" as the
// subsection matches any subsection, and "*" as the name any name.
var repoKeys = []struct {
	pattern string
	treat   treatment
	why     string // for refuse: why no override works
}{
	// How to read the repository at all. But config.worktree is read
	// from the git directory, not from the held copy of the configuration
	// (the first pattern that matches counts: this one before
	// extensions.*).
	{pattern: "extensions.worktreeconfig", treat: refuse, why: "it makes git read config.worktree, which git would read again after it was checked"},
	{pattern: "core.repositoryformatversion", treat: keep},
	{pattern: "core.bare", treat: keep},
	{pattern: "extensions.*", treat: keep},
	{pattern: "core.filemode", treat: keep},
	{pattern: "core.logallrefupdates", treat: keep},
	{pattern: "core.ignorecase", treat: keep},
	{pattern: "core.precomposeunicode", treat: keep},
	{pattern: "core.symlinks", treat: keep},
	{pattern: "core.autocrlf", treat: keep},
	{pattern: "core.eol", treat: keep},
	{pattern: "core.safecrlf", treat: keep},
	{pattern: "core.quotepath", treat: keep},
	// Sparse checkouts and partial clones: which files and objects the
	// repository holds.
	{pattern: "core.sparsecheckout", treat: keep},
	{pattern: "core.sparsecheckoutcone", treat: keep},
	{pattern: "index.sparse", treat: keep},
	{pattern: "remote.*.promisor", treat: keep},
	{pattern: "remote.*.partialclonefilter", treat: keep},
	// Who commits, where the remotes are, how branches track them.
	{pattern: "user.name", treat: keep},
	{pattern: "user.email", treat: keep},
	{pattern: "remote.*.url", treat: keep},
	{pattern: "remote.*.pushurl", treat: keep},
	{pattern: "remote.*.fetch", treat: keep},
	{pattern: "remote.*.push", treat: keep},
	{pattern: "remote.*.tagopt", treat: keep},
	{pattern: "remote.*.prune", treat: keep},
	{pattern: "branch.*.remote", treat: keep},
	{pattern: "branch.*.merge", treat: keep},
	{pattern: "branch.*.rebase", treat: keep},
	// A URL rewrite names a URL, as remote.<name>.url does (and ext:: is
	// never allowed). An empty insteadOf would be worse than none: it is a
	// prefix of every URL, so every URL would be rewritten to the base.
	{pattern: "url.*.insteadof", treat: keep},
	{pattern: "url.*.pushinsteadof", treat: keep},
	// Defaults and display.
	{pattern: "init.defaultbranch", treat: keep},
	{pattern: "pull.rebase", treat: keep},
	{pattern: "pull.ff", treat: keep},
	{pattern: "push.default", treat: keep},
	{pattern: "fetch.prune", treat: keep},
	{pattern: "color.*", treat: keep},
	{pattern: "color.*.*", treat: keep},
	{pattern: "diff.renames", treat: keep},
	{pattern: "diff.algorithm", treat: keep},
	{pattern: "status.showuntrackedfiles", treat: keep},
	{pattern: "gc.auto", treat: keep},

	// git would read an included file again when it starts, and a
	// command could have changed it by then: only the configuration file
	// itself is held still (hostgit_hold.go).
	{pattern: "include.path", treat: refuse, why: "it names another file, which git would read again after it was checked"},
	{pattern: "includeif.*.path", treat: refuse, why: "it names another file, which git would read again after it was checked"},

	{pattern: "remote.*.uploadpack", treat: refuse, why: "a program git runs to fetch from a local repository; git uses the first value it reads, so no override can replace it"},
	{pattern: "remote.*.receivepack", treat: refuse, why: "a program git runs to push to a local repository; git uses the first value it reads, so no override can replace it"},
	{pattern: "core.worktree", treat: refuse, why: "git reads it from the repository's own file alone, so no override can undo it, and it can point a checkout at any directory"},
	// git uses the first core.gitProxy that matches, but looks at
	// GIT_PROXY_COMMAND before any.
	{pattern: "core.gitproxy", treat: emptyProxyEnv},
}

// treatmentOf returns how to treat key, a key as git config --list
// reports it (section and name lowercased, the subsection as written).
func treatmentOf(key string) (treatment, string) {
	sec, sub, name := splitKey(key)
	for _, k := range repoKeys {
		psec, psub, pname := splitKey(k.pattern)
		if sec == psec && (pname == "*" || name == pname) &&
			(psub == sub || psub == "*" && sub != "") {
			return k.treat, k.why
		}
	}
	return overrideEmpty, ""
}

// splitKey splits a configuration key into its section, subsection and
// name, lowercasing the section and name, which git compares without
// regard to case. The subsection, which git compares exactly, may itself
// hold dots.
func splitKey(key string) (section, subsection, name string) {
	i, j := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if i < 0 {
		return strings.ToLower(key), "", ""
	}
	section, name = strings.ToLower(key[:i]), strings.ToLower(key[j+1:])
	if i < j {
		subsection = key[i+1 : j]
	}
	return section, subsection, name
}

// canonicalKey is key with its section and name lowercased, for comparing
// keys as git does.
func canonicalKey(key string) string {
	sec, sub, name := splitKey(key)
	if sub == "" {
		return sec + "." + name
	}
	return sec + "." + sub + "." + name
}

// repoOverrides returns the overrides for the settings of the
// repository's own files among entries, and the variables to add to env.
func repoOverrides(entries []configEntry, env []string) (overrides []configEntry, extraEnv []string, err error) {
	seen := map[string]bool{}
	for _, c := range alwaysConfig {
		seen[canonicalKey(c.key)] = true
	}
	for _, e := range entries {
		if e.scope != "local" && e.scope != "worktree" {
			continue
		}
		key := canonicalKey(e.key)
		treat, why := treatmentOf(key)
		switch treat {
		case keep:
			continue
		case refuse:
			if key == "extensions.worktreeconfig" && !gitTrue(e) {
				continue // off: no config.worktree is read
			}
			return nil, nil, fmt.Errorf("the repository's configuration sets %s, %s; remove it (git config --unset-all %s) to run git here", e.key, why, e.key)
		case emptyProxyEnv:
			if !hasEnv(env, "GIT_PROXY_COMMAND") && !hasEnv(extraEnv, "GIT_PROXY_COMMAND") {
				extraEnv = append(extraEnv, "GIT_PROXY_COMMAND=")
			}
			continue
		}
		if !seen[key] {
			seen[key] = true
			overrides = append(overrides, configEntry{scope: "command", key: e.key})
		}
	}
	return overrides, extraEnv, nil
}

// gitTrue reports whether e, a boolean setting, is on, as git reads it.
func gitTrue(e configEntry) bool {
	if e.noValue {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(e.value)) {
	case "", "false", "no", "off", "0":
		return false
	}
	return true
}

// sawAlways reports whether the listing holds the first of alwaysConfig
// as a command-scope setting: whether git honoured GIT_CONFIG_COUNT.
func sawAlways(entries []configEntry) bool {
	want := canonicalKey(alwaysConfig[0].key)
	for _, e := range entries {
		if e.scope == "command" && canonicalKey(e.key) == want {
			return true
		}
	}
	return false
}

// parseConfigList parses the output of git config --list --show-scope -z:
// for each setting a NUL-terminated scope, then the key, and, unless the
// key was written without a value, a newline and the value, terminated by
// NUL. (Keys hold no newline; values may.)
func parseConfigList(out []byte) ([]configEntry, error) {
	if len(out) == 0 {
		return nil, nil
	}
	if out[len(out)-1] != 0 {
		return nil, errors.New("git config output does not end in NUL")
	}
	fields := strings.Split(string(out[:len(out)-1]), "\x00")
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("git config output has %d fields, not scope and key pairs", len(fields))
	}
	entries := make([]configEntry, 0, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		key, value, ok := strings.Cut(fields[i+1], "\n")
		entries = append(entries, configEntry{scope: fields[i], key: key, value: value, noValue: !ok})
	}
	return entries, nil
}

// configEnv returns the variables that give entries to git as
// command-line configuration.
func configEnv(entries []configEntry) []string {
	env := make([]string, 0, 1+2*len(entries))
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(entries)))
	for i, e := range entries {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+e.key, "GIT_CONFIG_VALUE_"+n+"="+e.value)
	}
	return env
}

// redirectingEnv are the variables gitEnviron removes: each makes git read
// another repository, or other files, than the one found from its
// directory (GIT_CONFIG makes git config read that one file alone, so the
// listing would miss the repository's settings).
var redirectingEnv = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
}

// gitEnviron returns env without redirectingEnv and without earlier
// GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n>.
func gitEnviron(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if isRedirecting(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isRedirecting(name string) bool {
	// Windows has case-insensitive variable names; elsewhere git_dir is
	// not GIT_DIR, and upper-casing it only removes a variable git ignores.
	name = strings.ToUpper(name)
	if strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
		return true
	}
	for _, r := range redirectingEnv {
		if name == r {
			return true
		}
	}
	return false
}

// hasEnv reports whether env sets name.
func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n == name {
			return true
		}
	}
	return false
}

// repoOptions returns the global options at the start of args (those
// before git's subcommand) that choose the repository or add
// configuration: -C, -c, --config-env, --git-dir, --work-tree and --bare,
// with their values. Other global options are left out, with the values
// of those that take one as a separate argument.
func repoOptions(args []string) []string {
	var opts []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, attached := strings.Cut(a, "=")
		switch {
		case a == "-C" || a == "-c":
			opts = append(opts, args[i:min(i+2, len(args))]...)
			i++
		case name == "--config-env" || name == "--git-dir" || name == "--work-tree":
			if attached {
				opts = append(opts, a)
			} else {
				opts = append(opts, args[i:min(i+2, len(args))]...)
				i++
			}
		case a == "--bare":
			opts = append(opts, a)
		case !attached && (a == "--namespace" || a == "--super-prefix" || a == "--attr-source"):
			i++
		}
	}
	return opts
}
