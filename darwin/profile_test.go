package darwin

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// compileMac compiles as on macOS, without a Mac: paths get their /private
// spelling, and symlinks are not resolved (this host's tree is not a Mac's).
func compileMac(p Policy) (Profile, error) { return compile(p, privatePath) }

// agent is the policy runtime.New gives a command on macOS by default.
func agent() Policy {
	return Policy{
		Workspace: "/Users/dev/project",
		Writable:  []string{"/var/folders/xy/T/hutch-tmp-1"},
		ReadOnly:  []string{"/Users/dev/project/.git/hooks", "/Users/dev/project/.git/config"},
		Deny: []string{"/Users/dev/.ssh", "/Users/dev/.gnupg", "/Users/dev/.aws", "/Users/dev/.kube",
			"/Users/dev/.docker", "/Users/dev/.netrc", "/etc/ssh"},
		HomeDir:   "/Users/dev",
		DenyNames: []string{".env", ".env.*", ".ssh", "id_rsa", "id_ecdsa", "id_ed25519", "id_dsa"},
		AllowPTY:  true,
	}
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    func(*Policy)
	}{
		{"default", func(*Policy) {}},
		{"minimal", func(p *Policy) { *p = Policy{Workspace: "/Users/dev/project", HomeDir: "/Users/dev"} }},
		{"canonical-paths", func(p *Policy) {
			*p = Policy{Workspace: "/tmp/ws", Writable: []string{"/var/folders/xy/T/cache", "/etc/../tmp/other", "/tmp/"},
				Deny: []string{"/etc/ssh", "/private/var/db/x"}, HomeDir: "/var/root"}
		}},
		{"proxy", func(p *Policy) { p.ProxyPort = 3128 }},
		{"host-network", func(p *Policy) { p.HostNetwork = true }},
		{"no-deny-names", func(p *Policy) { p.DenyNames, p.AllowPTY = nil, false }},
		{"deny-name-patterns", func(p *Policy) { p.DenyNames = []string{"*.key", "secret?.txt", "a+b (1)", "~x-y_z,=@%"} }},
		{"hostile-names", func(p *Policy) {
			p.Workspace = `/Users/dev/my "project") (allow default`
			p.Writable = []string{`/Users/dev/a\b`, "/Users/dev/semi;colon (x)", `/Users/dev/#"re"`}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := agent()
			tc.p(&p)
			prof, err := compileMac(p)
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, prof)
			var got strings.Builder
			got.WriteString(prof.Text)
			got.WriteString("\n;; parameters\n")
			for _, p := range prof.Params {
				got.WriteString(";; " + p.Name + "=" + p.Value + "\n")
			}
			golden := filepath.Join("testdata", tc.name+".sb")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./darwin -update writes it)", err)
			}
			if got.String() != string(want) {
				t.Errorf("profile differs from %s:\n%s", golden, got.String())
			}
		})
	}
}

// paramRef is a parameter reference in profile text.
var paramRef = regexp.MustCompile(`\(param "([A-Z_0-9]+)"\)`)

// checkShape checks what every profile must be: parentheses balanced
// outside strings, every parameter referenced passed and every one passed
// referenced, and no parameter's value in the text.
func checkShape(t *testing.T, prof Profile) {
	t.Helper()
	depth, inStr := 0, false
	for i := 0; i < len(prof.Text); i++ {
		switch c := prof.Text[i]; {
		case inStr && c == '\\':
			i++ // the escaped character
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == ';': // a comment, to the end of the line
			for i < len(prof.Text) && prof.Text[i] != '\n' {
				i++
			}
		case c == '"':
			inStr = true
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				t.Fatalf("unbalanced ')' at offset %d:\n%s", i, prof.Text)
			}
		}
	}
	if depth != 0 || inStr {
		t.Errorf("unbalanced profile: depth %d, open string %v:\n%s", depth, inStr, prof.Text)
	}
	passed := map[string]bool{}
	for _, p := range prof.Params {
		if passed[p.Name] {
			t.Errorf("parameter %s passed twice", p.Name)
		}
		passed[p.Name] = true
		if strings.Contains(prof.Text, p.Value) {
			t.Errorf("the path %q appears in the profile text", p.Value)
		}
	}
	referenced := map[string]bool{}
	for _, m := range paramRef.FindAllStringSubmatch(prof.Text, -1) {
		referenced[m[1]] = true
		if !passed[m[1]] {
			t.Errorf("(param %q) is referenced but not passed", m[1])
		}
	}
	for name := range passed {
		if !referenced[name] {
			t.Errorf("parameter %s is passed but never referenced", name)
		}
	}
}

