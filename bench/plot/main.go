// Command plot turns `go test -bench` output of package bench into the
// results table and latency chart of bench/README.md:
//
//	go test -run '^$' -bench . -benchtime 200x ./bench/ | tee bench/results.txt
//	go run ./bench/plot -in bench/results.txt -readme bench/README.md -svg bench/latency.svg
//
// The table replaces what stands between the README's results markers.
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

func table(rs []result) string {
	var b strings.Builder
	b.WriteString("| benchmark | metrics |\n|---|---|\n")
	for _, r := range rs {
		var ms []string
		for _, k := range r.order {
			v, unit := r.metrics[k], k
			if k == "ns/op" {
				v, unit = v/1e6, "ms/op"
			}
			ms = append(ms, fmt.Sprintf("%s %s", strconv.FormatFloat(v, 'g', 4, 64), unit))
		}
		fmt.Fprintf(&b, "| %s | %s |\n", r.name, strings.Join(ms, ", "))
	}
	return b.String()
}

func chart(rs []result, path string) error {
	var names []string
	var vals plotter.Values
	for _, r := range rs {
		if v, ok := r.metrics["p50-ms"]; ok && strings.HasPrefix(r.name, "Spawn/") {
			names = append(names, strings.TrimPrefix(r.name, "Spawn/"))
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return fmt.Errorf("no Spawn p50-ms results to plot")
	}
	idx := make([]int, len(vals))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	sortedNames := make([]string, len(idx))
	sortedVals := make(plotter.Values, len(idx))
	for i, j := range idx {
		sortedNames[i], sortedVals[i] = names[j], vals[j]
	}
	p := plot.New()
	p.Title.Text = "Spawn latency of /bin/true, p50 (lower is better)"
	p.Y.Label.Text = "ms"
	bars, err := plotter.NewBarChart(sortedVals, vg.Points(28))
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{R: 60, G: 110, B: 180, A: 255}
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalX(sortedNames...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.9
	return p.Save(vg.Length(len(vals))*vg.Inch*1.0+2*vg.Inch, 4*vg.Inch, path)
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
	s = s[:i+len(beginMarker)] + "\n" + table(rs) + s[j:]
	if err := os.WriteFile(*readme, []byte(s), 0o644); err != nil {
		log.Fatal(err)
	}
}
