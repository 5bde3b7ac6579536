//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestSecretNamesUnreadable plants keys and .env files under default deny
// names, and a file under a --deny-name pattern, in the workspace and in a
// --write tree. A command copies each into a workspace file by several
// routes; the host then reads the copies: none holds a secret, while a
// file of an ordinary name next to them was copied whole.
func TestSecretNamesUnreadable(t *testing.T) {
	ws, extra := dir(t, "ws-"), dir(t, "extra-")
	const secret = "HUTCH-IT-NAMED-SECRET-4e81"
	const public = "HUTCH-IT-PUBLIC-KEY-0b2d"
	plant := func(root, rel, content string) {
		p := filepath.Join(root, rel)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content+"\n"), 0o600))
	}
	secrets := []string{
		"id_ed25519", "sub/.ssh/id_rsa", ".env", ".ssh/config", "deep/a/b/id_ecdsa",
		"conf/creds-prod.json", // --deny-name 'creds-*.json'
		extra + "/id_rsa", extra + "/nested/.env.local",
	}
	for _, s := range secrets {
		root := ws
		if filepath.IsAbs(s) {
			root, s = s, ""
		}
		plant(root, s, secret)
	}
	plant(ws, "id_ed25519.pub", public)
	plant(ws, "sub/.ssh-notes", public)

	var script strings.Builder
	for i, f := range append(secrets, "id_ed25519.pub", "sub/.ssh-notes") {
		fmt.Fprintf(&script, "cp %[1]s copy-cp-%[2]d; cat %[1]s > copy-cat-%[2]d; dd if=%[1]s of=copy-dd-%[2]d status=none; ", f, i)
		fmt.Fprintf(&script, "tar cf copy-tar-%[2]d $(dirname %[1]s); ", f, i)
	}
	r := sh(t, ws, script.String(), "--write", extra, "--deny-name", "creds-*.json")
	if r.result == nil {
		t.Fatalf("no result:\n%s", r)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("secret in the output:\n%s", r)
	}
	ents, err := os.ReadDir(ws)
	must(err)
	copies := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "copy-") {
			continue
		}
		copies++
		b, err := os.ReadFile(filepath.Join(ws, e.Name()))
		if err != nil {
			t.Errorf("host: %v", err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("host: %s holds a secret", e.Name())
		}
	}
	if copies == 0 {
		t.Fatalf("no copies made:\n%s", r)
	}
	n := len(secrets)
	for _, c := range []string{"copy-cp-" + strconv.Itoa(n), "copy-cat-" + strconv.Itoa(n+1)} {
		if b, err := os.ReadFile(filepath.Join(ws, c)); err != nil || !strings.Contains(string(b), public) {
			t.Errorf("host: %s of an ordinary file = %q, %v; want its content", c, b, err)
		}
	}
	// The originals are untouched.
	if b, err := os.ReadFile(filepath.Join(ws, "sub/.ssh/id_rsa")); err != nil || !strings.Contains(string(b), secret) {
		t.Errorf("host: sub/.ssh/id_rsa = %q, %v", b, err)
	}
}

// TestDenyNameLimit: a workspace holding 10,000 .env files (as a command
// could leave behind, ten times the bound) cannot be masked within the
// bound; the next command
// is refused before anything is mounted, with an error naming the count,
// the limit and the remedy, never the kernel's "no space left on device".
// Below the bound commands run and the files stay masked.
func TestDenyNameLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sub  string // where the files go, relative to the workspace
	}{
		{"top level", "."},
		{"below the top level", "sub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dir(t, "ws-")
			d := filepath.Join(ws, tc.sub)
			must(os.MkdirAll(d, 0o755))
			const secret = "HUTCH-IT-MANY-ENV-77aa"
			const many = 10 * runtime.MaxNameMounts
			for i := range many {
				must(os.WriteFile(filepath.Join(d, ".env."+strconv.Itoa(i)), []byte(secret), 0o644))
			}
			r := sh(t, ws, "echo ran > ran")
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil || r.code != 125 {
				t.Fatalf("with %d .env files the command ran or exited otherwise than 125:\n%s", many, r)
			}
			for _, want := range []string{strconv.Itoa(many), strconv.Itoa(runtime.MaxNameMounts), ".env", "--no-default-deny"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("refusal does not mention %q:\n%s", want, r)
				}
			}
			if strings.Contains(r.stderr, "no space left") {
				t.Errorf("refused by the kernel, not by hutch:\n%s", r)
			}

			// Back under the bound: the command runs, the files stay masked.
			for i := 1000; i < many; i++ {
				must(os.Remove(filepath.Join(d, ".env."+strconv.Itoa(i))))
			}
			r = sh(t, ws, "cat "+tc.sub+"/.env.0 "+tc.sub+"/.env.999 > copy; echo ran > ran")
			if r.code != 0 {
				t.Fatalf("with 1000 .env files:\n%s", r)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "copy")); err != nil || strings.Contains(string(b), secret) {
				t.Errorf("host: copy = %q, %v; want no secret", b, err)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
				t.Errorf("host: %v", err)
			}
		})
	}
}

// TestDenyNamesPlantedBySandbox: a command that fills its workspace with
// .env files does not make the next command fail for an unrelated reason:
// the next one is refused naming the count, and once the files are gone
// (the --no-default-deny run removes them) commands run again.
func TestDenyNamesPlantedBySandbox(t *testing.T) {
	ws := dir(t, "ws-")
	r := sh(t, ws, `python3 -c "
for i in range(5000): open('.env.%d' % i, 'w').close()"`)
	if r.code != 0 {
		t.Fatalf("planting:\n%s", r)
	}
	r = sh(t, ws, "true")
	if r.code != 125 || !strings.Contains(r.stderr, "5000 files matching deny names") || strings.Contains(r.stderr, "no space left") {
		t.Fatalf("after 5000 planted .env files:\n%s", r)
	}
	if r = sh(t, ws, "rm -f .env.*", "--no-default-deny"); r.code != 0 {
		t.Fatalf("cleaning up with --no-default-deny:\n%s", r)
	}
	if r = sh(t, ws, "true"); r.code != 0 {
		t.Fatalf("after cleaning up:\n%s", r)
	}
}

// TestDenyNameFlagRefused: a --deny-name that is a path is refused naming
// the flag, before any command runs.
func TestDenyNameFlagRefused(t *testing.T) {
	ws := dir(t, "ws-")
	r := sh(t, ws, "echo ran > ran", "--deny-name", "ok", "--deny-name", "sub/id_rsa")
	if r.code != 125 || !strings.Contains(r.stderr, "--deny-name sub/id_rsa: ") {
		t.Errorf("want exit 125 naming --deny-name sub/id_rsa:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("host: the command ran")
	}
}

// TestPlantedLinkTakesNothing: a command plants deny-named symlinks to host
// files outside the workspace (its shell, a tool); later commands in the
// workspace still run them: a name in the workspace never masks a host
// file outside it.
func TestPlantedLinkTakesNothing(t *testing.T) {
	ws := dir(t, "ws-")
	if res := sh(t, ws, "ln -s /bin/sh .env && ln -s /usr/bin/env id_rsa && mkdir -p d && ln -s /usr/bin/env d/.env.local"); res.code != 0 {
		t.Fatalf("planting the links failed:\n%s", res)
	}
	for _, cmd := range [][]string{{"sh", "-c", "exit 0"}, {"/usr/bin/env", "true"}} {
		if res := runCLI(t, ws, nil, cmd...); res.code != 0 {
			t.Errorf("%q after links to it were planted under deny names: want exit 0:\n%s", cmd, res)
		}
	}
}
