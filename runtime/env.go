package runtime

import (
	"os"
	"slices"
	"strings"
)

// An envRule refuses the variables it matches: Name exactly, or, when
// Prefix is set, every name that begins with it (the class is open-ended).
type envRule struct {
	Name   string
	Prefix bool
	Why    string
}

// Reasons shared by the groups of refusedEnv.
const (
	whyLoader = "the dynamic loader or the C library loads code or trusted data it names"
	whyShell  = "the shell runs code it holds"
	whyInterp = "the interpreter loads code it names at startup"
	whyGit    = "git runs a program, or reads a configuration that can name one, from it"
	whyHelper = "a program runs the command it names without a person asking"
)

// refusedEnv are the variables neither a Policy nor a Cmd may set, on
// Linux and macOS alike: each makes a loader, a shell or an interpreter
// run code that the command itself does not name, in every command the
// sandbox runs. The groups follow each tool's own documentation.
//
// Not refused, by choice:
//   - PAGER, MANPAGER, GIT_PAGER, EDITOR, VISUAL, GIT_EDITOR and
//     GIT_SEQUENCE_EDITOR name the program a tool starts to show or edit
//     text for a person at a terminal (git pages only when its output is
//     one, and edits only when no message was given). Harnesses set them
//     to cat or true precisely so that an unattended command never waits
//     on one; refusing them would take that safety away.
//   - PATH, JAVA_HOME and the like choose which program a name finds, as
//     the caller already does by naming the command.
//   - The rest of glibc's unsecvars (TMPDIR, TZDIR, HOSTALIASES,
//     LOCALDOMAIN, RES_OPTIONS, RESOLV_HOST_CONF, NIS_PATH, MALLOC_TRACE)
//     choose where ordinary data is read or written, not code.
//   - PYTHONWARNINGS: a dotted category imports a module, but only from
//     the path the interpreter already trusts (PYTHONPATH is refused);
//     the known chain through it ends in BROWSER, refused below.
var refusedEnv = []envRule{
	// ld.so(8): every LD_ variable is the loader's (LD_PRELOAD,
	// LD_LIBRARY_PATH, LD_AUDIT, LD_DEBUG_OUTPUT...); dyld(1) likewise for
	// DYLD_ on macOS.
	{Name: "LD_", Prefix: true, Why: whyLoader},
	{Name: "DYLD_", Prefix: true, Why: whyLoader},
	// glibc's sysdeps/generic/unsecvars.h, the variables it drops for
	// setuid programs, less those that only place data (see above):
	// iconv modules, getconf's programs, tunables parsed by ld.so itself
	// (CVE-2023-4911), locale archives and message catalogs (printf
	// formats) it trusts.
	{Name: "GCONV_PATH", Why: whyLoader},
	{Name: "GETCONF_DIR", Why: whyLoader},
	{Name: "GLIBC_TUNABLES", Why: whyLoader},
	{Name: "LOCPATH", Why: whyLoader},
	{Name: "NLSPATH", Why: whyLoader},

	// bash(1): startup files (BASH_ENV, and ENV in POSIX mode and for sh),
	// exported functions (BASH_FUNC_name%%, which replace any command of
	// that name), options that turn on xtrace so that PS4's command
	// substitutions run, prompts expanded the same way, loadable builtins.
	// IFS: bash and dash reset it, but other sh (and old setuid attacks)
	// split system(3) command lines with an inherited one.
	{Name: "BASH_ENV", Why: whyShell},
	{Name: "ENV", Why: whyShell},
	{Name: "BASH_FUNC_", Prefix: true, Why: whyShell},
	{Name: "SHELLOPTS", Why: whyShell},
	{Name: "BASHOPTS", Why: whyShell},
	{Name: "PS0", Why: whyShell},
	{Name: "PS1", Why: whyShell},
	{Name: "PS2", Why: whyShell},
	{Name: "PS4", Why: whyShell},
	{Name: "PROMPT_COMMAND", Why: whyShell},
	{Name: "BASH_LOADABLES_PATH", Why: whyShell},
	{Name: "IFS", Why: whyShell},

	// perlrun(1).
	{Name: "PERL5OPT", Why: whyInterp},
	{Name: "PERL5LIB", Why: whyInterp},
	{Name: "PERLLIB", Why: whyInterp},
	{Name: "PERL5DB", Why: whyInterp},
	// ruby(1); gems are loaded from GEM_PATH and GEM_HOME.
	{Name: "RUBYOPT", Why: whyInterp},
	{Name: "RUBYLIB", Why: whyInterp},
	{Name: "GEM_PATH", Why: whyInterp},
	{Name: "GEM_HOME", Why: whyInterp},
	// python(1): module search path and home, the startup script, the
	// user site directory (whose .pth files run), the breakpoint() hook,
	// the bytecode cache read instead of the sources.
	{Name: "PYTHONPATH", Why: whyInterp},
	{Name: "PYTHONHOME", Why: whyInterp},
	{Name: "PYTHONSTARTUP", Why: whyInterp},
	{Name: "PYTHONUSERBASE", Why: whyInterp},
	{Name: "PYTHONPLATLIBDIR", Why: whyInterp},
	{Name: "PYTHONBREAKPOINT", Why: whyInterp},
	{Name: "PYTHONPYCACHEPREFIX", Why: whyInterp},
	// node(1).
	{Name: "NODE_OPTIONS", Why: whyInterp},
	{Name: "NODE_PATH", Why: whyInterp},
	{Name: "NODE_REPL_EXTERNAL_MODULE", Why: whyInterp},
	// java(1) and the JVM Tool Interface (-javaagent, -XX options).
	{Name: "JAVA_TOOL_OPTIONS", Why: whyInterp},
	{Name: "_JAVA_OPTIONS", Why: whyInterp},
	{Name: "JDK_JAVA_OPTIONS", Why: whyInterp},
	{Name: "CLASSPATH", Why: whyInterp},
	// lua(1): LUA_INIT and its versioned LUA_INIT_5_x run code;
	// LUA_PATH and LUA_CPATH (also versioned) find modules.
	{Name: "LUA_INIT", Prefix: true, Why: whyInterp},
	{Name: "LUA_PATH", Prefix: true, Why: whyInterp},
	{Name: "LUA_CPATH", Prefix: true, Why: whyInterp},
	// tclsh(1), php(1) (php.ini's auto_prepend_file), R's Startup.
	{Name: "TCLLIBPATH", Why: whyInterp},
	{Name: "PHPRC", Why: whyInterp},
	{Name: "PHP_INI_SCAN_DIR", Why: whyInterp},
	{Name: "R_PROFILE", Why: whyInterp},
	{Name: "R_PROFILE_USER", Why: whyInterp},
	// openssl-env(7): the configuration loads engines and providers.
	{Name: "OPENSSL_CONF", Why: whyLoader},
	{Name: "OPENSSL_ENGINES", Why: whyLoader},
	{Name: "OPENSSL_MODULES", Why: whyLoader},

	// git(1) ENVIRONMENT and git-config(1): programs git runs on its own
	// (ssh, diff drivers, credential prompts, proxies, its helpers), and
	// the configuration, repository and templates that can name more
	// (core.fsmonitor, core.hooksPath, hooks). GIT_ALLOW_PROTOCOL can
	// allow ext::, whose URLs are commands.
	{Name: "GIT_SSH", Why: whyGit},
	{Name: "GIT_SSH_COMMAND", Why: whyGit},
	{Name: "GIT_EXTERNAL_DIFF", Why: whyGit},
	{Name: "GIT_ASKPASS", Why: whyGit},
	{Name: "GIT_PROXY_COMMAND", Why: whyGit},
	{Name: "GIT_EXEC_PATH", Why: whyGit},
	{Name: "GIT_CONFIG", Why: whyGit},
	{Name: "GIT_CONFIG_GLOBAL", Why: whyGit},
	{Name: "GIT_CONFIG_SYSTEM", Why: whyGit},
	{Name: "GIT_CONFIG_COUNT", Why: whyGit},
	{Name: "GIT_CONFIG_KEY_", Prefix: true, Why: whyGit},
	{Name: "GIT_CONFIG_VALUE_", Prefix: true, Why: whyGit},
	{Name: "GIT_CONFIG_PARAMETERS", Why: whyGit},
	{Name: "GIT_DIR", Why: whyGit},
	{Name: "GIT_COMMON_DIR", Why: whyGit},
	{Name: "GIT_TEMPLATE_DIR", Why: whyGit},
	{Name: "GIT_ALLOW_PROTOCOL", Why: whyGit},

	// Helpers run with no terminal or person involved: less(1)'s input
	// preprocessor, ssh(1)'s password prompt, the browser that xdg-open
	// and Python's webbrowser start.
	{Name: "LESSOPEN", Why: whyHelper},
	{Name: "LESSCLOSE", Why: whyHelper},
	{Name: "SSH_ASKPASS", Why: whyHelper},
	{Name: "SSH_ASKPASS_REQUIRE", Why: whyHelper},
	{Name: "BROWSER", Why: whyHelper},
}

