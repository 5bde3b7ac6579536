package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refusedEnvNames are names each of the refused groups holds, written out
// from the tools' documentation rather than from refusedEnv, with several
// members of each open-ended class.
var refusedEnvNames = []string{
	// ld.so(8), dyld(1)
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG", "LD_DEBUG_OUTPUT",
	"LD_PROFILE", "LD_PROFILE_OUTPUT", "LD_BIND_NOW", "LD_DYNAMIC_WEAK",
	"LD_HWCAP_MASK", "LD_ORIGIN_PATH", "LD_SHOW_AUXV", "LD_USE_LOAD_BIAS",
	"LD_ASSUME_KERNEL", "LD_AOUT_PRELOAD", "LD_", "LD_ANYTHING_ELSE",
	"DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH",
	"DYLD_FALLBACK_LIBRARY_PATH", "DYLD_IMAGE_SUFFIX", "DYLD_PRINT_TO_FILE",
	// glibc unsecvars
	"GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH",
	// bash(1)
	"BASH_ENV", "ENV", "BASH_FUNC_ls%%", "BASH_FUNC_cd%%", "BASH_FUNC_x()",
	"BASH_FUNC_", "SHELLOPTS", "BASHOPTS", "PS0", "PS1", "PS2", "PS4",
	"PROMPT_COMMAND", "BASH_LOADABLES_PATH", "IFS",
	// perlrun(1)
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
	// ruby(1), gems
	"RUBYOPT", "RUBYLIB", "GEM_PATH", "GEM_HOME",
	// python(1)
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE",
	"PYTHONPLATLIBDIR", "PYTHONBREAKPOINT", "PYTHONPYCACHEPREFIX",
	// node(1)
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
	// java
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
	// lua(1), tclsh(1), php(1), R
	"LUA_INIT", "LUA_INIT_5_4", "LUA_PATH", "LUA_PATH_5_3", "LUA_CPATH", "LUA_CPATH_5_4",
	"TCLLIBPATH", "PHPRC", "PHP_INI_SCAN_DIR", "R_PROFILE", "R_PROFILE_USER",
	// openssl-env(7)
	"OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
	// git(1)
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS",
	"GIT_PROXY_COMMAND", "GIT_EXEC_PATH", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
	"GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_KEY_17",
	"GIT_CONFIG_VALUE_0", "GIT_CONFIG_VALUE_17", "GIT_CONFIG_PARAMETERS",
	"GIT_DIR", "GIT_COMMON_DIR", "GIT_TEMPLATE_DIR", "GIT_ALLOW_PROTOCOL",
	// helpers
	"LESSOPEN", "LESSCLOSE", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "BROWSER",
}

// allowedEnvNames look like refused ones, or were left out on purpose
// (see refusedEnv).
var allowedEnvNames = []string{
	"LD", "LDFLAGS", "OLD_PRELOAD", "ld_preload", "DYLD", "BASH_FUNC", "BASH",
	"ENVIRONMENT", "MY_ENV", "PS3", "PATH", "HOME", "TMPDIR", "TZ", "TZDIR", "LANG",
	"LC_ALL", "HOSTALIASES", "RES_OPTIONS", "MALLOC_TRACE",
	"PAGER", "MANPAGER", "GIT_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
	"GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL", "GIT_CONFIG_NOSYSTEM", "GIT_TERMINAL_PROMPT",
	"GIT_DIRECTORY", "GIT_CONFIGX",
	"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS", "PYTHONSAFEPATH",
	"NODE_ENV", "JAVA_HOME", "PERL5", "LUA", "CI", "TERM",
}

// TestRefusedEnv checks each refused name in a Policy's and a Cmd's
// environment, empty or not, and that the error names the list and the
// variable.
func TestRefusedEnv(t *testing.T) {
	for _, name := range refusedEnvNames {
		for _, field := range []string{"Env", "Cmd.Env"} {
			for _, value := range []string{"/tmp/x", ""} {
				err := checkEnv(field, []string{"OK=1", name + "=" + value, "ALSO=ok"})
				var pe *PolicyError
				if !errors.As(err, &pe) || pe.Field != field+"["+name+"]" {
					t.Errorf("%s %s=%q: %v, want a PolicyError for %s[%s]", field, name, value, err, field, name)
					continue
				}
				if !strings.HasPrefix(pe.Reason, "may not be set: ") {
					t.Errorf("%s %s: reason %q", field, name, pe.Reason)
				}
			}
		}
	}
	for _, name := range allowedEnvNames {
		if err := checkEnv("Env", []string{name + "=x"}); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}

// TestRefusedEnvRulesTested: every rule is exercised by a name above, so
// a rule added without a test fails here.
func TestRefusedEnvRulesTested(t *testing.T) {
	for _, r := range refusedEnv {
		found := false
		for _, name := range refusedEnvNames {
			if name == r.Name || r.Prefix && strings.HasPrefix(name, r.Name) && name != r.Name {
				found = true
			}
		}
		if !found {
			t.Errorf("rule %+v has no name in refusedEnvNames", r)
		}
	}
}

// TestSeatbeltRefusesEnv: the macOS mapping refuses each name as Linux
// does, naming the same field.
func TestSeatbeltRefusesEnv(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(home, "../ws-"+filepath.Base(home))
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	for _, name := range refusedEnvNames {
		p := Policy{Workspace: ws, Env: []string{"OK=1", name + "=x"}}
		_, _, err := resolveSeatbelt(p, home)
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Field != "Env["+name+"]" {
			t.Errorf("seatbeltPolicy with %s: %v, want a PolicyError for Env[%s]", name, err, name)
		}
	}
	p := Policy{Workspace: ws, Env: []string{"PAGER=cat", "GIT_AUTHOR_NAME=x"}}
	if _, _, err := resolveSeatbelt(p, home); err != nil {
		t.Errorf("seatbeltPolicy with an allowed environment: %v", err)
	}
}
