//go:build linux

package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explainWorld is a host tree with one path of every class Explain
// names: a fake HOME with ~/.ssh, a workspace holding a .env and a
// repository, a tree outside it with a file the policy denies and one it
// does not show when reads are listed, and a tree bound writable
// elsewhere.
type explainWorld struct {
	base, home, ws, outside, bindSrc, bindDst string
}

func newExplainWorld(t *testing.T) explainWorld {
	t.Helper()
	// Not under /tmp: the sandbox's /tmp is its own.
	base, err := os.MkdirTemp("/var/tmp", "hutch-explain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	w := explainWorld{base: base, home: base + "/home", ws: base + "/ws", outside: base + "/outside", bindSrc: base + "/bindsrc", bindDst: base + "/mnt"}
	for _, f := range []string{"home/.ssh/id_ed25519", "ws/a.txt", "ws/.env", "ws/repo/.git/HEAD", "ws/repo/.git/hooks/pre-commit", "outside/secret.txt", "outside/o.txt", "bindsrc/b.txt", "bindsrc/.env"} {
		p := filepath.Join(base, f)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte("MARKER "+f+"\n"), 0o644))
	}
	must(t, os.MkdirAll(w.bindDst, 0o755))
	t.Setenv("HOME", w.home)
	return w
}

// policy is the default policy over w's workspace, the outside secret
// denied and bindsrc bound writable at mnt; listed shows only what a
// listed view does.
func (w explainWorld) policy(listed bool) Policy {
	p := DefaultPolicy(w.ws)
	p.Deny = []string{w.outside + "/secret.txt"}
	p.Binds = []Bind{{Host: w.bindSrc, Path: w.bindDst}}
	if listed {
		p.Reads = ReadsListed
	}
	return p
}

