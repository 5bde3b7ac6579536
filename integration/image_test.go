package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// busyboxApplets are the programs of a test image's root: links to
// busybox-static, the one binary it holds.
var busyboxApplets = []string{"sh", "cat", "ls", "echo", "id", "mkdir", "dd", "nc", "sleep", "test", "[", "head", "wc", "touch"}

// makeRootfs makes a small root file system the test owns: busybox-static
// as /bin/busybox with its applets, /etc/passwd, an /image-marker holding
// a value only this run knows, an empty /tmp and /var/cache. It returns
// the directory and the marker.
func makeRootfs(t *testing.T) (string, string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox-static is not installed (apt-get install busybox-static)")
	}
	root := dir(t, "rootfs-")
	for _, d := range []string{"bin", "etc", "tmp", "var/cache"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	b, err := os.ReadFile(bb)
	must(err)
	must(os.WriteFile(filepath.Join(root, "bin/busybox"), b, 0o755))
	for _, a := range busyboxApplets {
		must(os.Symlink("busybox", filepath.Join(root, "bin", a)))
	}
	must(os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"), 0o644))
	marker := fmt.Sprintf("IMAGE-MARKER-%d", time.Now().UnixNano())
	must(os.WriteFile(filepath.Join(root, "image-marker"), []byte(marker+"\n"), 0o644))
	return root, marker
}

// TestRootfs (issue 45, must-show 1): hutch run --rootfs DIR runs the
// command on DIR's tree, read-only: the image's files are there and the
// host's are not (markers planted on the host, the host's own programs),
// writes land only in the workspace (the image is unchanged on the host),
// the deny-list holds in the workspace, limits and the network policy
// hold; the file door and a durable process see the same root. As root
// and as uid 65534, each judged on the host.
func TestRootfs(t *testing.T) {
	root, marker := makeRootfs(t)
	ws := dir(t, "ws-")
	m := plantListedMarkers(t, ws)
	must(os.WriteFile(filepath.Join(ws, ".env"), []byte(listedMarker+"dotenv\n"), 0o644))
	port, targets, accepted := hostListener(t)
	script := `cat /image-marker > image; ls -A / > rootls
	cat .env >> copied 2>/dev/null
	for p in /usr/bin/busybox /usr /lib /etc/hostname; do [ -e "$p" ] && echo "$p" >> exists; done
	echo w > /etc/w 2>/dev/null; echo w > /image-w 2>/dev/null; echo w > /bin/w 2>/dev/null
	for a in ` + strings.Join(targets, " ") + `; do echo x | nc -w 3 $a ` + fmt.Sprint(port) + ` 2>/dev/null; done
	echo done > out
	` + m.script
	r := sh(t, ws, script, "--rootfs", root, "--read", m.listed)
	if r.code != 0 {
		t.Fatalf("hutch run --rootfs: %s", r)
	}
	m.check(t, ws, r, true)
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(ws, f)); return string(b) }
	if got := read("image"); got != marker+"\n" {
		t.Errorf("the image's /image-marker read %q, want %q", got, marker)
	}
	if ls := read("rootls"); !strings.Contains(ls, "image-marker") || strings.Contains(ls, "usr") {
		t.Errorf("the root lists %q: want the image's entries, not the host's", ls)
	}
	if read("out") != "done\n" {
		t.Errorf("the workspace was not written: %q", read("out"))
	}
	for _, p := range []string{"etc/w", "image-w", "bin/w"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("the command wrote /%s into the image", p)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's listener accepted %d connections from the command", n)
	}

	// Limits, judged by the host's accounting where cgroups hold them
	// (as uid 65534 they may be rlimits, which TestMemoryLimit judges).
	r = sh(t, ws, `dd if=/dev/zero of=/dev/null bs=200M count=1; exit 0`, "--rootfs", root, "--memory", "64M")
	if r.result != nil && slices.Contains(r.result.Layers, runtime.LayerCgroup) && (r.result.Usage == nil || r.result.Usage.OOMKills == 0) {
		t.Errorf("a 200 MiB buffer under --memory 64M was not OOM-killed: %s\n%+v", r, r.result)
	}
	r = sh(t, ws, `for i in $(seq 1 40); do sleep 5 & done; wait; exit 0`, "--rootfs", root, "--pids", "20", "--timeout", "60s")
	if r.result != nil && slices.Contains(r.result.Layers, runtime.LayerCgroup) && (r.result.Usage == nil || r.result.Usage.PidsLimitHits == 0) {
		t.Errorf("40 sleeps under --pids 20 hit no limit: %s\n%+v", r, r.result)
	}

	// The file door shows the same root.
	if r := runCLIArgs(t, "read", "--workspace", ws, "--rootfs", root, "/image-marker"); r.code != 0 || !strings.Contains(r.stdout, marker) {
		t.Errorf("hutch read --rootfs /image-marker: %s", r)
	}
	for p := range m.secrets {
		if r := runCLIArgs(t, "read", "--workspace", ws, "--rootfs", root, p); r.code == 0 || strings.Contains(r.stdout+r.stderr, listedMarker) {
			t.Errorf("hutch read --rootfs %s: %s", p, r)
		}
	}
	if r := runCLIArgs(t, "ls", "--workspace", ws, "--rootfs", root, "/"); r.code != 0 || !strings.Contains(r.stdout, `"/image-marker"`) || strings.Contains(r.stdout, `"/usr"`) {
		t.Errorf("hutch ls --rootfs /: %s", r)
	}
	if r := runCLIArgs(t, "write", "--workspace", ws, "--rootfs", root, "--content", "x", "/etc/door"); r.code == 0 {
		t.Errorf("hutch write --rootfs /etc/door: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/door")); err == nil {
		t.Errorf("the file door wrote into the image")
	}

	// A durable process runs on the image's root too.
	data := dir(t, "rootfs-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	out, stderr, code := hutchProcess(t, data, "start", "--workspace", ws, "--name", "img", "--kill-after", "2s", "--rootfs", root,
		"--", "sh", "-c", "cat /image-marker > durable; ls -A / > durable-ls; exec sleep 600")
	if code != 0 {
		t.Fatalf("hutch process start --rootfs: exit %d, %s%s", code, out, stderr)
	}
	if !waitFor(time.Minute, func() bool { return read("durable-ls") != "" }) {
		t.Fatalf("the durable process wrote nothing in a minute")
	}
	if got := read("durable"); got != marker+"\n" {
		t.Errorf("the durable process read /image-marker as %q", got)
	}
	if ls := read("durable-ls"); strings.Contains(ls, "usr") {
		t.Errorf("the durable process's root lists %q", ls)
	}
}

