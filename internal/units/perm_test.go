package units_test

import (
	"io/fs"
	"testing"

	"github.com/hutchbox/hutch/internal/units"
)

// TestParsePerm: octal digits alone, at most 0777.
func TestParsePerm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fs.FileMode
		ok   bool
	}{
		{"644", 0o644, true}, {"0600", 0o600, true}, {"777", 0o777, true},
		{"1777", 0, false}, {"644x", 0, false}, {"9", 0, false}, {"", 0, false}, {"-1", 0, false},
	} {
		m, err := units.ParsePerm(tc.in)
		if (err == nil) != tc.ok || m != tc.want {
			t.Errorf("ParsePerm(%q) = %v, %v", tc.in, m, err)
		}
	}
}
