//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	ws := dir(t, "ws-")
	m := plantListedMarkers(t, ws)
	r := sh(t, ws, m.script, "--reads", "listed", "--read", m.listed)
	if r.code != 0 {
		t.Fatalf("hutch run --reads listed: %s", r)
	}
	m.check(t, ws, r, true)
	// The same command with the host's reads (the default) sees the
	// checkout: the test can tell.
	if r := sh(t, ws, "cat "+filepath.Join(m.other, ".env.production")); !strings.Contains(r.stdout, listedMarker) {
		t.Errorf("with the host's reads, the checkout was not readable: %s", r)
	}

	// The file door shows the same view.
	for p := range m.secrets {
		if r := runCLIArgs(t, "read", "--workspace", ws, "--reads", "listed", p); r.code == 0 || strings.Contains(r.stdout+r.stderr, listedMarker) {
			t.Errorf("hutch read --reads listed %s: %s", p, r)
		}
	}
	if r := runCLIArgs(t, "read", "--workspace", ws, "--reads", "listed", "--read", m.listed, filepath.Join(m.listed, "shown")); r.code != 0 || !strings.Contains(r.stdout, "SHOWN-") {
		t.Errorf("hutch read of a --read file: %s", r)
	}
	if r := runCLIArgs(t, "ls", "--workspace", ws, "--reads", "listed", filepath.Dir(ws)); r.code != 0 || strings.Contains(r.stdout, filepath.Base(m.other)) || !strings.Contains(r.stdout, filepath.Base(ws)) {
		t.Errorf("hutch ls of the workspace's parent shows the checkout beside it, or not the workspace: %s", r)
	}
}

// TestListedReadsLandlock: at level landlock (no mount namespace) a
// listed policy is Landlock's read rules for exactly the listed trees:
// nothing outside them is read or listed (its paths still exist, which
// the Result says it does not enforce).
func TestListedReadsLandlock(t *testing.T) {
	ws := dir(t, "ws-")
	m := plantListedMarkers(t, ws)
	r := runCLIArgsEnv(t, []string{"HUTCH_SIMULATE=no-userns"}, "run", "--workspace", ws, "--min-level", "landlock",
		"--reads", "listed", "--read", m.listed, "--", "sh", "-c", m.script)
	if r.code != 0 {
		t.Fatalf("hutch run --reads listed at level landlock: %s", r)
	}
	m.check(t, ws, r, false)
	if !strings.Contains(r.stderr, "reads listed: ") {
		t.Errorf("the run does not say what a listed view does not enforce at level landlock:\n%s", r)
	}
}

// TestOCIListed (issue 44, must-show 4): the OCI form of a listed policy
// (an empty rootfs holding the host's links, the listed trees bound
// read-only) keeps out the same markers under each runtime.
func TestOCIListed(t *testing.T) {
	for _, rt := range ociRuntimes {
		t.Run(rt, func(t *testing.T) {
			flags := ociFlags(t, rt)
			ws := dir(t, "ws-")
			m := plantListedMarkers(t, ws)
			r := sh(t, ws, m.script, append(flags, "--reads", "listed", "--read", m.listed)...)
			if r.code != 0 {
				t.Fatalf("hutch run --backend oci --reads listed: %s", r)
			}
			m.check(t, ws, r, true)
		})
	}
}

const listedMarker = "LISTED-MARKER-"

// listedMarkers are what plantListedMarkers placed for a listed view to
// keep out, and the script that tries to reach them from the workspace.
type listedMarkers struct {
	// secrets are marker files by path, other a checkout beside the
	// workspace, listed a directory to --read holding "shown".
	secrets       map[string]string
	other, listed string
	script        string
}

