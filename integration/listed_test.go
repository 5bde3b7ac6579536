//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// systemTool is the host's program name from a tree every listed view
// shows (ListedSystemTrees, /usr/local included): /usr/bin's first, then
// PATH's; "" when there is none (a pyenv shim in /root is not one).
func systemTool(name string) string {
	for _, p := range []string{"/usr/bin/" + name, "/usr/local/bin/" + name, "/usr/local/go/bin/" + name} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	if res, err := filepath.EvalSymlinks(p); err == nil {
		for _, t := range runtime.ListedSystemTrees {
			if strings.HasPrefix(res, t+"/") {
				return p
			}
		}
	}
	return ""
}

// TestListedReads: with --reads listed a command can neither read, list
// nor stat what the policy does not list (markers in /root, another
// user's home, /var/lib, /opt and a second checkout beside the workspace,
// placed by the test as root; as another user the host's own /root,
// /home, /var/lib and /opt), while a --read tree is there read-only. The
// command copies every marker it can reach into the workspace; the host
// then finds none there, nor in its output, and finds the --read marker.
func TestListedReads(t *testing.T) {
	ws, other := dir(t, "ws-"), dir(t, "checkout-")
	listed := dir(t, "listed-")
	tag := filepath.Base(ws)
	const marker = "LISTED-MARKER-"
	secrets := map[string]string{filepath.Join(other, ".env.production"): marker + "checkout"}
	if os.Geteuid() == 0 {
		for _, d := range []string{"/root", "/var/lib", "/opt", "/home/hutch-other-" + tag} {
			p := filepath.Join(d, "hutch-listed-"+tag)
			if d != "/root" && d != "/var/lib" && d != "/opt" {
				must(os.MkdirAll(d, 0o755))
				t.Cleanup(func() { os.RemoveAll(d) })
			}
			secrets[p] = marker + filepath.Base(d)
		}
	}
	for p, content := range secrets {
		must(os.WriteFile(p, []byte(content+"\n"), 0o644))
		t.Cleanup(func() { os.Remove(p) })
	}
	must(os.WriteFile(filepath.Join(listed, "shown"), []byte("SHOWN-"+tag+"\n"), 0o644))

	paths := []string{"/root", "/home", "/var/lib", "/opt", other}
	for p := range secrets {
		paths = append(paths, p)
	}
	script := `for p in ` + strings.Join(paths, " ") + `; do
		cat "$p" >> copied 2>/dev/null; ls -A "$p" >> listings 2>/dev/null
		[ -e "$p" ] && echo "$p" >> exists
	done
	cat ` + filepath.Join(listed, "shown") + ` > shown; echo x > ` + filepath.Join(listed, "w") + ` 2>/dev/null; exit 0`
	r := sh(t, ws, script, "--reads", "listed", "--read", listed)
	if r.code != 0 {
		t.Fatalf("hutch run --reads listed: %s", r)
	}
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(ws, f)); return string(b) }
	seen := r.stdout + r.stderr + read("copied") + read("listings")
	if strings.Contains(seen, marker) {
		t.Errorf("the command read a marker outside the listed trees:\n%s", seen)
	}
	if strings.Contains(seen, "hutch-listed-") {
		t.Errorf("the command listed a marker's name:\n%s", seen)
	}
	if e := read("exists"); e != "" {
		t.Errorf("paths outside the listed trees exist in the view:\n%s", e)
	}
	if got := read("shown"); got != "SHOWN-"+tag+"\n" {
		t.Errorf("the --read tree's file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(listed, "w")); err == nil {
		t.Errorf("the command wrote into a --read tree")
	}
	// The same command with the host's reads (the default) sees the
	// checkout: the test can tell.
	if r := sh(t, ws, "cat "+filepath.Join(other, ".env.production")); !strings.Contains(r.stdout, marker) {
		t.Errorf("with the host's reads, the checkout was not readable: %s", r)
	}

	// The file door shows the same view.
	for p := range secrets {
		if r := runCLIArgs(t, "read", "--workspace", ws, "--reads", "listed", p); r.code == 0 || strings.Contains(r.stdout+r.stderr, marker) {
			t.Errorf("hutch read --reads listed %s: %s", p, r)
		}
	}
	if r := runCLIArgs(t, "read", "--workspace", ws, "--reads", "listed", "--read", listed, filepath.Join(listed, "shown")); r.code != 0 || !strings.Contains(r.stdout, "SHOWN-") {
		t.Errorf("hutch read of a --read file: %s", r)
	}
	if r := runCLIArgs(t, "ls", "--workspace", ws, "--reads", "listed", filepath.Dir(ws)); r.code != 0 || strings.Contains(r.stdout, filepath.Base(other)) || !strings.Contains(r.stdout, tag) {
		t.Errorf("hutch ls of the workspace's parent shows the checkout beside it, or not the workspace: %s", r)
	}
}

