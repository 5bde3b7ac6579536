//go:build linux

package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptPackage packs the TypeScript client as npm would publish
// it and uses what a user would get: in a scratch copy of its sources,
// npm ci (from npm's cache where it can) and npm pack, offline (its
// prepare script builds dist/); the tarball must hold the built client, its declarations,
// README and LICENSE, and no tests or sources. A fresh project then
// installs the tarball offline, type-checks against its declarations,
// and runs a command through a `hutch serve` this test starts, from
// `import { Sandbox } from "hutch-client"`: the file the command writes
// is checked on the host.
func TestTypeScriptPackage(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (.ci/run installs Debian's nodejs and npm): the TypeScript package needs Node 18 or later")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (.ci/run installs Debian's nodejs and npm): the TypeScript package is packed with it")
	}
	if os.Getuid() != 0 && os.Getenv("HUTCH_TS_CLIENT") != "" {
		t.Skip("the TypeScript package is packed and installed in make test's root pass: npm works offline from its cache, and this uid has no home for one (HUTCH_TS_CLIENT is set: make test-unprivileged)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Pack it, as from a fresh checkout.
	var checkout struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(tsClientDir, "package.json")); err != nil || json.Unmarshal(b, &checkout) != nil || checkout.Version == "" {
		t.Fatalf("clients/typescript/package.json: no version (%v)", err)
	}
	version := checkout.Version
	src := dir(t, "tspack-src-")
	copyTSClient(t, src)
	// Its build's dependencies (typescript, @types/node) from npm's cache
	// where it has them, as TestTypeScriptClient's npm ci: a fresh
	// machine's cache is empty. What is proven offline is the pack and
	// the install of what it packed.
	runNPM(t, ctx, npm, src, "ci", "--prefer-offline", "--loglevel=error")
	packed := dir(t, "tspack-out-")
	runNPM(t, ctx, npm, src, "pack", "--offline", "--loglevel=error", "--pack-destination", packed)
	tgzs, _ := filepath.Glob(filepath.Join(packed, "*.tgz"))
	if len(tgzs) != 1 || filepath.Base(tgzs[0]) != "hutch-client-"+version+".tgz" {
		t.Fatalf("npm pack made %v in %s, want hutch-client-%s.tgz", tgzs, packed, version)
	}
	tgz := tgzs[0]
	files := tarFiles(t, tgz)
	names := slices.Sorted(maps.Keys(files))
	t.Logf("%s: %s", filepath.Base(tgz), strings.Join(names, ", "))
	for _, want := range []string{"package.json", "LICENSE", "README.md", "dist/src/client.js", "dist/src/client.d.ts"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the package lacks %s (it holds %s)", want, strings.Join(names, ", "))
		}
	}
	for _, n := range names {
		top := n == "package.json" || n == "LICENSE" || n == "README.md"
		built := strings.HasPrefix(n, "dist/src/") && (strings.HasSuffix(n, ".js") || strings.HasSuffix(n, ".d.ts"))
		if !top && !built {
			t.Errorf("the package holds %s: only the built client (dist/src/*.js, *.d.ts), package.json, README.md and LICENSE belong in it", n)
		}
		if strings.Contains(n, "test") || (strings.HasSuffix(n, ".ts") && !strings.HasSuffix(n, ".d.ts")) || strings.HasSuffix(n, ".map") {
			t.Errorf("the package holds %s: no tests, sources or source maps", n)
		}
	}
	license, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["LICENSE"], license) {
		t.Errorf("the package's LICENSE (clients/typescript/LICENSE) is not the repository's LICENSE")
	}
	if bytes.Contains(files["dist/src/client.js"], []byte("sourceMappingURL")) {
		t.Errorf("dist/src/client.js names a source map the package does not hold")
	}
	var pkg struct {
		Name, Version, License, Type, Types, Main string
		Private                                   *bool
		Exports                                   map[string]any
		SideEffects                               *bool
	}
	if err := json.Unmarshal(files["package.json"], &pkg); err != nil {
		t.Fatalf("the package's package.json: %v", err)
	}
	if pkg.Name != "hutch-client" || pkg.Version != version || pkg.License != "Apache-2.0" || pkg.Type != "module" || pkg.Private != nil ||
		pkg.SideEffects == nil || *pkg.SideEffects {
		t.Errorf("the package's package.json: %s", files["package.json"])
	}
	dot, _ := pkg.Exports["."].(map[string]any)
	for _, p := range []any{dot["types"], dot["default"], pkg.Types, pkg.Main} {
		if s, _ := p.(string); s == "" || files[strings.TrimPrefix(s, "./")] == nil {
			t.Errorf("package.json names %v, which the package does not hold (exports %v)", p, pkg.Exports)
		}
	}

	// A fresh project installs the tarball, offline: no dependency comes
	// with it.
	proj := dir(t, "tspack-proj-")
	write := func(name, content string) { must(os.WriteFile(filepath.Join(proj, name), []byte(content), 0o644)) }
	write("package.json", `{"name": "hutch-client-consumer", "version": "0.0.0", "private": true, "type": "module"}`+"\n")
	runNPM(t, ctx, npm, proj, "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tgz)
	installed := filepath.Join(proj, "node_modules", "hutch-client")
	if _, err := os.Stat(filepath.Join(installed, "dist", "src", "client.js")); err != nil {
		t.Fatalf("npm install %s: %v", filepath.Base(tgz), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(proj, "node_modules")); len(entries) != 2 { // hutch-client and .package-lock.json
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		t.Errorf("installing the package installed %v: it has no dependencies", got)
	}

	// Its declarations, reached through its exports as a TypeScript
	// project (NodeNext) reaches them, type-check, and are the client's:
	// a misspelled option does not compile.
	write("check.ts", `import { HutchError, Sandbox, type FileInfo, type FileType } from "hutch-client";

export async function check(sb: Sandbox): Promise<FileType> {
  const r = await sb.exec({ argv: ["true"], stdin: new Uint8Array([0xff]), timeoutMs: 1000 });
  const status: number = r.exitCode;
  void status;
  // @ts-expect-error: timeoutMS is no option
  await sb.exec({ command: "true", timeoutMS: 5 });
  const info: FileInfo = await sb.stat({ path: "." });
  return info.type;
}
void HutchError;
`)
	tsconfig, _ := json.Marshal(map[string]any{
		"compilerOptions": map[string]any{
			"target": "ES2022", "lib": []string{"ES2022"}, "module": "NodeNext", "moduleResolution": "NodeNext",
			"strict": true, "noEmit": true, "types": []string{"node"},
			"typeRoots": []string{filepath.Join(src, "node_modules", "@types")},
		},
		"files": []string{"check.ts"},
	})
	write("tsconfig.json", string(tsconfig))
	tsc := exec.CommandContext(ctx, node, filepath.Join(src, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	tsc.Dir = proj
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Errorf("tsc against the installed package's declarations: %v\n%s", err, out)
	}

	// A command through a real server, from the installed package: it
	// writes a file in the workspace, its stdin's bytes (0xff, 0x00:
	// not UTF-8) included.
	ws := dir(t, "tspack-ws-")
	s := startServe(t, ws, dir(t, "serve-data-"))
	write("run.mjs", `import { createRequire } from "node:module";
import { HutchError, PROTOCOL_VERSION, Sandbox } from "hutch-client";

const require = createRequire(import.meta.url);
const { version } = require("hutch-client/package.json");
const [socketPath] = process.argv.slice(2);
const sb = new Sandbox({ socketPath });
if ((await sb.version()).protocol !== PROTOCOL_VERSION) throw new Error("protocol");
const r = await sb.exec({
  command: 'printf "%s\\n" "$FROM" > from-package.txt && cat >> from-package.txt',
  env: { FROM: "hutch-client " + version },
  stdin: new Uint8Array([0x62, 0x79, 0x74, 0x65, 0x73, 0xff, 0x00, 0x0a]),
  timeoutMs: 60000,
});
let deep = "";
try {
  await import("hutch-client/dist/src/client.js");
} catch (e) {
  deep = e.code;
}
console.log(JSON.stringify({
  exitCode: r.exitCode, stderr: r.stderr, resolved: require.resolve("hutch-client"), deep,
  hutchError: typeof HutchError,
}));
`)
	c := exec.CommandContext(ctx, node, "run.mjs", s.sock)
	c.Dir = proj
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("node run.mjs (import from the installed package): %v\n%s%s\nserver: %s", err, out, stderr.Bytes(), s.stderr)
	}
	var got struct {
		ExitCode   int
		Stderr     string
		Resolved   string
		Deep       string
		HutchError string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node run.mjs: %q: %v", out, err)
	}
	if got.ExitCode != 0 {
		t.Errorf("the command through the package exited %d: %s", got.ExitCode, got.Stderr)
	}
	if want := filepath.Join(installed, "dist", "src", "client.js"); got.Resolved != want {
		t.Errorf(`"hutch-client" resolved to %s, want the installed package's %s`, got.Resolved, want)
	}
	if got.Deep != "ERR_PACKAGE_PATH_NOT_EXPORTED" || got.HutchError != "function" {
		t.Errorf("a path the package does not export was imported (%q), or HutchError is no class (%s)", got.Deep, got.HutchError)
	}
	b, err := os.ReadFile(filepath.Join(ws, "from-package.txt"))
	if want := []byte("hutch-client " + version + "\nbytes\xff\x00\n"); err != nil || !bytes.Equal(b, want) {
		t.Errorf("the workspace's from-package.txt on the host: %q (%v), want %q", b, err, want)
	}
}

// tarFiles is a gzipped tarball's regular files by path, npm's leading
// "package/" dropped.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s holds %s, not a regular file (type %c)", path, h.Name, h.Typeflag)
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, h.Name, err)
		}
		name, ok := strings.CutPrefix(h.Name, "package/")
		if !ok {
			t.Errorf("%s holds %s, outside package/", path, h.Name)
		}
		files[name] = b
	}
}
