// Command plot turns `go test -bench` output of package bench into the
// results table and latency chart of bench/README.md:
//
//	go test -run '^$' -bench . -benchtime 200x ./bench/ | tee bench/results.txt
//	go run ./bench/plot -in bench/results.txt -readme bench/README.md -svg bench/latency.svg
//
// The tables (issues 15 and 16's targets with their figures, then every result)
// replace what stands between the README's results markers; the targets
// are printed too.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

const (
	beginMarker = "<!-- results:begin -->"
	endMarker   = "<!-- results:end -->"
)

// result is one benchmark line: its name and its custom metrics.
type result struct {
	name    string
	metrics map[string]float64
	order   []string
}

func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		res := result{name: strings.TrimPrefix(f[0], "Benchmark"), metrics: map[string]float64{}}
		if i := strings.LastIndexByte(res.name, '-'); i > 0 {
			if _, err := strconv.Atoi(res.name[i+1:]); err == nil {
				res.name = res.name[:i] // the GOMAXPROCS suffix
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			res.metrics[f[i+1]] = v
			res.order = append(res.order, f[i+1])
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// table lists every result: first its ratios to the baselines measured in
// the same rounds (x_*, and A-x_B: A's over B's), then its other figures.
func table(rs []result) string {
	var b strings.Builder
	b.WriteString("| benchmark | ratios (same rounds) | figures |\n|---|---|---|\n")
	for _, r := range rs {
		var ratios, figures []string
		for _, k := range r.order {
			v, unit := r.metrics[k], k
			if k == "ns/op" {
				v, unit = v/1e6, "ms/op"
			}
			f := fmt.Sprintf("%s %s", strconv.FormatFloat(v, 'g', 4, 64), unit)
			if strings.HasPrefix(k, "x_") || strings.Contains(k, "-x_") { // x_bare; report-x_off, bwrap-x_api
				ratios = append(ratios, f)
			} else {
				figures = append(figures, f)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.name, strings.Join(ratios, ", "), strings.Join(figures, ", "))
	}
	return b.String()
}

// A target is one of the issues' goals (15: spawning; 16 and 39: the
// file door; 19: the leak scanner; 21: the local API; 49: the costs a
// user feels, which set most bounds below): a result's metric against a
// bound.
type target struct {
	what, name, metric string
	bound              float64
	atLeast            bool // the metric must reach bound, not stay under it
}

var targets = []target{
	{"cold spawn p50 over bwrap's", "Spawn/hutch/default", "x_bwrap", 0.7, false},
	{"CPU per cold spawn over bwrap's", "Spawn/hutch/default", "x_bwrap_cpu", 0.6, false},
	{"CPU per cold spawn over bwrap's, the whole machine's busy time", "MachineCPU", "x_bwrap_cpu", 0.6, false},
	{"throughput at 8 callers over bwrap's", "Throughput/callers-8", "x_bwrap_rate", 1.6, true},
	{"prewarmed spawn p50 over bare's, commands back to back", "Spawn/hutch/prewarm", "x_bare", 1.5, false},
	{"prewarmed spawn p50 over bare's, the pool refilled between commands", "Spawn/hutch/prewarm-ready", "x_bare", 1.2, false},
	{"idle pooled init, MiB RSS", "PoolMemory", "MiB-rss/init", 1, false},
	{"whole CLI process p50 over bwrap's", "CLI", "x_bwrap", 1.5, false},
	{"cold spawn p50 with a 4 GiB heap over a small one's", "HostHeap/heap-4GiB", "x_small", 1.2, false},
	// The file door acts in a file server inside the sandbox (issue 39):
	// a small call costs a round trip to it, which must stay well under
	// a cold command's start.
	{"ReadFile of a small file over a cold command", "Files/read", "x_cold", 0.1, false},
	{"WriteFile of a small file over a cold command", "Files/write", "x_cold", 0.1, false},
	{"ReadFile of 1 MiB over os.ReadFile's", "Files/read-1MiB", "x_os", 3, false},
	// A workspace's size (issue 40): 300,000 files against an empty one.
	{"runtime.New in 300,000 files over an empty workspace", "WorkspaceSize/files-300000", "new-x_empty", 1.2, false},
	{"cold command in 300,000 files over an empty workspace", "WorkspaceSize/files-300000", "cold-x_empty", 1.2, false},
	{"whole hutch run in 300,000 files over an empty workspace", "WorkspaceSize/files-300000", "cli-x_empty", 1.2, false},
	{"leak scanner on build-log text, MB/s on one core", "Scanner/stream", "MB/s", 300, true},
	{"100 MB of output from gzip -dc, leaks reported, over off", "LeakOutput/gunzip", "report-x_off", 1.05, false},
	{"100 MB of output from cat, leaks reported, over off", "LeakOutput/cat", "report-x_off", 1.1, false},
	{"command through the API from Python, p50 over Python's own spawn of true", "APIExec/python", "x_bare", 2, false},
	// Issue 49: a command through the API from Python within 0.3x of
	// bwrap spawned from Python, that is bwrap at least 1/0.3 of it.
	{"bwrap spawned from Python, p50 over a command through the API", "APIExec/python", "bwrap-x_api", 1 / 0.3, true},
	{"command through the API from Node, p50 over Node's own spawn of true", "APIExec/node", "x_bare", 2, false},
	{"bwrap spawned from Node, p50 over a command through the API", "APIExec/node", "bwrap-x_api", 3, true},
}

// machineLine says how fast the machine was in this run: bare fork/exec
// of /bin/true (Spawn/bare's p50), measured in the same rounds as the
// spawns. Every ratio is against a baseline of the same rounds, but the
// baselines themselves move with the machine's day: this line tells a
// slow day's tables from a fast day's.
func machineLine(rs []result) string {
	for _, r := range rs {
		if v, ok := r.metrics["p50-ms"]; ok && r.name == "Spawn/bare" {
			return fmt.Sprintf("Machine: bare fork/exec of /bin/true, p50 %.3g ms in this run (Spawn/bare), bwrap %.3g ms (Spawn/bwrap).\n",
				v, bwrapP50(rs))
		}
	}
	return "Machine: bare fork/exec not measured in this run.\n"
}

func bwrapP50(rs []result) float64 {
	for _, r := range rs {
		if r.name == "Spawn/bwrap" {
			return r.metrics["p50-ms"]
		}
	}
	return 0
}

// targetTable gives each target its figure in rs and whether it is met.
func targetTable(rs []result) string {
	byName := map[string]result{}
	for _, r := range rs {
		byName[r.name] = r
	}
	var b strings.Builder
	b.WriteString("| target | bound | now | met |\n|---|---|---|---|\n")
	for _, t := range targets {
		bound, now, met := "<= ", "not measured", ""
		if t.atLeast {
			bound = ">= "
		}
		if v, ok := byName[t.name].metrics[t.metric]; ok {
			now = strconv.FormatFloat(v, 'g', 3, 64)
			met = "no"
			if (t.atLeast && v >= t.bound) || (!t.atLeast && v <= t.bound) {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s (%s %s) | %s%s | %s | %s |\n", t.what, t.name, t.metric, bound, strconv.FormatFloat(t.bound, 'g', 3, 64), now, met)
	}
	return b.String()
}

// chart draws, for each spawn (the Spawn rows, and the whole CLI process
// beside the bare and bwrap processes it is paired with), its p50 and its
// CPU per spawn side by side.
func chart(rs []result, path string) error {
	var names []string
	var wall, cpu plotter.Values
	for _, r := range rs {
		name, ok := strings.CutPrefix(r.name, "Spawn/")
		if r.name == "CLI" {
			name, ok = "hutch run (CLI)", true
		}
		if v, has := r.metrics["p50-ms"]; ok && has {
			names = append(names, name)
			wall = append(wall, v)
			cpu = append(cpu, r.metrics["cpu-ms"]) // 0 where not its own
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no Spawn p50-ms results to plot")
	}
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return wall[idx[a]] < wall[idx[b]] })
	sortedNames := make([]string, len(idx))
	sortedWall := make(plotter.Values, len(idx))
	sortedCPU := make(plotter.Values, len(idx))
	for i, j := range idx {
		sortedNames[i], sortedWall[i], sortedCPU[i] = names[j], wall[j], cpu[j]
	}
	p := plot.New()
	p.Title.Text = "Spawn of /bin/true: p50 latency and CPU per spawn (lower is better)"
	p.Y.Label.Text = "ms"
	width := vg.Points(14)
	for i, s := range []struct {
		label string
		vals  plotter.Values
		color color.Color
	}{
		{"p50 latency", sortedWall, color.RGBA{R: 60, G: 110, B: 180, A: 255}},
		{"CPU, all processes", sortedCPU, color.RGBA{R: 220, G: 130, B: 50, A: 255}},
	} {
		bars, err := plotter.NewBarChart(s.vals, width)
		if err != nil {
			return err
		}
		bars.Color = s.color
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(2*i-1) * width / 2
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	p.Legend.Top = true
	p.NominalX(sortedNames...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.9
	return p.Save(vg.Length(len(names))*vg.Inch*1.0+2*vg.Inch, 4*vg.Inch, path)
}

func main() {
	in := flag.String("in", "bench/results.txt", "go test -bench output")
	readme := flag.String("readme", "bench/README.md", "README whose results section is replaced")
	svg := flag.String("svg", "bench/latency.svg", "chart to write")
	flag.Parse()
	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	rs, err := parse(f)
	f.Close()
	if err != nil {
		log.Fatal(err)
	}
	if err := chart(rs, *svg); err != nil {
		log.Fatal(err)
	}
	doc, err := os.ReadFile(*readme)
	if err != nil {
		log.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		log.Fatalf("%s: no %s ... %s section", *readme, beginMarker, endMarker)
	}
	summary := machineLine(rs) + "\n" + targetTable(rs)
	fmt.Print(summary)
	s = s[:i+len(beginMarker)] + "\n" + summary + "\n" + machineLine(rs) + "\n" + table(rs) + s[j:]
	if err := os.WriteFile(*readme, []byte(s), 0o644); err != nil {
		log.Fatal(err)
	}
}