// rustupHome is the host's rustup home: $RUSTUP_HOME, or ~/.rustup when
// it exists; "" without rustup.
func rustupHome() string {
	if r := os.Getenv("RUSTUP_HOME"); r != "" {
		return r
	}
	if h, err := os.UserHomeDir(); err == nil {
		if fi, err := os.Stat(h + "/.rustup"); err == nil && fi.IsDir() {
			return h + "/.rustup"
		}
	}
	return ""
}

// refusedEnvReason says why the variable name may not be set, or "" if it
// may. It is the one test both backends apply.
// SetsEnv reports whether a sandbox sets the variable name itself, to a
// place of its own view (HOME, TMPDIR, the caches in HOME), where a value
// from elsewhere (an image's GOPATH=/go) would name a read-only tree.
func SetsEnv(name string) bool {
	if name == "PATH" {
		return false
	}
	for _, kv := range baseEnvAt(&Policy{Root: "/"}, Home) {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return !slices.Contains(hostEnv(), k)
		}
	}
	return false
}

// EnvRefused says why a sandbox refuses the variable name in Policy.Env
// and Cmd.Env, or "" when it does not: for those who take variables from
// elsewhere (an image's configuration) and must leave such ones out.
func EnvRefused(name string) string { return refusedEnvReason(name) }

