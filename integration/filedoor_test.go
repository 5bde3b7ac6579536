//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// The file door acts in the sandbox, so a concurrent rename moves what
// the kernel resolves, never what the file door believes it resolved.
// These tests drive the file door against a command of the same Sandbox
// that keeps moving the directories its paths go through, and judge on
// the host what was read and where writes landed.

// swapper is a command that exchanges two directories (renameat2
// RENAME_EXCHANGE) until the file stop exists or secs have passed; it
// prints how many exchanges it made.
const swapper = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop, secs = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3], float(sys.argv[4])
end, n = time.time() + secs, 0
while time.time() < end and not os.path.exists(stop):
    for _ in range(200):
        if libc.renameat2(-100, a, -100, b, 2) == 0:
            n += 1
print(n)
`

// raceFixture is a workspace ws with two chains of directories, p/c1/.../
// c20 and q/r/c1/.../c20, which the swapper exchanges (p with q/r), a
// writable ws/target holding a decoy, and, beside the workspace, a
// target directory the policy masks (Deny), holding a secret. A path down
// q/r's chain and up as many ..s as it went down names ws/target; should
// the chain be moved one level up while the path is resolved, the same
// ..s end in the masked target beside the workspace.
type raceFixture struct {
	base, ws, outTarget, stop string
}

const (
	raceSecret = "RACE-SECRET-7f3a"
	raceDecoy  = "decoy inside the workspace\n"
	raceDepth  = 20
)

func newRaceFixture(t *testing.T) *raceFixture {
	t.Helper()
	base := dir(t, "files-race-")
	fx := &raceFixture{base: base, ws: filepath.Join(base, "ws"), outTarget: filepath.Join(base, "target")}
	fx.stop = filepath.Join(fx.ws, "stop")
	chain := func(root string) {
		p := root
		for i := 1; i <= raceDepth; i++ {
			p = filepath.Join(p, fmt.Sprintf("c%d", i))
		}
		must(os.MkdirAll(p, 0o755))
	}
	chain(filepath.Join(fx.ws, "p"))
	chain(filepath.Join(fx.ws, "q", "r"))
	must(os.MkdirAll(filepath.Join(fx.ws, "target"), 0o777))
	must(os.WriteFile(filepath.Join(fx.ws, "target", "secret"), []byte(raceDecoy), 0o644))
	must(os.MkdirAll(fx.outTarget, 0o777))
	must(os.WriteFile(filepath.Join(fx.outTarget, "secret"), []byte(raceSecret+"\n"), 0o644))
	// The workspace must be writable by the unprivileged suite's
	// sandbox user too.
	_ = filepath.WalkDir(fx.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o777)
		}
		return nil
	})
	return fx
}

// racePath names ws/target/leaf the long way: down q/r's chain, and up.
func (fx *raceFixture) racePath(leaf string) string {
	var b strings.Builder
	b.WriteString(fx.ws + "/q/r")
	for i := 1; i <= raceDepth; i++ {
		fmt.Fprintf(&b, "/c%d", i)
	}
	b.WriteString(strings.Repeat("/..", raceDepth+2))
	return b.String() + "/target/" + leaf
}

func (fx *raceFixture) swapArgs(secs int) []string {
	return []string{"python3", "-c", swapper, filepath.Join(fx.ws, "p"), filepath.Join(fx.ws, "q", "r"), fx.stop, fmt.Sprint(secs)}
}

// waitSwapping returns once the swapper runs: the chains start moving
// (the inode at p changes).
func (fx *raceFixture) waitSwapping(t *testing.T) {
	t.Helper()
	pIno := func() uint64 {
		fi, err := os.Stat(filepath.Join(fx.ws, "p"))
		if err != nil {
			return 0
		}
		return inode(fi)
	}
	first := pIno()
	if !waitFor(30*time.Second, func() bool { return pIno() != first }) {
		t.Fatal("the swapper never ran")
	}
}

// verdict checks on the host that nothing landed outside the workspace:
// the masked target holds its secret alone, and no race file exists
// anywhere above the workspace.
func (fx *raceFixture) verdict(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir(fx.outTarget)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "secret" {
			t.Errorf("a write landed outside the workspace: %s", filepath.Join(fx.outTarget, e.Name()))
		}
	}
	for _, p := range []string{filepath.Dir(fx.base) + "/target", "/target", filepath.Dir(fx.base) + "/ws"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the race made %s", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(fx.outTarget, "secret")); string(b) != raceSecret+"\n" {
		t.Errorf("the masked secret changed: %q", b)
	}
}

// TestFileDoorDotDotRace: while a command of the same Sandbox exchanges
// the directories a path goes through, ReadFile and WriteFile of that
// path (down a chain and up by ..) never read the masked secret beside
// the workspace, never write outside it, and name only what they acted
// on. Thousands of tries, from the library.
func TestFileDoorDotDotRace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a race run for seconds")
	}
	fx := newRaceFixture(t)
	sb := newSandbox(t, fx.ws, func(p *runtime.Policy) { p.Deny = append(p.Deny, fx.outTarget) })
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := sb.Command(ctx, fx.swapArgs(240)[0], fx.swapArgs(240)[1:]...)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The tries start once the race does: on a loaded host they could
	// all be over before python3 has started.
	fx.waitSwapping(t)
	var reads, writes, tries int
	deadline := time.Now().Add(3 * time.Minute) // a bound for a loaded host, not a target
	for tries = 0; tries < 3000 && time.Now().Before(deadline); tries++ {
		if c, err := sb.ReadFile(fx.racePath("secret"), runtime.ReadOptions{}); err == nil {
			reads++
			if strings.Contains(string(c.Data), raceSecret) {
				t.Fatalf("try %d: read the masked secret: %+v", tries, c.FileInfo)
			}
			if real, err := os.ReadFile(c.HostPath); err != nil || string(real) != string(c.Data) {
				t.Errorf("try %d: HostPath %s does not hold what was read", tries, c.HostPath)
			}
		}
		fi, err := sb.WriteFile(fx.racePath(fmt.Sprintf("w-%d", tries)), []byte("race\n"), runtime.WriteOptions{})
		if err == nil {
			writes++
			if !strings.HasPrefix(fi.HostPath, fx.ws+"/") {
				t.Errorf("try %d: wrote %s", tries, fi.HostPath)
			} else if b, err := os.ReadFile(fi.HostPath); err != nil || string(b) != "race\n" {
				t.Errorf("try %d: HostPath %s does not hold what was written (%q, %v)", tries, fi.HostPath, b, err)
			}
		}
		if t.Failed() {
			break
		}
	}
	must(os.WriteFile(fx.stop, nil, 0o644))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the swapper: %v (%s)", err, out.String())
	}
	swaps := strings.TrimSpace(out.String())
	t.Logf("%d tries: %d reads, %d writes; %s exchanges", tries, reads, writes, swaps)
	fx.verdict(t)
	if tries < 1000 || reads == 0 || writes == 0 || swaps == "0" {
		t.Errorf("the race did not run: %d tries, %d reads, %d writes, %s exchanges", tries, reads, writes, swaps)
	}
}

// TestServeFileDoorDotDotRace: the same race through hutch serve, the
// swapper a /v1/exec of the same server, the file calls /v1/files/write
// and /v1/files/read.
func TestServeFileDoorDotDotRace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a race run for seconds")
	}
	fx := newRaceFixture(t)
	s := startServe(t, fx.ws, dir(t, "serve-data-"), "--deny", fx.outTarget)
	swapped := make(chan string, 1)
	go func() {
		// Under exec's two-minute client timeout: the loop below stops
		// it sooner.
		out, _ := s.exec(t, mustJSON(map[string]any{"argv": fx.swapArgs(100)}))
		swapped <- out
	}()
	fx.waitSwapping(t)
	var reads, writes, tries int
	deadline := time.Now().Add(90 * time.Second) // a bound for a loaded host, not a target
	for tries = 0; tries < 2000 && time.Now().Before(deadline); tries++ {
		var rd struct {
			Content  string `json:"content"`
			HostPath string `json:"host_path"`
		}
		if s.call(t, "POST", "/v1/files/read", mustJSON(map[string]any{"path": fx.racePath("secret")}), &rd) == 200 {
			reads++
			if strings.Contains(rd.Content, raceSecret) {
				t.Fatalf("try %d: read the masked secret: %s", tries, rd.HostPath)
			}
		}
		var wr struct {
			HostPath string `json:"host_path"`
		}
		var raw json.RawMessage
		if s.call(t, "POST", "/v1/files/write", mustJSON(map[string]any{"path": fx.racePath(fmt.Sprintf("w-%d", tries)), "content": "race\n"}), &raw) == 200 {
			writes++
			if err := json.Unmarshal(raw, &wr); err != nil || !strings.HasPrefix(wr.HostPath, fx.ws+"/") {
				t.Errorf("try %d: wrote %s", tries, raw)
			}
		}
		if t.Failed() {
			break
		}
	}
	must(os.WriteFile(fx.stop, nil, 0o644))
	var swaps string
	select {
	case swaps = <-swapped:
	case <-time.After(2 * time.Minute):
		t.Fatal("the swapper did not stop")
	}
	t.Logf("%d tries: %d reads, %d writes; %s exchanges", tries, reads, writes, strings.TrimSpace(swaps))
	fx.verdict(t)
	if tries < 1000 || reads == 0 || writes == 0 {
		t.Errorf("the race did not run: %d tries, %d reads, %d writes", tries, reads, writes)
	}
}

// inode is fi's inode number.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// TestFileDoorCredentials: as root, files of another uid that a command
// may not read (0600) or search (a 0700 directory), inside the workspace
// and in the read-only tree outside, are refused by every read of the file
// door (ReadFile, Stat, ReadDir, hutch read, /v1/files/read) exactly when
// cat, stat or ls in a command is refused; and writes (WriteFile, /v1/
// files/write) exactly when the command's are. The host program's
// capabilities never reach the file door. Judged on the host: what cat
// copied out, and what the files hold after.
func TestFileDoorCredentials(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files of another uid")
	}
	const other = 12345
	base := dir(t, "files-cred-")
	ws, out, results := filepath.Join(base, "ws"), filepath.Join(base, "out"), filepath.Join(base, "results")
	for _, d := range []string{ws, out, results} {
		must(os.MkdirAll(d, 0o777))
		must(os.Chmod(d, 0o777))
	}
	owned := func(p string, mode os.FileMode, dir bool) {
		if dir {
			must(os.Mkdir(p, 0o700))
			must(os.WriteFile(filepath.Join(p, "f"), []byte("in "+p+"\n"), 0o644))
			must(os.Chown(filepath.Join(p, "f"), other, other))
		} else {
			must(os.WriteFile(p, []byte("content of "+p+"\n"), 0o600))
		}
		must(os.Chown(p, other, other))
		must(os.Chmod(p, mode))
	}
	for _, root := range []string{ws, out} {
		owned(filepath.Join(root, "private.txt"), 0o600, false)
		owned(filepath.Join(root, "readable.txt"), 0o644, false)
		owned(filepath.Join(root, "closed"), 0o700, true)
		owned(filepath.Join(root, "listable"), 0o744, true) // r but not x: names, nothing else
		owned(filepath.Join(root, "open"), 0o755, true)
		owned(filepath.Join(root, "shared.txt"), 0o666, false)
		owned(filepath.Join(root, "shared"), 0o777, true)
	}
	sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Writable = append(p.Writable, results) })
	defer sb.Close()

	var paths []string
	for _, root := range []string{ws, out} {
		for _, n := range []string{"private.txt", "readable.txt", "closed/f", "listable/f", "open/f", "closed", "listable", "open"} {
			paths = append(paths, filepath.Join(root, n))
		}
	}
	list := filepath.Join(results, "paths")
	must(os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644))
	// Python's stat and listdir: the system calls alone, whatever an ls
	// or stat of the host (coreutils, busybox) does beyond them.
	script := fmt.Sprintf(`i=0; while IFS= read -r p; do
		cat -- "$p" > %[1]s/cat-$i 2>/dev/null || rm -f %[1]s/cat-$i
		python3 -c 'import os, sys; os.stat(sys.argv[1])' "$p" 2>/dev/null && : > %[1]s/stat-$i
		python3 -c 'import os, sys; os.listdir(sys.argv[1])' "$p" 2>/dev/null && : > %[1]s/ls-$i
		i=$((i+1)); done < %[2]s`, results, list)
	if err := sb.Command(context.Background(), "sh", "-c", script).Run(); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, ws, dir(t, "serve-data-"))
	checked := 0
	for i, p := range paths {
		exists := func(name string) bool {
			_, err := os.Stat(filepath.Join(results, fmt.Sprintf("%s-%d", name, i)))
			return err == nil
		}
		catBytes, _ := os.ReadFile(filepath.Join(results, fmt.Sprintf("cat-%d", i)))
		catOK, statOK, lsOK := exists("cat"), exists("stat"), exists("ls")
		c, err := sb.ReadFile(p, runtime.ReadOptions{})
		if (err == nil) != catOK || err == nil && string(c.Data) != string(catBytes) {
			t.Errorf("%s: cat read %v (%q), ReadFile: %v", p, catOK, catBytes, err)
		}
		if _, err := sb.Stat(p); (err == nil) != statOK {
			t.Errorf("%s: stat in a command %v, Stat: %v", p, statOK, err)
		}
		if _, err := sb.ReadDir(p); (err == nil) != lsOK {
			t.Errorf("%s: ls in a command %v, ReadDir: %v", p, lsOK, err)
		}
		r := runCLIArgs(t, "read", "--workspace", ws, p)
		if (r.code == 0) != catOK {
			t.Errorf("%s: cat read %v, hutch read: %s", p, catOK, r)
		}
		var rd struct {
			Content string `json:"content"`
		}
		var raw json.RawMessage
		status := srv.call(t, "POST", "/v1/files/read", mustJSON(map[string]any{"path": p}), &raw)
		if (status == 200) != catOK || status == 200 && (json.Unmarshal(raw, &rd) != nil || rd.Content != string(catBytes)) {
			t.Errorf("%s: cat read %v, /v1/files/read: %d %s", p, catOK, status, raw)
		}
		checked++
	}
	// Writes: over a file of another uid, and into its directories, in
	// the workspace. A command's verdict first, on copies of the same
	// files, then the file door's on the originals.
	for _, w := range []struct {
		name string
		ok   bool // a command without capabilities may write it
	}{{"private.txt", false}, {"readable.txt", false}, {"closed/new", false}, {"open/new", false}, {"listable/new", false}, {"shared.txt", true}, {"shared/new", true}} {
		p := filepath.Join(ws, w.name)
		cmdErr := sb.Command(context.Background(), "sh", "-c", `echo cmd >> "$1"`, "sh", p).Run()
		if (cmdErr == nil) != w.ok {
			t.Fatalf("%s: the command's write: %v, want allowed %v", p, cmdErr, w.ok)
		}
		before, _ := os.ReadFile(p)
		if _, err := sb.WriteFile(p, []byte("door\n"), runtime.WriteOptions{Append: true}); (err == nil) != w.ok {
			t.Errorf("%s: the command's write allowed %v, WriteFile: %v", p, w.ok, err)
		}
		var raw json.RawMessage
		if status := srv.call(t, "POST", "/v1/files/write", mustJSON(map[string]any{"path": p, "content": "api\n", "append": true}), &raw); (status == 200) != w.ok {
			t.Errorf("%s: the command's write allowed %v, /v1/files/write: %d %s", p, w.ok, status, raw)
		}
		after, _ := os.ReadFile(p)
		switch {
		case !w.ok && string(after) != string(before):
			t.Errorf("%s changed on the host: %q, was %q", p, after, before)
		case w.ok && string(after) != string(before)+"door\napi\n":
			t.Errorf("%s holds %q after the file door's writes, was %q", p, after, before)
		}
	}
	t.Logf("%d paths judged against the command's verdicts", checked)
}

// freshSecret is what the host writes into files named like secrets after
// the Sandbox was made.
const freshSecret = "LATE-SECRET-51c9"

// plantLate makes, on the host, deep in a workspace whose Sandbox exists
// already: a .env and an id_rsa holding freshSecret, and a repository
// made as a clone makes it (with its .git/hooks). It returns it.
func plantLate(t *testing.T, ws string) string {
	t.Helper()
	must(os.MkdirAll(filepath.Join(ws, "sub", "deeper"), 0o777))
	must(os.WriteFile(filepath.Join(ws, "sub", "deeper", ".env"), []byte("TOKEN="+freshSecret+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "sub", "id_rsa"), []byte(freshSecret+"\n"), 0o644))
	// As a clone makes it, without a transport (a VM's git may lack
	// upload-pack): a repository with a commit, made in place.
	clone := filepath.Join(ws, "vendor", "cloned")
	hostRepo(t, clone)
	return clone
}

// checkLate judges, on the host, what a command of the Sandbox could do
// with what plantLate made: cat of each secret copied nothing of it out,
// and no hook appeared in the clone. run runs a shell script in the
// sandbox.
func checkLate(t *testing.T, ws, clone string, run func(script string)) {
	t.Helper()
	got := filepath.Join(ws, "got")
	hook := filepath.Join(clone, ".git", "hooks", "pre-commit")
	run(fmt.Sprintf(`cat sub/deeper/.env > %[1]s.env 2>/dev/null; cat sub/id_rsa > %[1]s.rsa 2>/dev/null;
		printf '#!/bin/sh\ntouch /tmp/ran\n' > %[2]s 2>/dev/null; echo '[core] fsmonitor = x' >> %[3]s 2>/dev/null; true`,
		got, hook, filepath.Join(clone, ".git", "config")))
	for _, f := range []string{got + ".env", got + ".rsa"} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), freshSecret) {
			t.Errorf("a command read a secret the host made after New: %s holds %q", f, b)
		}
	}
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("a command planted %s in a repository cloned after New", hook)
	}
	if b, _ := os.ReadFile(filepath.Join(clone, ".git", "config")); strings.Contains(string(b), "fsmonitor") {
		t.Errorf("a command changed the clone's .git/config:\n%s", b)
	}
}

// TestFileDoorFresh: a long-lived Sandbox sees what the host makes deep in
// its workspace after New, for the file door and for its next command: a
// .env and an id_rsa are refused and masked, a cloned repository is
// guarded. From the library, with the file server and a command in use
// before the host makes them.
func TestFileDoorFresh(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-fresh-")
	must(os.Chmod(ws, 0o777))
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644))
	sb := newSandbox(t, ws)
	defer sb.Close()
	// In use before: the file server and a command are built.
	if _, err := sb.ReadFile("a.txt", runtime.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Command(context.Background(), "true").Run(); err != nil {
		t.Fatal(err)
	}
	clone := plantLate(t, ws)
	for _, p := range []string{"sub/deeper/.env", "sub/id_rsa", ws + "/sub/./deeper/../deeper/.env"} {
		c, err := sb.ReadFile(p, runtime.ReadOptions{})
		if err == nil {
			t.Errorf("ReadFile(%s) read %q, made by the host after New", p, c.Data)
		} else if !errors.Is(err, runtime.ErrDenied) {
			t.Errorf("ReadFile(%s): %v, want ErrDenied", p, err)
		}
	}
	if ents, err := sb.ReadDir("sub/deeper"); err != nil || len(ents) != 1 || !ents[0].Denied {
		t.Errorf("ReadDir(sub/deeper): %+v, %v: want .env listed as denied", ents, err)
	}
	hook := filepath.Join(clone, ".git", "hooks", "pre-commit")
	if _, err := sb.WriteFile(hook, []byte("#!/bin/sh\n"), runtime.WriteOptions{Perm: 0o755}); err == nil {
		t.Errorf("WriteFile planted %s in a repository cloned after New", hook)
	}
	checkLate(t, ws, clone, func(script string) {
		if err := sb.Command(context.Background(), "sh", "-c", script).Run(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestServeFileDoorFresh: the same through hutch serve, whose Sandbox
// lives as long as the server.
func TestServeFileDoorFresh(t *testing.T) {
	needGit(t)
	ws := dir(t, "ws-fresh-")
	must(os.Chmod(ws, 0o777))
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644))
	s := startServe(t, ws, dir(t, "serve-data-"))
	if status := s.call(t, "POST", "/v1/files/read", mustJSON(map[string]any{"path": "a.txt"}), nil); status != 200 {
		t.Fatalf("read a.txt: %d", status)
	}
	if _, code := s.exec(t, mustJSON(map[string]any{"argv": []string{"true"}})); code != 0 {
		t.Fatalf("true: %d", code)
	}
	clone := plantLate(t, ws)
	for _, p := range []string{"sub/deeper/.env", "sub/id_rsa"} {
		var raw json.RawMessage
		if status := s.call(t, "POST", "/v1/files/read", mustJSON(map[string]any{"path": p}), &raw); status == 200 || strings.Contains(string(raw), freshSecret) {
			t.Errorf("/v1/files/read %s: %d %s", p, status, raw)
		}
	}
	hook := filepath.Join(clone, ".git", "hooks", "pre-commit")
	var raw json.RawMessage
	if status := s.call(t, "POST", "/v1/files/write", mustJSON(map[string]any{"path": hook, "content": "#!/bin/sh\n"}), &raw); status == 200 {
		t.Errorf("/v1/files/write planted %s: %s", hook, raw)
	}
	checkLate(t, ws, clone, func(script string) {
		if _, code := s.exec(t, mustJSON(map[string]any{"argv": []string{"sh", "-c", script}})); code != 0 {
			t.Fatalf("script: exit %d", code)
		}
	})
}

// TestFileDoorNoProc: without a /proc in the sandbox (the level
// namespaces-no-proc) the file server names what it opened by a walk it
// checks against the object's identity: a symlink chain, a relative link
// through .., a directory, all named as with /proc; masks hold.
func TestFileDoorNoProc(t *testing.T) {
	t.Setenv("HUTCH_SIMULATE", "no-proc")
	ws := dir(t, "ws-")
	must(os.MkdirAll(filepath.Join(ws, "d", "e"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "d", "e", "f.txt"), []byte("f\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, ".env"), []byte("SECRET\n"), 0o644))
	must(os.Symlink("d/e/f.txt", filepath.Join(ws, "l1")))
	must(os.Symlink("l1", filepath.Join(ws, "l2")))
	must(os.Symlink("../e/f.txt", filepath.Join(ws, "d", "e", "up")))
	must(os.Symlink(filepath.Join(ws, "d"), filepath.Join(ws, "dl")))
	must(os.Symlink(".env", filepath.Join(ws, "envlink")))
	flags := []string{"--workspace", ws, "--min-level", "namespaces-no-proc"}
	for _, c := range []struct {
		cmd, path, want string
	}{
		{"read", "l2", ws + "/d/e/f.txt"},
		{"read", "d/e/up", ws + "/d/e/f.txt"},
		{"read", "dl/e/../e/f.txt", ws + "/d/e/f.txt"},
		{"stat", "dl", ws + "/d"},
		{"stat", "d/e/..", ws + "/d"},
	} {
		r := runCLIArgs(t, append(append([]string{c.cmd}, flags...), c.path)...)
		var got struct {
			Path     string `json:"path"`
			HostPath string `json:"host_path"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Path != c.want || got.HostPath != c.want {
			t.Errorf("hutch %s %s: %+v, want %s\n%s", c.cmd, c.path, got, c.want, r)
		}
	}
	for _, p := range []string{".env", "envlink"} {
		if r := runCLIArgs(t, append(append([]string{"read"}, flags...), p)...); r.code == 0 || strings.Contains(r.stdout, "SECRET") {
			t.Errorf("hutch read %s: %s", p, r)
		}
	}
}
