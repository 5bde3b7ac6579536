//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// chromiumBin is the Chromium the nested tests run: Debian's chromium, or
// chromium-headless-shell. The test skips without either (the QEMU
// guests have none); .ci/run installs chromium.
func chromiumBin(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on this host (.ci/run installs it: apt-get install chromium)")
	return ""
}

// asNobody makes c run as uid and gid 65534 with no supplementary groups
// when the test runs as root: Chromium refuses to run its sandbox as
// root (it wants --no-sandbox there), and so does hutch's root have
// nothing to nest (Linux 5.12+ lets no unprivileged process map uid 0
// into a user namespace of its own). ws becomes 65534's. It reports
// whether it changed anything.
func asNobody(t *testing.T, c *exec.Cmd, ws string) bool {
	t.Helper()
	if os.Getuid() != 0 {
		return false
	}
	must(os.Chown(ws, 65534, 65534))
	c.Env = append(os.Environ(), "HOME=/nonexistent") // the suite's is root's alone
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return true
}

// hostProc is what the host sees of one process.
type hostProc struct {
	pid              int
	cmdline          string
	userNS, pidNS    string
	seccomp, noPrivs string
}

// readProc reads pid's command line, namespaces and confinement from the
// host's /proc; ok is false once it is gone.
func readProc(pid int) (p hostProc, ok bool) {
	d := "/proc/" + strconv.Itoa(pid)
	cmd, err := os.ReadFile(d + "/cmdline")
	if err != nil {
		return p, false
	}
	p.pid, p.cmdline = pid, strings.ReplaceAll(string(cmd), "\x00", " ")
	p.userNS, _ = os.Readlink(d + "/ns/user")
	p.pidNS, _ = os.Readlink(d + "/ns/pid")
	status, _ := os.ReadFile(d + "/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Seccomp":
			p.seccomp = strings.TrimSpace(v)
		case "NoNewPrivs":
			p.noPrivs = strings.TrimSpace(v)
		}
	}
	return p, p.userNS != ""
}