func refusedEnvReason(name string) string {
	for _, r := range refusedEnv {
		if name == r.Name || r.Prefix && strings.HasPrefix(name, r.Name) {
			return r.Why
		}
	}
	return ""
}

// checkEnv validates KEY=VALUE pairs. field names the list (Env, Cmd.Env);
// a refused variable is named in the error as field[KEY].
func checkEnv(field string, env []string) error {
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return &PolicyError{Field: field, Value: kv, Reason: "not in KEY=VALUE form"}
		case strings.IndexByte(kv, 0) >= 0:
			return &PolicyError{Field: field, Value: k, Reason: "contains a NUL byte"}
		}
		if why := refusedEnvReason(k); why != "" {
			return &PolicyError{Field: field + "[" + k + "]", Reason: "may not be set: " + why}
		}
	}
	return nil
}

// hostEnvNames are the variables the clean environment copies from the
// host's own, when set there: they describe its terminal, locale and
// user. PATH and RUSTUP_HOME are the host's too (see hostEnv).
var hostEnvNames = []string{"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME"}

// hostEnv are the names of the variables of the clean environment whose
// values are the host's, wholly or in part: PATH (Tools, if any, before
// the host's), the terminal, locale and user, and RUSTUP_HOME. A root
// that is not the host's (an image) has its own.
func hostEnv() []string {
	return append(append([]string{"PATH"}, hostEnvNames...), "RUSTUP_HOME")
}

// baseEnvAt is the clean environment every command starts from: a few
// host variables that describe the terminal and locale, HOME (at home) and
// the caches in it, and the policy's additions.
func baseEnvAt(p *Policy, Home string) []string {
	path := os.Getenv("PATH")
	if path == "" || p.Root != "" {
		// A root of the caller's has its own programs, where the
		// host's PATH means nothing.
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if p.Tools != "" {
		path = p.Tools + ":" + path
	}
	env := []string{"PATH=" + path}
	for _, k := range hostEnvNames {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		"HOME="+Home,
		"USERPROFILE="+Home, // what tools written for Windows as well read
		"TMPDIR=/tmp",
		"TMP=/tmp",
		"TEMP=/tmp",
		"XDG_CONFIG_HOME="+Home+"/.config",
		"XDG_CACHE_HOME="+Home+"/.cache",
		"XDG_DATA_HOME="+Home+"/.local/share",
		"XDG_STATE_HOME="+Home+"/.local/state",
		"XDG_RUNTIME_DIR="+Home+"/.run",
		"GOCACHE="+Home+"/.cache/go-build",
		"GOPATH="+Home+"/go",
		"npm_config_cache="+Home+"/.npm",
		"PIP_CACHE_DIR="+Home+"/.cache/pip",
		"PYTHONUSERBASE="+Home+"/.local",
		"CARGO_HOME="+Home+"/.cargo",
		"HUTCH_SANDBOX=1",
	)
	if r := rustupHome(); r != "" && p.Root == "" {
		// rustup's toolchains stay the host's, read-only in the view: the
		// cargo and rustc on PATH are its proxies, which find them there.
		env = append(env, "RUSTUP_HOME="+r)
	}
	return mergeEnv(env, p.Env)
}
