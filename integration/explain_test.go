//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestExplain: for a path of every class, hutch why's verdict (its exit
// status and its --json) is what the kernel does when hutch run tries
// the same access, judged on the host: a read it allows yields the
// file's marker, one it refuses none of it; a write it allows leaves the
// command's token in the host's file, one it refuses leaves the file as
// it was (or absent). The doors agree because both compile one decision;
// this proves it for each rule Explain names.
func TestExplain(t *testing.T) {
	base := dir(t, "explain-")
	ws, outside, bindSrc, bindDst := base+"/ws", base+"/outside", base+"/bindsrc", base+"/mnt"
	marker := func(p string) string { return "MARKER-" + strings.ReplaceAll(strings.TrimPrefix(p, base), "/", "_") }
	for _, f := range []string{ws + "/a.txt", ws + "/.env", ws + "/repo/.git/HEAD", ws + "/repo/.git/hooks/pre-commit", outside + "/secret.txt", outside + "/o.txt", bindSrc + "/b.txt", bindSrc + "/.env"} {
		must(os.MkdirAll(filepath.Dir(f), 0o755))
		must(os.WriteFile(f, []byte(marker(f)+"\n"), 0o644))
	}
	must(os.MkdirAll(bindDst, 0o755))
	// Programs that leave their name's marker in the workspace when run.
	for _, f := range []string{ws + "/prog", ws + "/id_rsa"} {
		must(os.WriteFile(f, []byte("#!/bin/sh\necho ran > \"$0.ran\"\n"), 0o755))
	}
	// A name of this run's in the host's /etc and /tmp: nothing of
	// another run's is taken for this one's.
	etcProbe := fmt.Sprintf("/etc/hutch-explain-%d", os.Getpid())
	tmpProbe := fmt.Sprintf("/tmp/hutch-explain-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(etcProbe); os.Remove(tmpProbe) })
	host := []string{"--workspace", ws, "--deny", outside + "/secret.txt", "--bind", bindSrc + ":" + bindDst}
	listed := []string{"--workspace", ws, "--reads", "listed"}

	rows := []struct {
		name   string
		flags  []string
		path   string // as asked: absolute, or relative to ws
		host   string // the host's file the access would reach
		access runtime.Access
		rule   runtime.Rule
	}{
		{"default deny", host, fakeHome + "/.ssh/id_ed25519", fakeHome + "/.ssh/id_ed25519", runtime.AccessRead, runtime.RuleDefaultDeny},
		{"policy deny", host, outside + "/secret.txt", outside + "/secret.txt", runtime.AccessRead, runtime.RuleDeny},
		{"deny name", host, ".env", ws + "/.env", runtime.AccessRead, runtime.RuleDenyName},
		{"git guard", host, "repo/.git/hooks/pre-commit", ws + "/repo/.git/hooks/pre-commit", runtime.AccessWrite, runtime.RuleGitGuard},
		{"outside writable", host, etcProbe, etcProbe, runtime.AccessWrite, runtime.RuleOutsideWritable},
		{"workspace write", host, "a.txt", ws + "/a.txt", runtime.AccessWrite, runtime.RuleWritableTree},
		{"host read", host, outside + "/o.txt", outside + "/o.txt", runtime.AccessRead, runtime.RuleOutsideWritable},
		{"listed absent", listed, outside + "/o.txt", outside + "/o.txt", runtime.AccessRead, runtime.RuleNotInView},
		{"listed workspace", listed, ws + "/a.txt", ws + "/a.txt", runtime.AccessRead, runtime.RuleWritableTree},
		{"private tmp", host, tmpProbe, tmpProbe, runtime.AccessWrite, runtime.RulePrivateTmp},
		{"writable bind", host, bindDst + "/b.txt", bindSrc + "/b.txt", runtime.AccessWrite, runtime.RuleWritableTree},
		{"deny name in a bind", host, bindDst + "/.env", bindSrc + "/.env", runtime.AccessRead, runtime.RuleDenyName},
		{"execute in the workspace", host, "prog", ws + "/prog", runtime.AccessExecute, runtime.RuleWritableTree},
		{"execute a deny name", host, "id_rsa", ws + "/id_rsa", runtime.AccessExecute, runtime.RuleDenyName},
	}
	if _, err := exec.LookPath("busybox"); err == nil {
		// An image's root (--rootfs): its files read-only, the host's
		// absent.
		root, _ := makeRootfs(t)
		img := root + "/image-marker"
		must(os.WriteFile(img, []byte(marker(img)+"\n"), 0o644))
		rootfs := []string{"--workspace", ws, "--rootfs", root}
		rows = append(rows, []struct {
			name   string
			flags  []string
			path   string
			host   string
			access runtime.Access
			rule   runtime.Rule
		}{
			{"image read", rootfs, "/image-marker", img, runtime.AccessRead, runtime.RuleImageRoot},
			{"image write", rootfs, "/image-marker", img, runtime.AccessWrite, runtime.RuleImageRoot},
			{"image absent", rootfs, outside + "/o.txt", outside + "/o.txt", runtime.AccessRead, runtime.RuleNotInView},
		}...)
	} else {
		t.Log("busybox-static is not installed: no rows on an image's root")
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			why := runCLIArgs(t, append(append([]string{"why", "--json", "--access", string(r.access)}, r.flags...), r.path)...)
			var x runtime.Explanation
			if err := json.Unmarshal([]byte(why.stdout), &x); err != nil {
				t.Fatalf("hutch why: %v\n%s", err, why)
			}
			if want := map[bool]int{true: 0, false: 1}[x.Allowed]; why.code != want || x.Rule != r.rule {
				t.Fatalf("hutch why: rule %s, allowed %v, exit %d; want rule %s and the exit of its verdict\n%s", x.Rule, x.Allowed, why.code, r.rule, why)
			}
			t.Logf("hutch why: %s: %s", map[bool]string{true: "allowed", false: "refused"}[x.Allowed], x.Reason)

			before, _ := os.ReadFile(r.host)
			token := "WRITTEN-" + strings.ReplaceAll(r.name, " ", "-")
			var run cliResult
			switch r.access {
			case runtime.AccessExecute:
				run = runCLI(t, ws, r.flags[2:], "sh", "-c", `"$1"; true`, "sh", ws+"/"+r.path)
			case runtime.AccessRead:
				run = runCLI(t, ws, r.flags[2:], "sh", "-c", `cat -- "$1"; true`, "sh", r.path)
			default:
				run = runCLI(t, ws, r.flags[2:], "sh", "-c", `printf '%s\n' "$2" >> "$1"`, "sh", r.path, token)
			}
			after, _ := os.ReadFile(r.host)
			var did bool
			switch {
			case r.access == runtime.AccessExecute:
				// The program ran if its marker is on the host.
				_, err := os.Stat(r.host + ".ran")
				did = err == nil
			case r.access == runtime.AccessRead:
				did = strings.Contains(run.stdout, marker(r.host))
			case r.rule == runtime.RulePrivateTmp:
				// The command's /tmp is its own: the write succeeds
				// there (its exit status) and never reaches the host's.
				if len(after) != 0 {
					t.Errorf("the command's write reached the host's %s: %q", r.host, after)
				}
				did = run.code == 0
			default:
				did = strings.Contains(string(after), token)
				if !did && string(after) != string(before) {
					t.Errorf("%s changed on the host without the command's token: %q -> %q", r.host, before, after)
				}
			}
			if did != x.Allowed {
				t.Errorf("hutch why says allowed %v (%s); hutch run's %s did %v on the host\n%s", x.Allowed, x.Reason, r.access, did, run)
			}
		})
	}
}
