//go:build linux

package integration

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWritesOutsideWorkspaceFail tries every route an agent's script might
// take to write outside its workspace, into a directory the test user can
// write on the host, and checks the host's copy afterwards.
func TestWritesOutsideWorkspaceFail(t *testing.T) {
	ws := dir(t, "ws-")
	out := dir(t, "outside-")
	existing := filepath.Join(out, "existing")
	must(os.WriteFile(existing, []byte("original\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "movable"), []byte("move me\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "script.sh"), []byte("echo x > "+out+"/script\n"), 0o755))
	// A symlink planted in the workspace that points outside it.
	must(os.Symlink(filepath.Join(out, "planted"), filepath.Join(ws, "planted-link")))

	routes := []struct{ name, script string }{
		{"redirect", "echo x > $OUT/redirect"},
		{"append existing", "echo x >> $OUT/existing"},
		{"truncate existing", ": > $OUT/existing"},
		{"cp", "cp /etc/hostname $OUT/cp"},
		{"mv", "mv movable $OUT/mv"},
		{"tee", "echo x | tee $OUT/tee"},
		{"python", "python3 -c \"open('$OUT/python','w').write('x')\""},
		{"heredoc", "cat > $OUT/heredoc <<EOF\nx\nEOF"},
		{"script file", "sh ./script.sh"},
		{"symlink made inside", "ln -s $OUT/symlink link && echo x > link"},
		{"symlink planted", "echo x > planted-link"},
		{"hard link", "ln $OUT/existing hardlink && echo x >> hardlink"},
		{"mkdir", "mkdir $OUT/mkdir"},
		{"rm existing", "rm -f $OUT/existing"},
		{"touch", "touch $OUT/touch"},
		{"dd", "dd if=/dev/zero of=$OUT/dd bs=1 count=1"},
		{"write to /etc", "echo x > /etc/hutch-it-" + filepath.Base(out)},
		{"proc root", "echo x > /proc/self/root$OUT/procroot"},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			res := runCLI(t, ws, []string{"--env", "OUT=" + out}, "sh", "-c", r.script)
			if res.code == 0 {
				t.Logf("command exited 0 (the host check decides):\n%s", res)
			}
		})
	}
	// The host's view: nothing but the original file in the outside dir,
	// unchanged; nothing in /etc.
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "existing" {
			t.Errorf("host: %s appeared outside the workspace", filepath.Join(out, e.Name()))
		}
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "original\n" {
		t.Errorf("host: %s changed: %q, %v", existing, b, err)
	}
	if _, err := os.Lstat("/etc/hutch-it-" + filepath.Base(out)); err == nil {
		t.Errorf("host: a file appeared in /etc")
	}
	if _, err := os.Stat(filepath.Join(ws, "movable")); err != nil {
		t.Logf("movable left the workspace view: %v", err)
	}
}

// TestWorkspaceWritable is the control for the test above: the same routes
// inside the workspace do reach the host.
func TestWorkspaceWritable(t *testing.T) {
	ws := dir(t, "ws-")
	res := sh(t, ws, "echo x > a && cp a b && python3 -c \"open('c','w').write('x')\" && mkdir d")
	if res.code != 0 {
		t.Fatalf("writes in the workspace failed:\n%s", res)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := os.Stat(filepath.Join(ws, n)); err != nil {
			t.Errorf("host: %s missing from the workspace: %v", n, err)
		}
	}
}

