package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// tree is the initramfs being assembled: guest path -> entry.
type tree struct {
	entries map[string]*entry
}

type entry struct {
	mode   uint32 // full st_mode: type and permissions
	data   []byte // file contents, or symlink target
	src    string // host file to read the contents from, if data is nil
	rmajor uint32 // device nodes
	rminor uint32
}

const (
	sIFDIR  = 0o040000
	sIFREG  = 0o100000
	sIFLNK  = 0o120000
	sIFCHR  = 0o020000
	sIFMASK = 0o170000
)

func newTree() *tree {
	t := &tree{entries: map[string]*entry{}}
	// The guest is usr-merged whatever the host is.
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local/bin", "/dev", "/proc", "/sys", "/tmp", "/var/tmp", "/run", "/etc", "/root", "/newroot"} {
		t.dir(d)
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		t.symlink("/"+l, "usr/"+l)
	}
	t.entries["/tmp"].mode = sIFDIR | 0o1777
	t.entries["/var/tmp"].mode = sIFDIR | 0o1777
	t.entries["/root"].mode = sIFDIR | 0o700
	// The kernel opens /dev/console for init's stdio before /init runs.
	t.entries["/dev/console"] = &entry{mode: sIFCHR | 0o600, rmajor: 5, rminor: 1}
	return t
}

// dir adds a directory and its parents.
func (t *tree) dir(p string) {
	p = path.Clean(p)
	if p == "/" {
		return
	}
	if _, ok := t.entries[p]; ok {
		return
	}
	t.dir(path.Dir(p))
	t.entries[p] = &entry{mode: sIFDIR | 0o755}
}

func (t *tree) file(p string, mode uint32, data []byte) {
	t.dir(path.Dir(p))
	t.entries[path.Clean(p)] = &entry{mode: sIFREG | mode, data: data}
}

func (t *tree) hostFile(p string, mode uint32, src string) {
	t.dir(path.Dir(p))
	t.entries[path.Clean(p)] = &entry{mode: sIFREG | mode, src: src}
}

func (t *tree) symlink(p, target string) {
	t.dir(path.Dir(p))
	t.entries[path.Clean(p)] = &entry{mode: sIFLNK | 0o777, data: []byte(target)}
}

// guestPath maps a canonical host path onto the usr-merged guest.
func guestPath(p string) string {
	for _, d := range []string{"/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(p, d) {
			return "/usr" + p
		}
	}
	return p
}

// addHost copies a host file into the guest at the same path, keeping a
// final symlink a symlink (and copying its target too).
func (t *tree) addHost(p string) error {
	for depth := 0; depth < 16; depth++ {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return err
		}
		p = filepath.Join(dir, filepath.Base(p))
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		gp := guestPath(p)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if _, ok := t.entries[gp]; !ok {
				t.symlink(gp, target)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			p = target
			continue
		case fi.Mode().IsRegular():
			if _, ok := t.entries[gp]; !ok {
				t.hostFile(gp, uint32(fi.Mode().Perm()), p)
			}
			return nil
		case fi.IsDir():
			t.dir(gp)
			return nil
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, fi.Mode())
		}
	}
	return fmt.Errorf("%s: too many symlinks", p)
}

// addHostTree copies a host directory recursively, skipping the names in
// skip (relative to root).
func (t *tree) addHostTree(root string, skip func(rel string) bool) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			t.dir(guestPath(p))
			return nil
		}
		return t.addHost(p)
	})
}

// addWithLibs copies a dynamically linked host binary and the shared
// libraries ldd names for it (the loader included).
func (t *tree) addWithLibs(p string) error {
	if err := t.addHost(p); err != nil {
		return err
	}
	libs, err := lddLibs(p)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := t.addHost(l); err != nil {
			return fmt.Errorf("%s needs %s: %w", p, l, err)
		}
	}
	return nil
}

// lddLibs lists the absolute library paths ldd prints for a file; a
// static file has none.
func lddLibs(p string) ([]string, error) {
	out, err := exec.Command("ldd", p).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) || bytes.Contains(out, []byte("statically linked")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", p, err, out)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0]) // the loader
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd %s: %s not found", p, f[0])
		}
	}
	return libs, nil
}

// writeCpio writes the tree as a newc cpio archive (uncompressed: the
// kernel unpacks it faster than it would inflate it under emulation).
func (t *tree) writeCpio(w io.Writer) error {
	names := make([]string, 0, len(t.entries))
	for n := range t.entries {
		names = append(names, n)
	}
	sort.Strings(names) // parents before children
	bw := bufio.NewWriterSize(w, 1<<20)
	ino := uint32(1)
	for _, n := range names {
		e := t.entries[n]
		data := e.data
		if e.mode&sIFMASK == sIFREG && data == nil && e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			data = b
		}
		if e.mode&sIFMASK == sIFDIR || e.mode&sIFMASK == sIFCHR {
			data = nil
		}
		if err := cpioEntry(bw, strings.TrimPrefix(n, "/"), ino, e.mode, e.rmajor, e.rminor, data); err != nil {
			return err
		}
		ino++
	}
	if err := cpioEntry(bw, "TRAILER!!!", 0, 0, 0, 0, nil); err != nil {
		return err
	}
	return bw.Flush()
}

func cpioEntry(w io.Writer, name string, ino, mode, rmajor, rminor uint32, data []byte) error {
	nlink := uint32(1)
	if mode&sIFMASK == sIFDIR {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return err
	}
	if err := pad(w, len(hdr)+len(name)+1); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	return pad(w, len(data))
}

func pad(w io.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

// size is the total of the file contents, for the report.
func (t *tree) size() int64 {
	var n int64
	for _, e := range t.entries {
		if e.data != nil {
			n += int64(len(e.data))
		} else if e.src != "" {
			if fi, err := os.Stat(e.src); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}
