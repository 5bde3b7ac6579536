//go:build linux

package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	casdir "github.com/opencontainers/umoci/oci/cas/dir"
	"github.com/opencontainers/umoci/oci/casext"
	"github.com/opencontainers/umoci/oci/layer"
	"golang.org/x/sys/unix"

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

	// Limits, judged by the host's accounting where cgroups hold them;
	// as uid 65534 they may be rlimits, under which the buffer is never
	// had (the file that says so is not written).
	r = sh(t, ws, `dd if=/dev/zero of=/dev/null bs=200M count=1 && echo had > alloc; exit 0`, "--rootfs", root, "--memory", "64M")
	switch {
	case r.result == nil:
		t.Errorf("no result: %s", r)
	case slices.Contains(r.result.Layers, runtime.LayerCgroup) && (r.result.Usage == nil || r.result.Usage.OOMKills == 0):
		t.Errorf("a 200 MiB buffer under --memory 64M was not OOM-killed: %s\n%+v", r, r.result)
	case read("alloc") != "":
		t.Errorf("a 200 MiB buffer was had under --memory 64M: %s\n%+v", r, r.result)
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
	} else {
		// The sandbox's own /tmp, /dev and /proc are directories there,
		// though nothing of theirs is read.
		var ents []struct{ Path, Type string }
		must(json.Unmarshal([]byte(r.stdout), &ents))
		for _, e := range ents {
			if (e.Path == "/tmp" || e.Path == "/dev" || e.Path == "/proc") && e.Type != "dir" {
				t.Errorf("hutch ls /: %s is a %q, not a dir", e.Path, e.Type)
			}
		}
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
		{"holding a writable tree", []string{"--rootfs", root, "--write", filepath.Join(root, "var/cache")}, "holds the writable tree"},
		{"holding a writable bind", []string{"--rootfs", root, "--bind", filepath.Join(root, "etc") + ":/data"}, "holds the writable tree"},
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

// makeImageLayout writes an OCI image layout holding one image, tagged
// tag, built with umoci's own packages from two layers: root's tree, then
// a layer that adds /layer2-marker and deletes /removed with a whiteout
// (written by hand: what an image's second layer holds). The image's
// configuration carries env.
func makeImageLayout(t *testing.T, root, tag string, env []string) string {
	t.Helper()
	ctx := context.Background()
	layout := filepath.Join(dir(t, "layout-"), "oci")
	must(casdir.Create(layout))
	engine, err := casdir.Open(layout)
	must(err)
	defer engine.Close()
	ext := casext.NewEngine(engine)

	var second bytes.Buffer
	tw := tar.NewWriter(&second)
	for name, body := range map[string]string{"layer2-marker": "LAYER2-" + tag + "\n", ".wh.removed": ""} {
		must(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}))
		_, err := tw.Write([]byte(body))
		must(err)
	}
	must(tw.Close())
	var layers []ispec.Descriptor
	var diffIDs []digest.Digest
	for _, r := range []io.Reader{layer.GenerateInsertLayer(root, "/", false, &layer.RepackOptions{}), &second} {
		d, size, err := engine.PutBlob(ctx, r)
		must(err)
		layers = append(layers, ispec.Descriptor{MediaType: ispec.MediaTypeImageLayer, Digest: d, Size: size})
		diffIDs = append(diffIDs, d)
	}
	config := ispec.Image{
		Platform: ispec.Platform{OS: "linux", Architecture: goruntime.GOARCH},
		Config:   ispec.ImageConfig{Env: env, WorkingDir: "/", User: "0"},
		RootFS:   ispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	}
	cd, csize, err := ext.PutBlobJSON(ctx, config)
	must(err)
	manifest := ispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ispec.MediaTypeImageManifest,
		Config:    ispec.Descriptor{MediaType: ispec.MediaTypeImageConfig, Digest: cd, Size: csize},
		Layers:    layers,
	}
	md, msize, err := ext.PutBlobJSON(ctx, manifest)
	must(err)
	must(ext.UpdateReference(ctx, tag, ispec.Descriptor{MediaType: ispec.MediaTypeImageManifest, Digest: md, Size: msize}))
	return layout
}