// TestDeniedUnreadable plants secrets in the (fake) home, in the
// workspace's .env files and behind a --deny path, then reads them by every
// route it can think of. The verdict: the secret's bytes appear in no output
// and in no file the command could write.
func TestDeniedUnreadable(t *testing.T) {
	ws := dir(t, "ws-")
	extra := dir(t, "denied-")
	const secret = "HUTCH-IT-DENIED-SECRET-91c2"
	must(os.WriteFile(filepath.Join(extra, "token"), []byte(secret+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, ".env"), []byte("KEY="+secret+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, ".env.local"), []byte("KEY="+secret+"\n"), 0o644))
	must(os.MkdirAll(filepath.Join(ws, "apps", "web"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "apps", "web", ".env.production"), []byte("KEY="+secret+"\n"), 0o644))
	must(os.Symlink(filepath.Join(fakeHome, ".ssh", "id_ed25519"), filepath.Join(ws, "key-link")))
	must(os.Symlink(filepath.Join(extra, "token"), filepath.Join(ws, "token-link")))

	targets := []string{
		fakeHome + "/.ssh/id_ed25519", fakeHome + "/.netrc", fakeHome + "/.aws/credentials",
		extra + "/token", ".env", ".env.local", "apps/web/.env.production", "key-link", "token-link",
	}
	if os.Getuid() == 0 {
		// uid 0 owns /etc/shadow: without the mask a command running as
		// root (with no capabilities) could still read it.
		targets = append(targets, "/etc/shadow")
	}
	routes := []struct{ name, script string }{
		{"cat", "cat $F"},
		{"python", "python3 -c \"import sys; print(open(sys.argv[1]).read())\" $F"},
		{"cp into workspace", "cp $F ./copied-$$ && cat ./copied-$$"},
		{"hard link", "ln $F ./hl-$$ && cat ./hl-$$"},
		{"symlink", "ln -s $F ./sl-$$ && cat ./sl-$$"},
		{"proc self root", "cat /proc/self/root/$F"},
		{"proc 1 root", "cat /proc/1/root/$F"},
		{"dd", "dd if=$F status=none"},
		{"list dir", "ls -la $(dirname $F); cat $(dirname $F)/*"},
		{"rename parent", "d=$(dirname $F); [ $d != . ] && mv $d ./moved-$$ && cat ./moved-$$/*"},
		{"mv file", "mv $F ./mv-$$ && cat ./mv-$$"},
	}
	// The host's own first line of /etc/shadow, to look for in the output.
	var shadowLine string
	if b, err := os.ReadFile("/etc/shadow"); err == nil {
		shadowLine, _, _ = strings.Cut(string(b), "\n")
	}
	var all bytes.Buffer
	for _, f := range targets {
		for _, r := range routes {
			res := runCLI(t, ws, []string{"--deny", extra + "/token", "--env", "F=" + f}, "sh", "-c", r.script)
			all.WriteString(res.stdout + res.stderr)
			if strings.Contains(res.stdout+res.stderr, secret) || strings.Contains(res.stdout+res.stderr, sshSecret) {
				t.Errorf("%s via %s: secret in output:\n%s", f, r.name, res)
			}
			if shadowLine != "" && strings.Contains(res.stdout, shadowLine) {
				t.Errorf("/etc/shadow via %s: shadow content in output:\n%s", r.name, res)
			}
		}
	}
	// Nothing the command left in the workspace holds a secret.
	_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if strings.HasPrefix(filepath.Base(p), ".env") {
			return nil // the planted originals
		}
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(sshSecret))) {
			t.Errorf("host: %s holds a secret", p)
		}
		return nil
	})
	// The planted files are still where they were (rename of a parent of a
	// mask must fail rather than move the secret out of its mask).
	for _, p := range []string{filepath.Join(ws, "apps", "web", ".env.production"), filepath.Join(ws, ".env")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("host: %s moved: %v", p, err)
		}
	}
}

// TestHostTmpInvisible: the sandbox's /tmp is its own.
func TestHostTmpInvisible(t *testing.T) {
	ws := dir(t, "ws-")
	hostTmp, err := os.MkdirTemp("/tmp", "hutch-it-host-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hostTmp)
	const marker = "HUTCH-IT-HOST-TMP-MARKER"
	must(os.WriteFile(filepath.Join(hostTmp, "m"), []byte(marker), 0o644))
	name := "hutch-it-from-sandbox-" + filepath.Base(ws)
	res := sh(t, ws, "ls -la /tmp; cat "+hostTmp+"/m; echo x > /tmp/"+name)
	if strings.Contains(res.stdout+res.stderr, marker) || strings.Contains(res.stdout, filepath.Base(hostTmp)) {
		t.Errorf("host /tmp visible in the sandbox:\n%s", res)
	}
	if _, err := os.Stat("/tmp/" + name); err == nil {
		os.Remove("/tmp/" + name)
		t.Errorf("host: the sandbox's /tmp write reached the host's /tmp")
	}
}

// TestBinaryNotWritable covers CVE-2019-5736: nothing in the sandbox may
// open the host binary (the init's /proc/<pid>/exe) for writing. The host
// hashes the binaries before and after.
func TestBinaryNotWritable(t *testing.T) {
	ws := dir(t, "ws-")
	self, _ := os.Executable()
	bins := []string{hutchBin, self}
	before := map[string][32]byte{}
	for _, b := range bins {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		before[b] = sha256.Sum256(data)
	}
	script := `
import os, glob
for exe in ["/proc/1/exe"] + glob.glob("/proc/[0-9]*/exe"):
    for how in ("direct", "opath"):
        try:
            if how == "direct":
                fd = os.open(exe, os.O_WRONLY)
            else:
                p = os.open(exe, os.O_PATH)
                fd = os.open("/proc/self/fd/%d" % p, os.O_WRONLY)
            os.write(fd, b"#!/bin/sh\necho pwned\n")
            print("OPENED", exe, how)
        except OSError as e:
            print("refused", exe, how, e.errno)
for f in ("/proc/1/environ", "/proc/1/mem", "/proc/1/root/"):
    try:
        os.listdir(f) if f.endswith("/") else open(f, "rb").read(16)
        print("READ", f)
    except OSError as e:
        print("refused", f, e.errno)
`
	res := runCLI(t, ws, nil, "python3", "-c", script)
	for _, b := range bins {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(data) != before[b] {
			t.Fatalf("host: %s was modified from inside the sandbox:\n%s", b, res)
		}
	}
	if !strings.Contains(res.stdout, "refused /proc/1/exe direct") {
		t.Errorf("the probe did not run as expected:\n%s", res)
	}
	for _, l := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(l, "READ /proc/1/") {
			t.Errorf("init's %s readable from the sandbox", l)
		}
	}
}