// TestNestedChromium (issue 46): with --allow-nested, headless Chromium
// renders a page with its own sandbox on, and without it Chromium fails
// at once, saying it has no usable sandbox. Checked on the host: the
// screenshot is a PNG of the window's size showing the page's colour,
// and while Chromium ran its renderers were in a user and a pid namespace
// of their own, below the command's, under a seccomp filter, never with
// --no-sandbox.
func TestNestedChromium(t *testing.T) {
	chromium := chromiumBin(t)
	ws := dir(t, "ws-")
	must(os.WriteFile(filepath.Join(ws, "page.html"), []byte(`<html><body style="margin:0;background:#00aa00"><h1>hutch</h1></body></html>`), 0o644))
	run := func(t *testing.T, nested bool) (res *runtime.Result, stderr string, seen map[int][]hostProc, elapsed time.Duration) {
		t.Helper()
		shot := filepath.Join(ws, "shot.png")
		os.Remove(shot)
		rj := filepath.Join(ws, "result.json")
		args := []string{"run", "--workspace", ws, "--result-json", rj, "--timeout", "240s"}
		if nested {
			args = append(args, "--allow-nested")
		}
		args = append(args, "--", chromium, "--headless", "--disable-gpu", "--no-first-run",
			"--user-data-dir="+filepath.Join(ws, "profile"), "--window-size=400,300",
			"--screenshot="+shot, "file://"+filepath.Join(ws, "page.html"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, hutchBin, args...)
		var errb bytes.Buffer
		c.Stderr = &errb
		asNobody(t, c, ws)
		start := time.Now()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		seen = map[int][]hostProc{}
	poll:
		for {
			for _, pid := range descendants(c.Process.Pid) {
				// Every reading that differs: a process's namespaces
				// change as Chromium's sandbox builds (a renderer moves
				// to a user namespace of its own after its pid namespace,
				// and may end soon after: its last reading may come
				// before the move), and an exiting process shows no
				// command line.
				if p, ok := readProc(pid); ok && p.cmdline != "" && !slices.Contains(seen[pid], p) {
					seen[pid] = append(seen[pid], p)
				}
			}
			select {
			case <-done:
				break poll
			case <-time.After(50 * time.Millisecond):
			}
		}
		elapsed = time.Since(start)
		b, err := os.ReadFile(rj)
		if err != nil {
			t.Fatalf("no result: %v\n%s", err, errb.String())
		}
		res = new(runtime.Result)
		must(json.Unmarshal(b, res))
		return res, errb.String(), seen, elapsed
	}

	t.Run("without", func(t *testing.T) {
		res, stderr, _, elapsed := run(t, false)
		t.Logf("Chromium without --allow-nested ended in %v, exit %d", elapsed, res.ExitCode)
		if res.ExitCode == 0 || res.Killed {
			t.Errorf("exit %d, killed %v (%s): want Chromium's own failure\n%s", res.ExitCode, res.Killed, res.KillReason, stderr)
		}
		if !strings.Contains(stderr, "No usable sandbox") {
			t.Errorf("Chromium did not say it lacks a sandbox:\n%s", stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "shot.png")); err == nil {
			t.Error("a screenshot was written without a sandbox")
		}
		if res.Nested || strings.Contains(res.SeccompProfile, "+nested") {
			t.Errorf("result says nested (%v, %q) without --allow-nested", res.Nested, res.SeccompProfile)
		}
	})

	t.Run("with", func(t *testing.T) {
		res, stderr, seen, elapsed := run(t, true)
		t.Logf("Chromium with --allow-nested rendered in %v (startup %v)", elapsed, res.Startup)
		if res.ExitCode != 0 {
			t.Fatalf("exit %d (%s):\n%s", res.ExitCode, res.Reason, stderr)
		}
		if !res.Nested || !strings.HasSuffix(res.SeccompProfile, "+nested") {
			t.Errorf("result: nested %v, seccomp profile %q; want it said", res.Nested, res.SeccompProfile)
		}
		f, err := os.Open(filepath.Join(ws, "shot.png"))
		if err != nil {
			t.Fatalf("no screenshot: %v\n%s", err, stderr)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("shot.png is not a PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
			t.Errorf("shot.png is %dx%d, want 400x300", b.Dx(), b.Dy())
		}
		if r, g, b, _ := img.At(200, 280).RGBA(); r>>8 != 0 || g>>8 != 0xaa || b>>8 != 0 {
			t.Errorf("shot.png at (200, 280) is #%02x%02x%02x, want the page's #00aa00", r>>8, g>>8, b>>8)
		}

		// The command's own namespace is that of the browser process
		// (no --type); its renderers must be in one of their own.
		var browser *hostProc
		var renderers [][]hostProc
		for _, readings := range seen {
			for _, r := range readings {
				if strings.Contains(r.cmdline, "--no-sandbox") {
					t.Errorf("pid %d ran with --no-sandbox: %s", r.pid, r.cmdline)
				}
			}
			// By any reading: a renderer is forked from Chromium's
			// zygote and shows the zygote's command line (--type=zygote)
			// until it sets its own title, and the browser is the
			// command, which shows the spawn server's (hutch-spawn)
			// until its exec; a loaded machine may let the host read
			// either first.
			isBrowser := func(r hostProc) bool {
				return strings.Contains(r.cmdline, "--user-data-dir=") && !strings.Contains(r.cmdline, "--type=")
			}
			switch {
			case slices.ContainsFunc(readings, func(r hostProc) bool { return strings.Contains(r.cmdline, "--type=renderer") }):
				renderers = append(renderers, readings)
			case slices.ContainsFunc(readings, isBrowser):
				p := readings[slices.IndexFunc(readings, isBrowser)]
				browser = &p
			}
		}
		if browser == nil || len(renderers) == 0 {
			for _, readings := range seen {
				for _, r := range readings {
					t.Logf("seen: pid %d %s %.100s", r.pid, r.userNS, r.cmdline)
				}
			}
			t.Fatalf("the host saw no browser (%v) or no renderer (%d) among %d processes", browser != nil, len(renderers), len(seen))
		}
		hostNS, _ := os.Readlink("/proc/self/ns/user")
		if browser.userNS == hostNS {
			t.Errorf("the browser ran in the host's user namespace %s", hostNS)
		}
		// Each renderer was seen, at least once, in a pid namespace of
		// its own, under a filter and no_new_privs, never in the host's
		// user namespace. Only Chromium's sandbox makes that namespace
		// (the "without" run shows it refused without --allow-nested);
		// the renderer moves into a user namespace of its own too, but
		// later, at its sandbox's start, and a renderer of a tiny page
		// may end before the host reads it again (seen as uid 65534 on
		// a loaded machine: one reading, between the two).
		for _, readings := range renderers {
			if !slices.ContainsFunc(readings, func(r hostProc) bool {
				return r.userNS != hostNS && r.pidNS != browser.pidNS && r.seccomp == "2" && r.noPrivs == "1"
			}) {
				for _, r := range readings {
					t.Errorf("renderer %d: user namespace %s, pid namespace %s, Seccomp %q, NoNewPrivs %q; the command's are %s, %s", r.pid, r.userNS, r.pidNS, r.seccomp, r.noPrivs, browser.userNS, browser.pidNS)
				}
				t.Errorf("renderer %d was never seen sandboxed: Chromium's sandbox was off", readings[0].pid)
			}
		}
		t.Logf("browser in %s; %d renderers, e.g. pid %d in %s", browser.userNS, len(renderers), renderers[0][0].pid, renderers[0][len(renderers[0])-1].userNS)
	})
}

// TestNestedPolicyHolds: with --allow-nested the rest of the policy
// holds, inside the command's own namespaces too, checked on the host: a
// masked file stays unreadable (even in a mount namespace of the
// command's, where unmounting the mask is refused), a host file outside
// the workspace stays as it was (though writable to every uid on the
// host), and no connection reaches a host listener, from the command nor
// from a network namespace it made. Without the flag no namespace can be
// made at all. hutch run --verbose says which.
func TestNestedPolicyHolds(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare on this host (util-linux)")
	}
	ws := dir(t, "ws-")
	must(os.Chmod(ws, 0o777)) // a nested namespace without id maps (as root) writes as the overflow uid
	outside := dir(t, "outside-")
	must(os.Chmod(outside, 0o777))
	victim := filepath.Join(outside, "file")
	must(os.WriteFile(victim, []byte("original\n"), 0o666))
	must(os.Chmod(victim, 0o666))
	const secret = "HUTCH-IT-NESTED-SECRET-5e1d"
	secretDir := dir(t, "denied-")
	token := filepath.Join(secretDir, "token")
	must(os.WriteFile(token, []byte(secret+"\n"), 0o644))
	port, targets, accepted := hostListener(t)

	// U makes a user namespace: with ids mapped where the kernel lets
	// this user (not for root since Linux 5.12), unmapped otherwise.
	script := `
if unshare -Ur true 2>/dev/null; then U="unshare -Ur"; else U="unshare -U"; fi
probe='
cat ` + token + `
cp ` + token + ` ./copied-$1 2>/dev/null
echo pwned > ` + victim + `
echo pwned > ` + outside + `/new-$1
for h in ` + strings.Join(targets, " ") + `; do
  python3 -c "import socket,sys; socket.create_connection((sys.argv[1], ` + strconv.Itoa(port) + `), 3).close()" $h 2>/dev/null && echo connected-$1
done
echo ran > ./ran-$1
'
sh -c "$probe" sh plain
$U -n sh -c "$probe" sh netns
$U -m --propagation unchanged sh -c "umount ` + token + ` 2>/dev/null; umount -l ` + secretDir + ` 2>/dev/null; $probe" sh mountns
exit 0
`
	for _, nested := range []bool{true, false} {
		name := map[bool]string{true: "with", false: "without"}[nested]
		t.Run(name, func(t *testing.T) {
			for _, where := range []string{"plain", "netns", "mountns"} {
				os.Remove(filepath.Join(ws, "ran-"+where))
				os.Remove(filepath.Join(ws, "copied-"+where))
			}
			var flags []string
			if nested {
				flags = append(flags, "--allow-nested")
			}
			flags = append(flags, "--deny", token, "--verbose")
			res := runCLI(t, ws, flags, "sh", "-c", script)
			if res.code != 0 {
				t.Fatalf("%v", res)
			}
			if strings.Contains(res.stdout+res.stderr, secret) {
				t.Errorf("the masked file was read:\n%v", res)
			}
			for _, where := range []string{"plain", "netns", "mountns"} {
				ran := fileExists(filepath.Join(ws, "ran-"+where))
				if want := where == "plain" || nested; ran != want {
					t.Errorf("%s: the probe ran %v, want %v:\n%v", where, ran, want, res)
				}
				if b, err := os.ReadFile(filepath.Join(ws, "copied-"+where)); err == nil && bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s: the masked file was copied into the workspace", where)
				}
				if fileExists(filepath.Join(outside, "new-"+where)) {
					t.Errorf("%s: a file was created outside the workspace", where)
				}
			}
			if b, _ := os.ReadFile(victim); string(b) != "original\n" {
				t.Errorf("the host file outside the workspace is now %q", b)
			}
			if n := accepted.Load(); n != 0 {
				t.Errorf("the host listener accepted %d connections", n)
			}
			if said := strings.Contains(res.stderr, "hutch: --allow-nested:"); said != nested {
				t.Errorf("--verbose said the namespaces %v, want %v:\n%v", said, nested, res)
			}
			if res.result == nil || res.result.Nested != nested || strings.HasSuffix(res.result.SeccompProfile, "+nested") != nested {
				t.Errorf("result does not say nested %v: %+v", nested, res.result)
			}
		})
	}
}

// fileExists says whether path names anything on the host.
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
