package darwin

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// macCanon canonicalizes as macOS would, without a Mac: only the /private
// prefixes (EvalSymlinks on this host would see a different tree).
func macCanon(p string) string {
	p = filepath.Clean(p)
	for _, top := range []string{"/tmp", "/var", "/etc"} {
		if p == top || strings.HasPrefix(p, top+"/") {
			return "/private" + p
		}
	}
	return p
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"default", Policy{Workspace: "/Users/dev/project", Deny: []string{"/Users/dev/.ssh", "/Users/dev/.aws", "/Users/dev/project/.env"}}},
		{"canonical-paths", Policy{Workspace: "/tmp/ws", Writable: []string{"/var/folders/xy/T/cache", "/etc/../tmp/other"}}},
		{"proxy", Policy{Workspace: "/Users/dev/project", ProxyPort: 3128}},
		{"host-network", Policy{Workspace: "/Users/dev/project", HostNetwork: true}},
		{"hostile-names", Policy{Workspace: `/Users/dev/my "project") (allow default`, Writable: []string{`/Users/dev/a\b`, "/Users/dev/semi;colon (x)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof, err := Compile(tc.p, "/Users/dev", macCanon)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			got.WriteString(prof.Text)
			got.WriteString("\n;; parameters\n")
			for _, p := range prof.Params {
				got.WriteString(";; " + p.Name + "=" + p.Value + "\n")
			}
			golden := filepath.Join("testdata", tc.name+".sb")
			if *update {
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
			checkShape(t, prof)
		})
	}
}

// checkShape: balanced parentheses outside strings, every parameter
// referenced is passed, and no path is in the text.
func checkShape(t *testing.T, prof Profile) {
	t.Helper()
	depth, inStr := 0, false
	for i, c := range prof.Text {
		switch {
		case inStr && c == '"' && prof.Text[i-1] != '\\':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				t.Fatalf("unbalanced ')' at %d", i)
			}
		}
	}
	if depth != 0 || inStr {
		t.Errorf("unbalanced profile: depth %d, open string %v", depth, inStr)
	}
	passed := map[string]bool{}
	for _, p := range prof.Params {
		passed[p.Name] = true
		if strings.Contains(prof.Text, p.Value) {
			t.Errorf("the path %q appears in the profile text", p.Value)
		}
	}
	for _, m := range regexp.MustCompile(`\(param "([A-Z_0-9]+)"\)`).FindAllStringSubmatch(prof.Text, -1) {
		if !passed[m[1]] {
			t.Errorf("(param %q) has no value", m[1])
		}
	}
}

func TestArgsCarryPathsExactly(t *testing.T) {
	hostile := `/Users/dev/x") (allow default) ("`
	prof, err := Compile(Policy{Workspace: hostile}, "", macCanon)
	if err != nil {
		t.Fatal(err)
	}
	args := prof.Args("sh", "-c", "echo hi")
	if args[0] != "-p" || args[1] != prof.Text {
		t.Fatalf("args start %q", args[:2])
	}
	found := false
	for i, a := range args {
		if a == "-D" && args[i+1] == "WRITABLE_0="+hostile {
			found = true
		}
	}
	if !found {
		t.Errorf("args %q do not carry the workspace exactly", args)
	}
	if tail := args[len(args)-4:]; strings.Join(tail, " ") != "-- sh -c echo hi" {
		t.Errorf("args end %q", tail)
	}
	if strings.Contains(prof.Text, "allow default") {
		t.Error("a path changed the profile")
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		p     Policy
		field string
	}{
		{Policy{Workspace: "relative"}, "Workspace"},
		{Policy{Workspace: "/ws", Writable: []string{"/ok", "/bad\x00nul"}}, "Writable[1]"},
		{Policy{Workspace: "/ws", Deny: []string{"/new\nline"}}, "Deny[0]"},
		{Policy{Workspace: "/ws", ProxyPort: 70000}, "ProxyPort"},
	} {
		_, err := Compile(tc.p, "", macCanon)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Compile(%+v) = %v, want an error naming %s", tc.p, err, tc.field)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{"/tmp/x": "/private/tmp/x", "/var/folders/a": "/private/var/folders/a", "/etc": "/private/etc", "/Users/x": "/Users/x", "/tmpfoo": "/tmpfoo"} {
		if got := macCanon(in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}