// TestListedWorkloads: the programs an agent runs work in a listed view,
// each judged by what it left on the host: sh and coreutils, git, python3
// with a venv in the workspace, gcc, node, and go with a --home.
func TestListedWorkloads(t *testing.T) {
	tests := []struct {
		name, tool string
		script     string
		flags      []string
		// check judges the workspace after the run; "" is fine.
		check func(ws string) string
	}{
		{name: "coreutils", tool: "sh", script: `ls /usr/bin | sort | head -3 > out; echo hi | sha256sum | cut -c1-8 >> out; id -u >> out`,
			check: func(ws string) string { return wantLines(ws, "out", 5) }},
		{name: "git", tool: "git", script: `TOOL init -q repo && TOOL -C repo -c user.name=a -c user.email=a@b commit -q --allow-empty -m listed`,
			check: func(ws string) string {
				out, err := exec.Command("git", "-C", filepath.Join(ws, "repo"), "log", "--format=%s").Output()
				if strings.TrimSpace(string(out)) != "listed" {
					return "git log on the host: " + string(out) + " " + errString(err)
				}
				return ""
			}},
		{name: "python venv", tool: "python3", script: `TOOL -m venv venv && venv/bin/python -c 'import sys, json; open("out", "w").write(sys.prefix)'`,
			check: func(ws string) string {
				if b, _ := os.ReadFile(filepath.Join(ws, "out")); string(b) != filepath.Join(ws, "venv") {
					return "the venv's sys.prefix: " + string(b)
				}
				return ""
			}},
		{name: "gcc", tool: "gcc", script: `printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > h.c && TOOL -o h h.c`,
			check: func(ws string) string { return runsOnHost(filepath.Join(ws, "h"), "compiled") }},
		{name: "node", tool: "node", script: `TOOL -e 'require("fs").writeFileSync("out", String(6*7))'`,
			check: func(ws string) string {
				if b, _ := os.ReadFile(filepath.Join(ws, "out")); string(b) != "42" {
					return "node wrote " + string(b)
				}
				return ""
			}},
		{name: "go with a home", tool: "go", flags: []string{"--home", "HOME"},
			script: `printf 'module m\ngo 1.21\n' > go.mod && printf 'package main\nfunc main() { println("built") }\n' > main.go && TOOL build -o g .`,
			check:  func(ws string) string { return runsOnHost(filepath.Join(ws, "g"), "built") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := systemTool(tt.tool)
			if tool == "" {
				t.Skipf("no %s in a system tree here", tt.tool)
			}
			ws := dir(t, "ws-")
			flags := append([]string{"--reads", "listed"}, tt.flags...)
			for i, f := range flags {
				if f == "HOME" {
					flags[i] = dir(t, "home-")
				}
			}
			r := sh(t, ws, strings.ReplaceAll(tt.script, "TOOL", tool), flags...)
			if r.code != 0 {
				t.Fatalf("%s in a listed view: %s", tt.name, r)
			}
			if why := tt.check(ws); why != "" {
				t.Errorf("%s: %s\n%s", tt.name, why, r)
			}
		})
	}
}

// wantLines says why file f of ws does not hold n lines.
func wantLines(ws, f string, n int) string {
	b, _ := os.ReadFile(filepath.Join(ws, f))
	if got := strings.Count(string(b), "\n"); got != n {
		return f + " holds " + string(b)
	}
	return ""
}

// runsOnHost runs program on the host and says why its output is not want.
func runsOnHost(program, want string) string {
	out, err := exec.Command(program).CombinedOutput()
	if strings.TrimSpace(string(out)) != want {
		return program + " on the host said " + string(out) + " " + errString(err)
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