// TestImage (issue 45, must-show 1): hutch run --image LAYOUT:TAG unpacks
// an OCI image (two layers, a whiteout) once into the user's cache and
// runs on it as --rootfs does: the image's files, as its layers leave
// them, are there, the host's are not, the image's Env applies (but for
// what the sandbox sets itself or refuses); a second run unpacks nothing;
// the file door, a durable process and hutch serve use the image too. As root and as
// uid 65534, judged on the host.
func TestImage(t *testing.T) {
	root, marker := makeRootfs(t)
	must(os.WriteFile(filepath.Join(root, "removed"), []byte("removed by layer 2\n"), 0o644))
	// Privileges an image's files carry, which the cache must not keep
	// on the host: a setuid program and, as root, a file capability
	// (CAP_NET_RAW, VFS_CAP_REVISION_2).
	priv := filepath.Join(root, "bin", "privileged")
	must(os.WriteFile(priv, []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(priv, 0o755|os.ModeSetuid|os.ModeSetgid))
	if os.Geteuid() == 0 {
		must(unix.Setxattr(priv, "security.capability", []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0))
	}
	tag := "v1"
	layout := makeImageLayout(t, root, tag, []string{"PATH=/bin", "IMAGE_VAR=from-the-image", "HOME=/root", "LD_LIBRARY_PATH=/opt/lib"})
	cache := dir(t, "cache-")
	env := []string{"XDG_CACHE_HOME=" + cache}
	ws := dir(t, "ws-")
	m := plantListedMarkers(t, ws)
	script := `cat /image-marker > image; cat /layer2-marker > layer2; [ -e /removed ] && echo yes > removed
	echo "$IMAGE_VAR" > var; echo "$HOME" > home; echo "$LD_LIBRARY_PATH" > ldpath; echo "$PATH" > path
	` + m.script
	ref := layout + ":" + tag
	run := func() cliResult {
		return runCLIArgsEnv(t, env, "run", "--workspace", ws, "--image", ref, "--read", m.listed, "--", "sh", "-c", script)
	}
	r := run()
	if r.code != 0 {
		t.Fatalf("hutch run --image: %s", r)
	}
	m.check(t, ws, r, true)
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(ws, f)); return strings.TrimSpace(string(b)) }
	for f, want := range map[string]string{"image": marker, "layer2": "LAYER2-" + tag, "removed": "", "var": "from-the-image", "ldpath": "", "path": "/bin"} {
		if got := read(f); got != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
	if h := read("home"); h == "/root" || h == "" {
		t.Errorf("HOME is %q: the image's, not the sandbox's", h)
	}
	// Unpacked once, under its digest, and not again.
	entries, _ := filepath.Glob(filepath.Join(cache, "hutch", "images", "*", "rootfs"))
	if len(entries) != 1 {
		t.Fatalf("the cache holds %v, want one unpacked root", entries)
	}
	before, err := os.Stat(filepath.Join(entries[0], "image-marker"))
	must(err)
	if fi, err := os.Stat(filepath.Join(entries[0], "bin", "privileged")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the cache's copy of a setuid program: %v %v", fi.Mode(), err)
	}
	if n, err := unix.Getxattr(filepath.Join(entries[0], "bin", "privileged"), "security.capability", make([]byte, 64)); err == nil {
		t.Errorf("the cache's copy keeps a file capability (%d bytes)", n)
	}
	if r := run(); r.code != 0 {
		t.Fatalf("hutch run --image, again: %s", r)
	}
	after, err := os.Stat(filepath.Join(entries[0], "image-marker"))
	must(err)
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the second run unpacked the image again")
	}

	// The file door and a durable process run on it too.
	if r := runCLIArgsEnv(t, env, "read", "--workspace", ws, "--image", ref, "/layer2-marker"); r.code != 0 || !strings.Contains(r.stdout, "LAYER2-"+tag) {
		t.Errorf("hutch read --image /layer2-marker: %s", r)
	}
	data := dir(t, "image-data-")
	t.Cleanup(func() { hutchProcess(t, data, "stop-all") })
	cmd := exec.Command(hutchBin, "process", "--data-dir", data, "start", "--workspace", ws, "--name", "img", "--kill-after", "2s", "--image", ref,
		"--", "sh", "-c", "cat /image-marker > durable; exec sleep 600")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hutch process start --image: %v\n%s", err, out)
	}
	if !waitFor(time.Minute, func() bool { return read("durable") != "" }) || read("durable") != marker {
		t.Errorf("the durable process read /image-marker as %q", read("durable"))
	}

	// So does hutch serve's every command.
	t.Setenv("XDG_CACHE_HOME", cache)
	s := startServe(t, ws, dir(t, "image-serve-"), "--image", ref)
	if _, code := s.exec(t, mustJSON(map[string]any{"argv": []string{"sh", "-c", "cat /layer2-marker > served"}})); code != 0 || read("served") != "LAYER2-"+tag {
		t.Errorf("hutch serve --image: exit %d, read %q", code, read("served"))
	}

	// What is not an image is refused naming --image.
	for _, bad := range []string{ws, layout + ":nosuchtag", filepath.Join(ws, "missing")} {
		if r := runCLIArgsEnv(t, env, "run", "--workspace", ws, "--image", bad, "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "--image") {
			t.Errorf("--image %s: want exit 125 naming --image: %s", bad, r)
		}
	}

	// hutch does not unpack by itself: a hutch without the hutch-image
	// helper beside it or on $PATH refuses --image, naming the flag and
	// the helper, and runs nothing.
	alone := filepath.Join(dir(t, "alone-"), "hutch")
	b, err := os.ReadFile(hutchBin)
	must(err)
	must(os.WriteFile(alone, b, 0o755))
	c := exec.Command(alone, "run", "--workspace", ws, "--image", ref, "--", "sh", "-c", "echo ran > alone-ran")
	c.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "XDG_CACHE_HOME="+cache)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "--image") || !strings.Contains(string(out), "hutch-image") {
		t.Errorf("hutch without its helper, --image: want exit 125 naming --image and hutch-image: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "alone-ran")); err == nil {
		t.Errorf("hutch without its helper ran the command")
	}
}