// TestRootfsRefused: a root that would not be one, or that a command
// could change, is refused naming --rootfs; so is one at level landlock,
// which has no mounts to make it.
func TestRootfsRefused(t *testing.T) {
	root, _ := makeRootfs(t)
	ws := dir(t, "ws-")
	inWS := filepath.Join(ws, "img")
	must(os.Mkdir(inWS, 0o755))
	file := filepath.Join(root, "image-marker")
	for _, tt := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"the host's root", []string{"--rootfs", "/"}, "the host's own root"},
		{"in the workspace", []string{"--rootfs", inWS}, "writable tree"},
		{"a file", []string{"--rootfs", file}, "not a directory"},
		{"missing", []string{"--rootfs", filepath.Join(root, "nothing")}, "--rootfs"},
		{"empty", []string{"--rootfs="}, "empty"},
		{"level landlock", []string{"--rootfs", root, "--min-level", "landlock"}, "level landlock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := []string(nil)
			if slices.Contains(tt.flags, "--min-level") {
				env = []string{"HUTCH_SIMULATE=no-userns"}
			}
			r := runCLIArgsEnv(t, env, append(append([]string{"run", "--workspace", ws}, tt.flags...), "--", "true")...)
			if r.code != 125 || !strings.Contains(r.stderr, "--rootfs") || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want exit 125 naming --rootfs and %q: %s", tt.want, r)
			}
		})
	}
}
