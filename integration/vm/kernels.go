package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// kernelSpec is one entry of the matrix: a kernel line, and where Debian
// publishes it. Packages are meta packages (linux-image-amd64 and the
// like): the ABI name they depend on changes with every update, so it is
// resolved through apt on each run, never written down here.
type kernelSpec struct {
	// Name is what the reports call it ("5.10", "7.x").
	Name string
	// Prefix is the upstream version the meta package's version must start
	// with ("6.1.", "7.").
	Prefix string
	// Why it is in the matrix.
	Why string
	// Candidates are tried in order; within one, the highest version of
	// the package with the prefix wins (a list may hold several suites).
	Candidates []candidate
}

type candidate struct {
	List    string // file under integration/vm/sources, without ".list"
	Package string // the meta package
}

var matrix = []kernelSpec{
	{Name: "5.10", Prefix: "5.10.", Why: "no Landlock, no mount_setattr: the fallback rungs",
		Candidates: []candidate{{"bullseye", "linux-image-amd64"}}},
	{Name: "6.1", Prefix: "6.1.", Why: "Debian 12's kernel; Landlock ABI 2",
		Candidates: []candidate{{"bookworm", "linux-image-amd64"}}},
	{Name: "6.12", Prefix: "6.12.", Why: "Debian 13's kernel (and bookworm-security's); Landlock ABI 6",
		Candidates: []candidate{{"bookworm", "linux-image-6.12-amd64"}, {"trixie", "linux-image-amd64"}}},
	{Name: "7.x", Prefix: "7.", Why: "the newest Debian kernel (trixie-backports or sid)",
		Candidates: []candidate{{"newest", "linux-image-amd64"}}},
}

// kernel is a fetched kernel, ready to boot.
type kernel struct {
	Spec    kernelSpec
	Package string // meta package
	Version string // its version: the cache key
	Image   string // the package that held vmlinuz
	Release string // uname -r, from the vmlinuz file name
	Vmlinuz string
	Config  string // path of its config-*, when the packages ship one
	Cached  string // non-empty when resolution failed and an older cached copy is used: why
}

// fetcher resolves and downloads kernels with apt, against the project's
// own sources lists and a private state directory (never /etc/apt).
type fetcher struct {
	sources string // integration/vm/sources
	cache   string // the cache root
	updated map[string]error
	log     func(format string, args ...any)
}

func (f *fetcher) aptDir(list string) string { return filepath.Join(f.cache, "apt", list) }

// aptOpts are the options that point apt at one sources list and a state
// of its own.
func (f *fetcher) aptOpts(list string) []string {
	d := f.aptDir(list)
	empty := filepath.Join(f.cache, "apt", "empty")
	return []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(f.sources, list+".list"),
		"-o", "Dir::Etc::SourceParts=" + empty,
		"-o", "Dir::Etc::PreferencesParts=" + empty,
		"-o", "Dir::State::Lists=" + filepath.Join(d, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(d, "cache"),
		"-o", "Acquire::Languages=none",
		"-o", "APT::Sandbox::User=root",
		"-q",
	}
}

