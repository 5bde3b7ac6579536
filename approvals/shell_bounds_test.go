package approvals

import (
	"strings"
	"testing"
)

// TestShellBounds: a line built to be costly to judge (substitutions
// nested thousands deep, a line past maxShellLine) is judged quickly as
// one no pattern can approve (before the bounds, one nested 10000 deep
// took minutes), and its Reason quotes no more than a bounded word.
func TestShellBounds(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("$(", 20000) + "x" + strings.Repeat(")", 20000),
		strings.Repeat("(", 20000) + "true" + strings.Repeat(")", 20000),
		"true; " + strings.Repeat("x", maxShellLine),
	} {
		sp := splitShell(src)
		if sp.opaque == "" || len(sp.opaque) > 300 {
			t.Errorf("%.20q... (%d bytes): opaque %q, want a short reason", src, len(src), sp.opaque)
		}
	}
}
