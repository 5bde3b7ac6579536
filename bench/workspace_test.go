//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// BenchmarkWorkspaceSize is what a workspace's size costs: a monorepo-like
// tree of N files (directories of 20, a few .env files and repositories
// deep inside, no node_modules) against an empty workspace, in the same
// rounds: runtime.New (and Close), a cold command in a Sandbox made once
// (new: /bin/true in a fresh init; what every command of a long-lived
// Sandbox pays), and a whole hutch run, each with bwrap's whole run beside
// them. x_empty is each one's p50 over the same on the empty workspace.
// Sizes: $HUTCH_BENCH_SIZES (default 10000,100000,300000).
func BenchmarkWorkspaceSize(b *testing.B) {
	hutch, err := hutchCLI()
	if err != nil {
		b.Fatal(err)
	}
	sizes := []int{10000, 100000, 300000}
	if s := os.Getenv("HUTCH_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("HUTCH_BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	empty := filepath.Join(scratch, "ws-empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		ws := filepath.Join(scratch, fmt.Sprintf("ws-%d", n))
		if err := monorepo(ws, n); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("files-%d", n), func(b *testing.B) {
			sbs := map[string]*runtime.Sandbox{}
			for _, w := range []string{empty, ws} {
				sb, err := runtime.New(runtime.DefaultPolicy(w))
				if err != nil {
					b.Fatal(err)
				}
				defer sb.Close()
				sbs[w] = sb
			}
			var methods []method
			for name, w := range map[string]string{"empty": empty, "tree": ws} {
				methods = append(methods,
					timed("new-"+name, func() error {
						sb, err := runtime.New(runtime.DefaultPolicy(w))
						if err == nil {
							err = sb.Close()
						}
						return err
					}),
					settled(timed("cold-"+name, func() error { return sbs[w].Command(context.Background(), "/bin/true").Run() })),
					followedBy(timed("cli-"+name, func() error {
						return exec.Command(hutch, "run", "--workspace", w, "--", "/bin/true").Run()
					}), reapOrphans),
				)
			}
			asSubreaper(b)
			for _, m := range baselines() {
				if m.name == bwrap {
					methods = append(methods, m)
				}
			}
			ops := measure(b, b.N, methods...)
			for _, what := range []string{"new", "cold", "cli"} {
				tree, emptyOps := walls(ops[what+"-tree"]), walls(ops[what+"-empty"])
				b.ReportMetric(ms(p50(tree)), what+"-p50-ms")
				b.ReportMetric(float64(p50(tree))/float64(p50(emptyOps)), what+"-x_empty")
				if ops[bwrap] != nil {
					b.ReportMetric(float64(p50(tree))/float64(p50(walls(ops[bwrap]))), what+"-x_bwrap")
				}
			}
		})
	}
}

// monorepo makes, once, a tree of n files at ws: directories of 20 files
// (nested 3 deep under 100 packages), with a .env in one directory of
// every 500 and a repository (a .git directory) in one of every 2000.
func monorepo(ws string, n int) error {
	done := filepath.Join(ws, ".made")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	os.RemoveAll(ws)
	start := time.Now()
	for i, dirs := 0, 0; i < n; dirs++ {
		d := filepath.Join(ws, fmt.Sprintf("pkg%03d", dirs%100), fmt.Sprintf("mod%03d", dirs/100%100), fmt.Sprintf("d%05d", dirs))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for j := 0; j < 20 && i < n; j, i = j+1, i+1 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%02d.go", j)), []byte("package x\n"), 0o644); err != nil {
				return err
			}
		}
		if dirs%500 == 250 {
			os.WriteFile(filepath.Join(d, ".env"), []byte("TOKEN=x\n"), 0o644)
		}
		if dirs%2000 == 1000 {
			os.MkdirAll(filepath.Join(d, ".git", "hooks"), 0o755)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: made %d files at %s in %v\n", n, ws, time.Since(start).Round(time.Millisecond))
	return os.WriteFile(done, nil, 0o644)
}