// plantListedMarkers places markers a listed view must keep out: in a
// checkout beside ws and, as root, in /root, /var/lib, /opt and another
// user's home (removed when the test ends). Its script copies into the
// workspace what it can read (copied) or list (listings) of them and of
// the host's /root, /home, /var/lib and /opt, names those that exist
// (exists), copies the --read tree's file (shown) and tries to write
// there.
func plantListedMarkers(t *testing.T, ws string) listedMarkers {
	t.Helper()
	m := listedMarkers{other: dir(t, "checkout-"), listed: dir(t, "listed-")}
	tag := filepath.Base(ws)
	m.secrets = map[string]string{filepath.Join(m.other, ".env.production"): listedMarker + "checkout"}
	if os.Geteuid() == 0 {
		for _, d := range []string{"/root", "/var/lib", "/opt", "/home/hutch-other-" + tag} {
			if strings.HasPrefix(d, "/home/") {
				must(os.MkdirAll(d, 0o755))
				t.Cleanup(func() { os.RemoveAll(d) })
			}
			m.secrets[filepath.Join(d, "hutch-listed-"+tag)] = listedMarker + filepath.Base(d)
		}
	}
	for p, content := range m.secrets {
		must(os.WriteFile(p, []byte(content+"\n"), 0o644))
		t.Cleanup(func() { os.Remove(p) })
	}
	must(os.WriteFile(filepath.Join(m.listed, "shown"), []byte("SHOWN-"+tag+"\n"), 0o644))
	dirs := []string{"/root", "/home", "/var/lib", "/opt", m.other}
	paths := slices.Clone(dirs)
	for p := range m.secrets {
		paths = append(paths, p)
	}
	m.script = `for d in ` + strings.Join(dirs, " ") + `; do ls -A "$d" >> listings 2>/dev/null; done
	for p in ` + strings.Join(paths, " ") + `; do
		cat "$p" >> copied 2>/dev/null; [ -e "$p" ] && echo "$p" >> exists
	done
	cat ` + filepath.Join(m.listed, "shown") + ` > shown; echo x > ` + filepath.Join(m.listed, "w") + ` 2>/dev/null; exit 0`
	return m
}

