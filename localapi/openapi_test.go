package localapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/netns"
	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// The OpenAPI description (openapi.json) is held to the handler: the
// same routes and methods, and for every schema the fields the Go type
// it describes writes in JSON (all of them, as a value with every field
// set writes them), the ones it always writes (required, as the zero
// value writes them) and their JSON types; every error code and event
// type the handler's source writes is in the schema's enum, and no other.
// A route, field, code or event added without the schema fails here.

type openAPIDoc struct {
	Paths      map[string]map[string]openAPIOp `json:"paths"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

type openAPIOp struct {
	RequestBody *struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

type schema struct {
	Ref                  string             `json:"$ref"`
	AllOf                []*schema          `json:"allOf"`
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Enum                 []string           `json:"enum"`
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return &doc
}

// resolve follows $ref and a one-element allOf (a reference with a
// description of its own) to the schema they name.
func (d *openAPIDoc) resolve(t *testing.T, s *schema) (*schema, string) {
	t.Helper()
	for {
		switch {
		case s.Ref != "":
			name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
			next, ok := d.Components.Schemas[name]
			if !ok {
				t.Fatalf("$ref %s names no schema", s.Ref)
			}
			if next.Ref == "" && len(next.AllOf) == 0 {
				return next, name
			}
			s = next
		case len(s.AllOf) == 1:
			s = s.AllOf[0]
		default:
			return s, ""
		}
	}
}

// TestOpenAPIRoutes: the description has exactly the routes, with their
// methods, of a Handler that serves every route (durable processes,
// reload, policy and approvals on), and each names its request and
// answer schema.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	h := NewHandler(nil, Options{Processes: nopProcesses{}, Reload: func() error { return nil }, Policy: func() runtime.Policy { return runtime.Policy{} }, Approvals: &approvals.Engine{}})
	want := map[string]string{}
	for path, rt := range h.routes {
		want[path] = strings.ToLower(rt.method)
	}
	got := map[string]string{}
	for path, ops := range doc.Paths {
		if len(ops) != 1 {
			t.Errorf("openapi.json %s: %d methods; the handler serves one per route", path, len(ops))
		}
		for method, op := range ops {
			got[path] = method
			if method == "post" && (op.RequestBody == nil || op.RequestBody.Content["application/json"].Schema == nil) {
				t.Errorf("openapi.json POST %s: no application/json request schema", path)
			}
			ok := op.Responses["200"]
			if len(ok.Content) != 1 {
				t.Errorf("openapi.json %s: the 200 answer has %d content types, want 1", path, len(ok.Content))
			}
			if op.Responses["default"].Content["application/json"].Schema == nil {
				t.Errorf("openapi.json %s: no default (error) answer", path)
			}
		}
	}
	for path, method := range want {
		if got[path] != method {
			t.Errorf("the handler serves %s %s; openapi.json has %q", strings.ToUpper(method), path, got[path])
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("openapi.json describes %s, which the handler does not serve", path)
		}
	}
}

// schemaTypes are the Go values each schema of the description
// describes; fill sets every field of each. A schema with several
// samples has alternatives (content or content_base64).
func schemaTypes() map[string][]any {
	text := runtime.FileContent{Kind: runtime.ContentText, Data: []byte("text")}
	binary := runtime.FileContent{Kind: runtime.ContentBinary, Data: []byte{0xff}}
	empty := ""
	logText := LogsResponse{Content: &empty}
	logBinary := LogsResponse{ContentBase64: []byte{0xff}}
	return map[string][]any{
		"AppIsolation":        {runtime.AppIsolation{}},
		"ApprovalRule":        {approvals.RuleRow{}},
		"Backoff":             {processes.Backoff{}},
		"Bind":                {runtime.Bind{}},
		"DecideRequest":       {DecideRequest{}},
		"EmptyRequest":        {struct{}{}},
		"Error":               {Error{}},
		"ErrorResponse":       {ErrorResponse{}},
		"Event":               {Event{}},
		"ExecRequest":         {ExecRequest{}},
		"ExplainRequest":      {ExplainRequest{}},
		"Denial":              {runtime.Denial{}},
		"Explanation":         {runtime.Explanation{}},
		"FileContent":         {text, binary},
		"FileInfo":            {runtime.FileInfo{}},
		"Grant":               {runtime.Grant{}},
		"HealthResponse":      {HealthResponse{}},
		"Identity":            {processes.Identity{}},
		"Leak":                {runtime.Leak{}},
		"LinuxSeccomp":        {specs.LinuxSeccomp{}},
		"LinuxSeccompArg":     {specs.LinuxSeccompArg{}},
		"LinuxSyscall":        {specs.LinuxSyscall{}},
		"ListResponse":        {ListResponse{}},
		"LogsResponse":        {logText, logBinary},
		"NetworkEvent":        {netns.Event{}},
		"IngressEvent":        {netns.IngressEvent{}},
		"Publish":             {runtime.Publish{}},
		"Reach":               {runtime.Reach{}},
		"PathRequest":         {PathRequest{}},
		"Phase":               {nsinit.Phase{}},
		"Policy":              {runtime.Policy{}},
		"PolicyResponse":      {PolicyResponse{}},
		"Process":             {processes.Process{}},
		"ProcessLogsRequest":  {ProcessLogsRequest{}},
		"ProcessRequest":      {ProcessRequest{}},
		"ProcessStartRequest": {ProcessStartRequest{}},
		"ProcessesResponse":   {ProcessesResponse{}},
		"ReadRequest":         {ReadRequest{}},
		"ReloadResponse":      {ReloadResponse{}},
		"Remedy":              {runtime.Remedy{}},
		"RemoveResponse":      {RemoveResponse{}},
		"RepositoryChange":    {runtime.RepositoryChange{}},
		"Result":              {runtime.Result{}},
		"RulesResponse":       {RulesResponse{}},
		"Run":                 {processes.Run{}},
		"Skipped":             {nsinit.Skipped{}},
		"Usage":               {cgroups.Usage{}},
		"Verdict":             {approvals.Verdict{}},
		"VersionResponse":     {VersionResponse{}},
		"WriteRequest":        {WriteRequest{}},
	}
}

// TestOpenAPISchemas: every schema describes its Go type's JSON field by
// field, and every schema is checked (none is described without a type).
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	types := schemaTypes()
	for name := range doc.Components.Schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("openapi.json schema %s: no Go type checks it (add it to schemaTypes)", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(types)) {
		t.Run(name, func(t *testing.T) {
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Fatalf("openapi.json has no schema %s", name)
			}
			if s.Type != "object" || string(s.AdditionalProperties) != "false" {
				t.Errorf("%s: type %q, additionalProperties %s; want a closed object", name, s.Type, s.AdditionalProperties)
			}
			samples := types[name]
			// Required: what every sample writes as given (the zero
			// value, or the least of each alternative).
			always := jsonObject(t, samples[0])
			for _, v := range samples[1:] {
				written := jsonObject(t, v)
				maps.DeleteFunc(always, func(k string, _ any) bool { _, ok := written[k]; return !ok })
			}
			if got, want := slices.Sorted(slices.Values(s.Required)), slices.Sorted(maps.Keys(always)); !slices.Equal(got, want) {
				t.Errorf("%s: required %v; the Go type always writes %v", name, got, want)
			}
			// Properties: what the values with every field set write.
			written := map[string]any{}
			for _, v := range samples {
				maps.Copy(written, jsonObject(t, fill(v)))
			}
			for key, val := range written {
				p, ok := s.Properties[key]
				if !ok {
					t.Errorf("%s: the handler writes %q (%v), which the schema does not describe", name, key, val)
					continue
				}
				checkType(t, doc, name+"."+key, p, val)
			}
			for key := range s.Properties {
				if _, ok := written[key]; !ok {
					t.Errorf("%s: the schema describes %q, which the Go type never writes", name, key)
				}
			}
		})
	}
}

// checkType compares a written value's JSON type with the schema's,
// into arrays and maps (a referenced schema is checked on its own).
func checkType(t *testing.T, doc *openAPIDoc, where string, s *schema, val any) {
	t.Helper()
	s, _ = doc.resolve(t, s)
	var got string
	switch v := val.(type) {
	case string:
		got = "string"
	case bool:
		got = "boolean"
	case float64:
		got = "number"
		if v == float64(int64(v)) {
			got = "integer"
		}
	case []any:
		got = "array"
		if s.Items != nil {
			for _, e := range v {
				checkType(t, doc, where+"[]", s.Items, e)
			}
		}
	case map[string]any:
		got = "object"
	case nil:
		got = "null"
	}
	switch {
	case s.Type == "" && len(s.Properties) == 0:
		// Any value.
	case s.Type == got, s.Type == "number" && got == "integer":
	default:
		t.Errorf("%s: written as %s (%v), described as %q", where, got, val, s.Type)
	}
}

func jsonObject(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%T in JSON is not an object: %s", v, b)
	}
	return m
}

// fill returns v with every field set (strings "x", numbers 1, one
// element in each slice and map), keeping what v set already.
func fill(v any) any {
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	fillValue(p.Elem(), 0)
	return p.Elem().Interface()
}

var timeType = reflect.TypeOf(time.Time{})

func fillValue(v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	if v.Type() == timeType {
		if v.Interface().(time.Time).IsZero() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.Len() == 0 {
			v.SetString("x")
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			v.SetInt(1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 {
			v.SetUint(1)
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 {
			v.SetFloat(1.5)
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillValue(v.Elem(), depth+1)
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fillValue(v.Index(0), depth+1)
		}
	case reflect.Map:
		if v.Len() == 0 {
			m := reflect.MakeMap(v.Type())
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillValue(k, depth+1)
			fillValue(e, depth+1)
			m.SetMapIndex(k, e)
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fillValue(v.Field(i), depth+1)
		}
	}
}

// TestOpenAPIEnums: the error codes and event types the handler's source
// writes are exactly the schema's enums.
func TestOpenAPIEnums(t *testing.T) {
	doc := loadOpenAPI(t)
	codes, events := sourceLiterals(t)
	for _, tc := range []struct {
		schema, field string
		written       []string
	}{
		{"Error", "code", codes},
		{"Event", "type", events},
	} {
		enum := slices.Sorted(slices.Values(doc.Components.Schemas[tc.schema].Properties[tc.field].Enum))
		if !slices.Equal(enum, tc.written) {
			t.Errorf("openapi.json %s.%s enum %v; the handler writes %v", tc.schema, tc.field, enum, tc.written)
		}
	}
}

// sourceLiterals reads this package's source for the string literals
// given as an Error's Code and as an Event's Type or a chunker's name.
func sourceLiterals(t *testing.T) (codes, events []string) {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	seen := map[string]map[string]bool{"codes": {}, "events": {}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			typ, _ := cl.Type.(*ast.Ident)
			if typ == nil {
				return true
			}
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				lit, _ := kv.Value.(*ast.BasicLit)
				if key == nil || lit == nil || lit.Kind != token.STRING {
					continue
				}
				s, _ := strconv.Unquote(lit.Value)
				switch {
				case typ.Name == "Error" && key.Name == "Code":
					seen["codes"][s] = true
				case typ.Name == "Event" && key.Name == "Type", typ.Name == "chunker" && key.Name == "name":
					seen["events"][s] = true
				}
			}
			return true
		})
	}
	return slices.Sorted(maps.Keys(seen["codes"])), slices.Sorted(maps.Keys(seen["events"]))
}

// nopProcesses is a Processes that is never called: it turns the
// durable-process routes on.
type nopProcesses struct{ Processes }

// TestOpenAPIClients: each client in clients/ calls every route the
// description has, and sends every field of every request, by its wire
// name (a client written before a route or a field was added would
// otherwise never call or send it). Each client's exceptions say why.
func TestOpenAPIClients(t *testing.T) {
	doc := loadOpenAPI(t)
	clients := []struct {
		name   string
		files  []string
		except map[string]string
	}{
		{"typescript", []string{"typescript/src/client.ts"}, nil},
		{"python", []string{"python/hutch_client/__init__.py", "python/hutch_client/aio.py"}, nil},
		{"rust", []string{"rust/src/lib.rs"}, map[string]string{
			"ExecRequest.stdin": "it always streams stdin (Hutch-Stdin: stream), never as the JSON field",
		}},
	}
	for _, c := range clients {
		var src strings.Builder
		for _, f := range c.files {
			b, err := os.ReadFile(filepath.Join("..", "clients", f))
			if err != nil {
				t.Fatalf("client %s: %v", c.name, err)
			}
			src.Write(b)
		}
		for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
			if !strings.HasSuffix(name, "Request") {
				continue
			}
			for field := range doc.Components.Schemas[name].Properties {
				if _, ok := c.except[name+"."+field]; ok {
					continue
				}
				if !strings.Contains(src.String(), `"`+field+`"`) && !strings.Contains(src.String(), `'`+field+`'`) {
					t.Errorf("the %s client never names %s's field %q", c.name, name, field)
				}
			}
		}
		for _, path := range slices.Sorted(maps.Keys(doc.Paths)) {
			if !strings.Contains(src.String(), `"`+path+`"`) {
				t.Errorf("the %s client never calls %s", c.name, path)
			}
		}
	}
}