func (f *fetcher) apt(list, tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(tool, append(f.aptOpts(list), args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// update runs apt-get update for a list once per run. A failure is
// reported and the lists from an earlier run, if any, are used.
func (f *fetcher) update(list string) error {
	if err, ok := f.updated[list]; ok {
		return err
	}
	d := f.aptDir(list)
	for _, p := range []string{filepath.Join(d, "lists", "partial"), filepath.Join(d, "cache", "archives", "partial"), filepath.Join(f.cache, "apt", "empty")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	_, err := f.apt(list, "apt-get", "update")
	f.updated[list] = err
	return err
}

// stanza is one package version as apt-cache show prints it.
type stanza map[string]string

func parseStanzas(b []byte) []stanza {
	var out []stanza
	cur := stanza{}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur, last = stanza{}, ""
		case (l[0] == ' ' || l[0] == '\t') && last != "":
			cur[last] += "\n" + l
		default:
			k, v, ok := strings.Cut(l, ":")
			if ok {
				last = k
				cur[k] = strings.TrimSpace(v)
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// versionLess compares Debian versions with dpkg.
func versionLess(a, b string) bool {
	return exec.Command("dpkg", "--compare-versions", a, "lt", b).Run() == nil
}

// exactDeps are the dependencies of s pinned to one version ("name (=
// ver)") whose name starts with one of prefixes.
func exactDeps(s stanza, prefixes ...string) [][2]string {
	var out [][2]string
	for _, clause := range strings.Split(s["Depends"], ",") {
		alt, _, _ := strings.Cut(clause, "|")
		alt = strings.TrimSpace(alt)
		name, rest, ok := strings.Cut(alt, " ")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "(=") {
			continue
		}
		ver := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(rest, "(="), ")"))
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				out = append(out, [2]string{name, ver})
				break
			}
		}
	}
	return out
}

// fetch resolves a spec to a kernel in the cache, downloading it when the
// cache lacks that version.
func (f *fetcher) fetch(spec kernelSpec) (*kernel, error) {
	var errs []error
	for _, c := range spec.Candidates {
		k, err := f.fetchCandidate(spec, c)
		if err == nil {
			return k, nil
		}
		errs = append(errs, fmt.Errorf("%s from %s.list: %w", c.Package, c.List, err))
	}
	// Nothing could be resolved or downloaded: an earlier run's copy of
	// this line still tests the code, but say so.
	if k := f.newestCached(spec); k != nil {
		k.Cached = errors.Join(errs...).Error()
		return k, nil
	}
	return nil, errors.Join(errs...)
}

func (f *fetcher) fetchCandidate(spec kernelSpec, c candidate) (*kernel, error) {
	if err := f.update(c.List); err != nil {
		f.log("  apt-get update for %s.list failed (trying the lists of an earlier run): %v", c.List, err)
	}
	out, err := f.apt(c.List, "apt-cache", "show", c.Package)
	if err != nil {
		return nil, err
	}
	var best stanza
	for _, s := range parseStanzas(out) {
		if s["Package"] != c.Package || !strings.HasPrefix(s["Version"], spec.Prefix) {
			continue
		}
		if best == nil || versionLess(best["Version"], s["Version"]) {
			best = s
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no version starting with %s", spec.Prefix)
	}
	k := &kernel{Spec: spec, Package: c.Package, Version: best["Version"]}
	dir := f.kernelDir(spec, c.Package, k.Version)
	if f.load(k, dir) {
		return k, nil
	}
	if err := f.download(k, best, c.List, dir); err != nil {
		return nil, err
	}
	if !f.load(k, dir) {
		return nil, fmt.Errorf("%s %s: no vmlinuz after download", c.Package, k.Version)
	}
	return k, nil
}

func (f *fetcher) kernelDir(spec kernelSpec, pkg, version string) string {
	return filepath.Join(f.cache, "kernels", spec.Name, sanitize(pkg+"_"+version))
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// load fills k from a cache directory, reporting whether it is complete.
func (f *fetcher) load(k *kernel, dir string) bool {
	info, err := os.ReadFile(filepath.Join(dir, "info"))
	if err != nil {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "vmlinuz")); err != nil {
		return false
	}
	for _, l := range strings.Split(string(info), "\n") {
		key, v, _ := strings.Cut(l, "=")
		switch key {
		case "package":
			k.Package = v
		case "version":
			k.Version = v
		case "image":
			k.Image = v
		case "release":
			k.Release = v
		}
	}
	k.Vmlinuz = filepath.Join(dir, "vmlinuz")
	if _, err := os.Stat(filepath.Join(dir, "config")); err == nil {
		k.Config = filepath.Join(dir, "config")
	}
	return k.Release != ""
}

// newestCached is the highest cached version of a spec, for when the
// mirror cannot be reached.
func (f *fetcher) newestCached(spec kernelSpec) *kernel {
	ents, _ := os.ReadDir(filepath.Join(f.cache, "kernels", spec.Name))
	var best *kernel
	for _, e := range ents {
		k := &kernel{Spec: spec}
		if f.load(k, filepath.Join(f.cache, "kernels", spec.Name, e.Name())) && strings.HasPrefix(k.Version, spec.Prefix) {
			if best == nil || versionLess(best.Version, k.Version) {
				best = k
			}
		}
	}
	return best
}

// download follows the meta package's exact-version dependencies
// (linux-image-ABI, and in 7.x linux-binary-ABI and linux-base-ABI) until
// a package holding boot/vmlinuz-* turns up, and keeps vmlinuz and the
// config in dir. Module packages are never fetched: the guest needs none
// (see checkConfig).
func (f *fetcher) download(k *kernel, meta stanza, list, dir string) error {
	tmp, err := os.MkdirTemp(f.cache, "download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	queue := exactDeps(meta, "linux-image-", "linux-binary-", "linux-base-")
	seen := map[string]bool{}
	var vmlinuz, config, image, release string
	for len(queue) > 0 && (vmlinuz == "" || config == "") {
		nv := queue[0]
		queue = queue[1:]
		if seen[nv[0]] {
			continue
		}
		seen[nv[0]] = true
		out, err := f.apt(list, "apt-cache", "show", nv[0]+"="+nv[1])
		if err != nil {
			return err
		}
		st := parseStanzas(out)
		if len(st) == 0 {
			return fmt.Errorf("%s=%s: not in the lists", nv[0], nv[1])
		}
		queue = append(queue, exactDeps(st[0], "linux-image-", "linux-binary-", "linux-base-")...)
		dl := filepath.Join(tmp, nv[0])
		if err := os.MkdirAll(dl, 0o755); err != nil {
			return err
		}
		cmd := exec.Command("apt-get", append(f.aptOpts(list), "download", nv[0]+"="+nv[1])...)
		cmd.Dir = dl
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get download %s=%s: %v: %s", nv[0], nv[1], err, strings.TrimSpace(string(out)))
		}
		debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
		if len(debs) != 1 {
			return fmt.Errorf("apt-get download %s: %d files", nv[0], len(debs))
		}
		x := filepath.Join(dl, "x")
		if out, err := exec.Command("dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v: %s", debs[0], err, out)
		}
		// Up to 6.x the image is boot/vmlinuz-RELEASE; from 7.x it is
		// usr/lib/modules/RELEASE/vmlinuz (in linux-binary-*), with the
		// config beside it (in linux-base-*).
		if m, _ := filepath.Glob(filepath.Join(x, "boot", "vmlinuz-*")); len(m) > 0 {
			vmlinuz, image = m[0], nv[0]
			release = strings.TrimPrefix(filepath.Base(m[0]), "vmlinuz-")
		}
		if m, _ := filepath.Glob(filepath.Join(x, "usr", "lib", "modules", "*", "vmlinuz")); len(m) > 0 {
			vmlinuz, image = m[0], nv[0]
			release = filepath.Base(filepath.Dir(m[0]))
		}
		if m, _ := filepath.Glob(filepath.Join(x, "boot", "config-*")); len(m) > 0 {
			config = m[0]
		}
		if m, _ := filepath.Glob(filepath.Join(x, "usr", "lib", "modules", "*", "config")); len(m) > 0 {
			config = m[0]
		}
		os.Remove(debs[0])
	}
	if vmlinuz == "" {
		return fmt.Errorf("no boot/vmlinuz-* in %s or its linux-image/linux-binary dependencies", k.Package)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := copyFile(vmlinuz, filepath.Join(dir, "vmlinuz")); err != nil {
		return err
	}
	if config != "" {
		if err := copyFile(config, filepath.Join(dir, "config")); err != nil {
			return err
		}
	}
	info := fmt.Sprintf("package=%s\nversion=%s\nimage=%s\nrelease=%s\nlist=%s\n", k.Package, k.Version, image, release, list)
	return os.WriteFile(filepath.Join(dir, "info"), []byte(info), 0o644)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// requiredBuiltin are the kernel options the guest relies on being built
// in (=y): the initramfs carries no modules. A kernel lacking one is still
// booted; the report names what is missing.
var requiredBuiltin = []string{
	"CONFIG_SERIAL_8250_CONSOLE", "CONFIG_BLK_DEV_INITRD", "CONFIG_DEVTMPFS", "CONFIG_TMPFS",
	"CONFIG_USER_NS", "CONFIG_PID_NS", "CONFIG_NET_NS", "CONFIG_IPC_NS", "CONFIG_UTS_NS",
	"CONFIG_CGROUPS", "CONFIG_MEMCG", "CONFIG_CGROUP_PIDS", "CONFIG_CGROUP_SCHED", "CONFIG_CFS_BANDWIDTH",
	"CONFIG_SECCOMP_FILTER", "CONFIG_KEYS", "CONFIG_UNIX98_PTYS", "CONFIG_UNIX",
}

// checkConfig lists the required options a kernel config does not build in.
func checkConfig(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	set := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			set[k] = v
		}
	}
	var missing []string
	for _, o := range requiredBuiltin {
		if set[o] != "y" {
			v := set[o]
			if v == "" {
				v = "unset"
			}
			missing = append(missing, o+"="+v)
		}
	}
	sort.Strings(missing)
	return missing
}