// check judges on the host what m's script left in ws and printed (r):
// no marker read or listed, the --read file read and not written, and,
// when stat is judged, nothing outside the listed trees there at all.
func (m listedMarkers) check(t *testing.T, ws string, r cliResult, stat bool) {
	t.Helper()
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(ws, f)); return string(b) }
	seen := r.stdout + r.stderr + read("copied") + read("listings")
	if strings.Contains(seen, listedMarker) {
		t.Errorf("the command read a marker outside the listed trees:\n%s", seen)
	}
	if strings.Contains(seen, "hutch-listed-") {
		t.Errorf("the command listed a marker's name:\n%s", seen)
	}
	if e := read("exists"); stat && e != "" {
		t.Errorf("paths outside the listed trees exist in the view:\n%s", e)
	}
	if got := read("shown"); got != "SHOWN-"+filepath.Base(ws)+"\n" {
		t.Errorf("the --read tree's file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(m.listed, "w")); err == nil {
		t.Errorf("the command wrote into a --read tree")
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

// TestBind (issue 44, must-show 3): --bind HOST:/workspace shows the host
// tree at /workspace to the command and to the file door, with the host's
// path beside it; writes land on the host tree; the deny names and the
// git guard inside it hold at /workspace; a bind that would hide a mask or
// the workspace is refused. With the host's reads, a sandbox path in the
// private /tmp works alike. All judged on the host.
func TestBind(t *testing.T) {
	ws, bound, ref := dir(t, "ws-"), dir(t, "bound-"), dir(t, "ref-")
	must(os.Chmod(bound, 0o777))
	must(os.WriteFile(filepath.Join(ref, "f"), []byte("ref file\n"), 0o644))
	const secret = "BIND-SECRET-ENV"
	must(os.WriteFile(filepath.Join(bound, "f"), []byte("bound file\n"), 0o644))
	must(os.WriteFile(filepath.Join(bound, ".env"), []byte(secret+"\n"), 0o644))
	if out, err := exec.Command("git", "init", "-q", filepath.Join(bound, "repo")).CombinedOutput(); err != nil {
		t.Skipf("git init: %v: %s", err, out)
	}
	must(os.Chmod(filepath.Join(bound, "repo"), 0o777))
	hook := filepath.Join(bound, "repo", ".git", "hooks", "pre-commit")
	for _, tc := range []struct {
		name, at string
		flags    []string
	}{
		// A read-only bind too, at a path the host's root does not have.
		{"listed", "/workspace", []string{"--reads", "listed", "--bind", "REF:/hutch-ref:ro"}},
		{"host reads, in /tmp", "/tmp/agent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := append(slices.Clone(tc.flags), "--bind", bound+":"+tc.at)
			for i, f := range flags {
				flags[i] = strings.ReplaceAll(f, "REF", ref)
			}
			script := `cat /hutch-ref/f > seen-ro 2>/dev/null; cat ` + tc.at + `/f > seen; echo via-bind > ` + tc.at + `/written
				cat ` + tc.at + `/.env > copied 2>/dev/null; echo x > ` + tc.at + `/.env 2>/dev/null
				echo 'touch /tmp/pwned' > ` + tc.at + `/repo/.git/hooks/pre-commit 2>/dev/null; exit 0`
			r := sh(t, ws, script, flags...)
			if r.code != 0 {
				t.Fatalf("hutch run --bind: %s", r)
			}
			read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
			if got := read(filepath.Join(ws, "seen")); got != "bound file\n" {
				t.Errorf("the command read %q at %s/f", got, tc.at)
			}
			if got := read(filepath.Join(ws, "seen-ro")); slices.Contains(tc.flags, "--bind") && got != "ref file\n" {
				t.Errorf("the command read %q at /hutch-ref/f, a read-only bind", got)
			}
			if got := read(filepath.Join(bound, "written")); got != "via-bind\n" {
				t.Errorf("host: the write through the bind holds %q", got)
			}
			os.Remove(filepath.Join(bound, "written"))
			if strings.Contains(read(filepath.Join(ws, "copied"))+r.stdout+r.stderr, secret) {
				t.Errorf("the bound tree's .env was read")
			}
			if got := read(filepath.Join(bound, ".env")); got != secret+"\n" {
				t.Errorf("host: the bound .env was changed: %q", got)
			}
			if _, err := os.Stat(hook); err == nil {
				os.Remove(hook)
				t.Errorf("host: the command planted a hook in the bound repository")
			}

			// The file door sees the same tree at the same path.
			door := append([]string{"--workspace", ws}, flags...)
			r = runCLIArgs(t, append(append([]string{"read"}, door...), tc.at+"/f")...)
			var info struct {
				HostPath string `json:"host_path"`
				Content  string
			}
			if err := json.Unmarshal([]byte(r.stdout), &info); r.code != 0 || err != nil || info.Content != "bound file\n" || info.HostPath != filepath.Join(bound, "f") {
				t.Errorf("hutch read %s/f: %+v %v\n%s", tc.at, info, err, r)
			}
			if r := runCLIArgs(t, append(append([]string{"read"}, door...), tc.at+"/.env")...); r.code == 0 || strings.Contains(r.stdout, secret) {
				t.Errorf("hutch read %s/.env: %s", tc.at, r)
			}
			if r := runCLIArgs(t, append(append([]string{"write"}, door...), "--content", "door", tc.at+"/door")...); r.code != 0 || read(filepath.Join(bound, "door")) != "door" {
				t.Errorf("hutch write %s/door: %s", tc.at, r)
			}
			os.Remove(filepath.Join(bound, "door"))
		})
	}

	// Refused, naming the flag: a bind that would hide a mask, or the
	// workspace, or one the host's read-only root has no place for.
	for _, at := range []string{"/etc/ssh", ws, filepath.Dir(ws), "/hutch-no-such-dir"} {
		r := sh(t, ws, "touch "+filepath.Join(bound, "ran"), "--bind", bound+":"+at)
		if r.code != 125 || !strings.Contains(r.stderr, "--bind "+bound+":"+at+": the sandbox's path") {
			t.Errorf("--bind %s:%s: %s", bound, at, r)
		}
		if _, err := os.Stat(filepath.Join(bound, "ran")); err == nil {
			t.Errorf("--bind %s:%s ran the command", bound, at)
		}
	}
}
