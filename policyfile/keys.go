package policyfile

import (
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyLines maps each key of a TOML document, as a dotted path of its
// tables and its own name (sandbox.writable, profiles.ci, sandbox.apps.dir),
// to the line it is on, and each key with a value to the value as written:
// what errors found after decoding point at and quote.
func keyLines(data []byte) (map[string]int, map[string]string, error) {
	lines, values := map[string]int{}, map[string]string{}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyPath(nil, e.Key())
			record(&p, lines, table, e.Key())
		case unstable.KeyValue:
			recordValue(&p, lines, values, table, e)
		}
	}
	return lines, values, p.Error()
}

// recordValue records a key = value and, for an inline table, its keys.
func recordValue(p *unstable.Parser, lines map[string]int, values map[string]string, table []string, kv *unstable.Node) {
	path := keyPath(table, kv.Key())
	record(p, lines, path, kv.Key())
	v := kv.Value()
	if v == nil {
		return
	}
	if v.Raw.Length > 0 {
		values[strings.Join(path, ".")] = string(p.Raw(v.Raw))
	}
	if v.Kind == unstable.InlineTable {
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				recordValue(p, lines, values, path, c)
			}
		}
	}
}

func keyPath(prefix []string, key unstable.Iterator) []string {
	path := append([]string(nil), prefix...)
	for key.Next() {
		path = append(path, string(key.Node().Data))
	}
	return path
}

// record notes the line of the key's first part, and of every table on
// the way (a dotted key opens them), unless an earlier line has them.
func record(p *unstable.Parser, lines map[string]int, path []string, key unstable.Iterator) {
	line := 0
	if key.Next() && key.Node().Raw.Length > 0 {
		line = p.Shape(key.Node().Raw).Start.Line
	}
	for i := range path {
		k := strings.Join(path[:i+1], ".")
		if _, ok := lines[k]; !ok || i == len(path)-1 {
			lines[k] = line
		}
	}
}