// TestExplain asks Explain about a path of every class, on a Sandbox and
// on Check's Resolved, which must agree: which rule, allowed or not, the
// words naming it, and how to allow it. Integration's TestExplain runs
// each access through hutch run and checks on the host that the kernel
// agrees.
func TestExplain(t *testing.T) {
	w := newExplainWorld(t)
	rows := []struct {
		name    string
		listed  bool
		path    string
		access  Access
		allowed bool
		rule    Rule
		reason  string // in Reason
		allow   string // in Allow.Flag; "" for no remedy
	}{
		{"default deny", false, w.home + "/.ssh/id_ed25519", AccessRead, false, RuleDefaultDeny, "~/.ssh/id_ed25519 lies in ~/.ssh, masked: default deny-list (~/.ssh)", "--no-default-deny"},
		{"policy deny", false, w.outside + "/secret.txt", AccessRead, false, RuleDeny, "masked: the policy's deny-list", "drop --deny " + w.outside + "/secret.txt"},
		{"deny name", false, ".env", AccessRead, false, RuleDenyName, `masked: default deny name ".env" in a writable tree`, "--no-default-deny"},
		{"git guard", false, "repo/.git/hooks/pre-commit", AccessWrite, false, RuleGitGuard, "read-only: git guard for repository " + w.ws + "/repo", "--allow-git-write"},
		{"git guard read", false, "repo/.git/hooks/pre-commit", AccessRead, true, RuleGitGuard, "git guard", ""},
		{"outside writable", false, "/etc/hutch-explain-probe", AccessWrite, false, RuleOutsideWritable, "/etc/hutch-explain-probe lies in /etc, outside the writable trees", "--write /etc --allow-system-write /etc"},
		{"outside read", false, "/etc/hostname", AccessRead, true, RuleOutsideWritable, "outside the writable trees", ""},
		{"workspace write", false, "new.txt", AccessWrite, true, RuleWritableTree, "in the workspace " + w.ws, ""},
		{"listed absent", true, w.outside + "/o.txt", AccessRead, false, RuleNotInView, "not in the view: reads are listed", "--read " + w.outside + "/o.txt"},
		{"listed workspace", true, "a.txt", AccessRead, true, RuleWritableTree, "workspace", ""},
		{"private tmp", false, "/tmp/hutch-explain-probe", AccessWrite, true, RulePrivateTmp, "private /tmp", ""},
		{"writable bind", false, w.bindDst + "/b.txt", AccessWrite, true, RuleWritableTree, "the writable bind of " + w.bindSrc + " at " + w.bindDst, ""},
		{"deny name in a bind", false, w.bindDst + "/.env", AccessRead, false, RuleDenyName, w.bindDst + `/.env is masked: default deny name ".env"`, "--no-default-deny"},
		{"hidden sockets", false, "/run/probe", AccessRead, false, RuleHiddenSockets, "host's unix sockets", ""},
		{"kernel tree", false, "/sys/kernel", AccessWrite, false, RuleKernelTree, "kernel", ""},
		{"through a link", false, "link-to-env", AccessRead, false, RuleDenyName, w.ws + "/.env is masked", ""},
		{"execute in the workspace", false, "a.txt", AccessExecute, true, RuleWritableTree, "workspace", ""},
		{"execute masked", false, ".env", AccessExecute, false, RuleDenyName, "masked", "--no-default-deny"},
		{"execute in /proc", false, "/proc/self/exe", AccessExecute, false, RuleKernelTree, "noexec", ""},
		{"execute in /dev/shm", false, "/dev/shm/x", AccessExecute, true, RuleKernelTree, "but /dev/shm", ""},
	}
	must(t, os.Symlink(".env", filepath.Join(w.ws, "link-to-env")))
	for _, listed := range []bool{false, true} {
		p := w.policy(listed)
		sb, err := NewFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		res, err := Check(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.listed != listed {
				continue
			}
			t.Run(r.name, func(t *testing.T) {
				x, err := sb.Explain(r.path, r.access)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(x)
				if y, err := res.Explain(r.path, r.access); err != nil || !sameExplanation(x, y) {
					t.Errorf("Check's Resolved says %+v (%v), the Sandbox %+v", y, err, x)
				}
				if x.Allowed != r.allowed || x.Rule != r.rule || !strings.Contains(x.Reason, r.reason) {
					t.Errorf("%s %s: %+v; want allowed %v, rule %s, reason with %q", r.access, r.path, x, r.allowed, r.rule, r.reason)
				}
				switch {
				case r.allow == "" && x.Allow != nil && x.Allowed:
					t.Errorf("allowed, with a remedy %+v", *x.Allow)
				case r.allow != "" && (x.Allow == nil || !strings.Contains(x.Allow.Flag, r.allow)):
					t.Errorf("remedy %+v; want a flag with %q", x.Allow, r.allow)
				}
			})
		}
	}
}

// sameExplanation compares what Explain answers, Allow by value.
func sameExplanation(a, b Explanation) bool {
	ra, rb := a.Allow, b.Allow
	a.Allow, b.Allow = nil, nil
	return a == b && (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}

// TestExplainRefusesBadInput: a path or access no command could give is
// a *FilePathError naming it.
func TestExplainRefusesBadInput(t *testing.T) {
	w := newExplainWorld(t)
	res, err := Check(w.policy(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		path   string
		access Access
		field  string
	}{
		{"", AccessRead, "path"},
		{"a\x00b", AccessRead, "path"},
		{"a.txt", "exec", "access"},
		{"a.txt", "", "access"},
	} {
		_, err := res.Explain(r.path, r.access)
		var fe *FilePathError
		if !errors.As(err, &fe) || fe.Field != r.field {
			t.Errorf("Explain(%q, %q): %v; want a *FilePathError on %s", r.path, r.access, err, r.field)
		}
	}
	var back Resolved
	b, _ := res.MarshalJSON()
	must(t, back.UnmarshalJSON(b))
	if _, err := back.Explain("a.txt", AccessRead); err == nil {
		t.Error("a Resolved read from JSON explained a path")
	}
}
