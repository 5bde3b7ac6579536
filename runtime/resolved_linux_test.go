//go:build linux

package runtime_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// TestResolvedJSON: a Resolved survives its JSON form whole (policy,
// level, the trees Cmd.Dir is judged against); a form of another version,
// or with a field this build does not know, is refused, never read in
// part.
func TestResolvedJSON(t *testing.T) {
	ws := mkdirs(t, t.TempDir(), "sub", "extra")
	p := runtime.DefaultPolicy(ws)
	p.Writable, p.Deny, p.DenyNames = []string{"extra"}, []string{"sub/secret"}, []string{"*.key"}
	p.Network, p.AllowDomains = runtime.NetworkAllow, []string{"example.com"}
	p.Memory, p.Env = 256<<20, []string{"A=1"}
	r, err := runtime.Check(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back runtime.Resolved
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("reading %s: %v", b, err)
	}
	if !reflect.DeepEqual(back.Policy(), r.Policy()) || back.Level() != r.Level() {
		t.Errorf("round trip: %+v at %s, want %+v at %s", back.Policy(), back.Level(), r.Policy(), r.Level())
	}
	for _, dir := range []string{"", "sub", filepath.Join(ws, "extra"), "/etc"} {
		got, gotErr := back.WorkDir(dir)
		want, wantErr := r.WorkDir(dir)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("WorkDir(%q): %q, %v; before the round trip %q, %v", dir, got, gotErr, want, wantErr)
		}
	}

	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["format"] != float64(runtime.ResolvedFormat) {
		t.Errorf("format %v, want %d", doc["format"], runtime.ResolvedFormat)
	}
	for name, change := range map[string]func(map[string]any){
		"another format": func(d map[string]any) { d["format"] = runtime.ResolvedFormat + 1 },
		"no format":      func(d map[string]any) { delete(d, "format") },
		"unknown field":  func(d map[string]any) { d["grants_v2"] = true },
		"unknown policy field": func(d map[string]any) {
			d["policy"].(map[string]any)["mount_everything"] = true
		},
	} {
		var d map[string]any
		json.Unmarshal(b, &d)
		change(d)
		bad, _ := json.Marshal(d)
		var r runtime.Resolved
		if err := json.Unmarshal(bad, &r); err == nil {
			t.Errorf("%s: read, want refused", name)
		}
	}
}

// TestNewResolved: a decision carried through JSON makes its Sandbox; one
// taken at another level than the host offers now is refused with a
// *LevelError, nothing made.
func TestNewResolved(t *testing.T) {
	r, err := runtime.Check(runtime.DefaultPolicy(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var back runtime.Resolved
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	sb, err := runtime.NewResolved(&back)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()

	other := runtime.LevelLandlock
	if r.Level() == other {
		other = runtime.LevelNamespaces
	}
	moved := strings.Replace(string(b), `"level":"`+string(r.Level())+`"`, `"level":"`+string(other)+`"`, 1)
	if err := json.Unmarshal([]byte(moved), &back); err != nil {
		t.Fatal(err)
	}
	var le *runtime.LevelError
	noSpawn(t, func() {
		sb, err = runtime.NewResolved(&back)
	})
	if !errors.As(err, &le) || le.Need != other || le.Have != r.Level() || sb != nil {
		t.Errorf("NewResolved of a decision at %s on a host giving %s: %v, want a LevelError", other, r.Level(), err)
	}
}