// TestHostileNames puts names that would break out of an SBPL string or
// list in every path field: the profile text must be the very text a
// plain name gives, and the -D arguments must carry the names unchanged.
func TestHostileNames(t *testing.T) {
	plain, err := compileMac(agent())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"with space",
		`quote"d`,
		`back\slash`,
		`trailing\`,
		"paren(s)",
		`") (allow default) ("`,
		`")) (allow file-write* (subpath "/")) ((`,
		"semi;colon",
		`#"regex"`,
		"ünïcode ✓",
	} {
		t.Run(name, func(t *testing.T) {
			p := agent()
			p.Workspace = "/Users/dev/" + name
			p.Writable[0] = "/Users/dev/" + name + "/w"
			p.ReadOnly[0] = "/Users/dev/" + name + "/.git/hooks"
			p.Deny[0] = "/Users/dev/" + name + "/.ssh"
			p.HomeDir = "/Users/" + name
			prof, err := compileMac(p)
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, prof)
			if prof.Text != plain.Text {
				t.Errorf("the name changed the profile text:\n%s", prof.Text)
			}
			args := prof.Args("sh", "-c", "echo hi")
			for _, want := range []string{
				"WORKSPACE=" + p.Workspace,
				"WRITABLE_0=" + p.Writable[0],
				"READONLY_0=" + p.ReadOnly[0],
				"DENY_0=" + p.Deny[0],
				"HOME_DENY_0=" + p.HomeDir + "/Library/Keychains",
			} {
				i := slices.Index(args, want)
				if i < 1 || args[i-1] != "-D" {
					t.Errorf("args do not carry -D %q: %q", want, args)
				}
			}
		})
	}
}

func TestArgs(t *testing.T) {
	prof := Profile{Text: "(version 1)", Params: []Param{{"WORKSPACE", "/w s"}, {"DENY_0", "/d"}}}
	got := prof.Args("sh", "-c", "echo hi")
	want := []string{"-p", "(version 1)", "-D", "WORKSPACE=/w s", "-D", "DENY_0=/d", "--", "sh", "-c", "echo hi"}
	if !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     func(*Policy)
		field string
	}{
		{"relative workspace", func(p *Policy) { p.Workspace = "project" }, "Workspace"},
		{"empty workspace", func(p *Policy) { p.Workspace = "" }, "Workspace"},
		{"relative writable", func(p *Policy) { p.Writable = []string{"/ok", "rel/path"} }, "Writable[1]"},
		{"NUL", func(p *Policy) { p.Writable = []string{"/ok", "/bad\x00nul"} }, "Writable[1]"},
		{"newline", func(p *Policy) { p.Deny = []string{"/new\nline"} }, "Deny[0]"},
		{"carriage return", func(p *Policy) { p.ReadOnly = []string{"/cr\r"} }, "ReadOnly[0]"},
		{"tab", func(p *Policy) { p.Workspace = "/tab\there" }, "Workspace"},
		{"DEL", func(p *Policy) { p.HomeDir = "/Users/del\x7f" }, "HomeDir"},
		{"no home", func(p *Policy) { p.HomeDir = "" }, "HomeDir"},
		{"port too large", func(p *Policy) { p.ProxyPort = 70000 }, "ProxyPort"},
		{"negative port", func(p *Policy) { p.ProxyPort = -1 }, "ProxyPort"},
		{"proxy with host network", func(p *Policy) { p.ProxyPort, p.HostNetwork = 3128, true }, "ProxyPort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := agent()
			tc.p(&p)
			_, err := compileMac(p)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Compile = %v, want an error naming %s", err, tc.field)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "darwin: "+tc.field+" \"") || strings.ContainsAny(msg, "\x00\n\r\t\x7f") {
				t.Errorf("error %q: want darwin: %s \"value\": reason, with the value quoted", msg, tc.field)
			}
		})
	}
}

func TestPrivatePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/tmp/x", "/private/tmp/x"},
		{"/var/folders/a", "/private/var/folders/a"},
		{"/etc", "/private/etc"},
		{"/etc/../tmp/y", "/private/tmp/y"},
		{"/tmp/", "/private/tmp"},
		{"/private/tmp/x", "/private/tmp/x"},
		{"/Users/x", "/Users/x"},
		{"/tmpfoo", "/tmpfoo"},
		{"/variable", "/variable"},
	} {
		if got := privatePath(tc.in); got != tc.want {
			t.Errorf("privatePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResolveExisting(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{dir + "/link", real},
		{dir + "/link/not/yet", real + "/not/yet"},
		{dir + "/real/x", real + "/x"},
		{dir + "/missing/x", dir + "/missing/x"},
	} {
		if got := resolveExisting(tc.in); got != tc.want {
			t.Errorf("resolveExisting(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAncestorsKeptInPlace: the directories holding a denied or read-only
// path inside a writable tree may not be renamed (which would move the
// path out from under its rule); those outside every writable tree need
// no rule, writing there being denied already.
func TestAncestorsKeptInPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want []string
	}{
		{"deny in workspace", Policy{Workspace: "/ws", Deny: []string{"/ws/a/b/secret"}}, []string{"/ws/a/b", "/ws/a", "/ws"}},
		{"read-only in writable", Policy{Workspace: "/ws", Writable: []string{"/tmp/w"}, ReadOnly: []string{"/tmp/w/x/hooks"}}, []string{"/private/tmp/w/x", "/private/tmp/w"}},
		{"shared ancestors once", Policy{Workspace: "/ws", Deny: []string{"/ws/a/1", "/ws/a/2"}}, []string{"/ws/a", "/ws"}},
		{"outside the writable trees", Policy{Workspace: "/ws", Deny: []string{"/Users/dev/.ssh", "/wsx/secret"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.HomeDir = "/Users/dev"
			prof, err := compileMac(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			checkShape(t, prof)
			var got []string
			for _, prm := range prof.Params {
				if strings.HasPrefix(prm.Name, "ANCESTOR_") {
					got = append(got, prm.Value)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept in place %q, want %q", got, tc.want)
			}
		})
	}
}
