//go:build linux

package doctor_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/hutchbox/hutch/doctor"
	"github.com/hutchbox/hutch/runtime"
)

// TestProbeAgreesWithCheck: the level doctor reports, and why it is not
// higher, are what runtime.Check decides here for a policy that accepts
// every level; its run at that level succeeded where Check found one.
func TestProbeAgreesWithCheck(t *testing.T) {
	r, err := doctor.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := runtime.DefaultPolicy(t.TempDir())
	p.MinLevel = runtime.LevelLandlock
	decided, err := runtime.Check(p)
	if err != nil {
		if r.Level != "" || r.Run == nil || r.Run.OK {
			t.Errorf("Check refused every level (%v), doctor reports %q and run %+v", err, r.Level, r.Run)
		}
		return
	}
	if r.Level != decided.Level() || !slices.Equal(r.LevelReasons, decided.LevelReasons()) {
		t.Errorf("doctor: level %s (%q), Check: %s (%q)", r.Level, r.LevelReasons, decided.Level(), decided.LevelReasons())
	}
	if r.Run == nil || !r.Run.OK {
		t.Errorf("doctor's run at %s: %+v", r.Level, r.Run)
	}
}

// ExampleProbe prints what this host lacks, and the fix for each.
func ExampleProbe() {
	r, err := doctor.Probe(context.Background())
	if err != nil {
		panic(err)
	}
	for _, rem := range r.Remedies {
		os.Stdout.WriteString(rem.Problem + ": " + rem.Fix + "\n")
	}
}
