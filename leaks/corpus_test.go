package leaks

import (
	"fmt"
	"os"
	"testing"
)

// TestCorpusFalsePositives scans real, secret-free text of this machine
// (HUTCH_LEAKS_CORPUS_MB megabytes of Go sources, documentation and
// manual pages) and reports every finding: each is a false positive. A
// measurement, run when asked for: another machine's text is another
// corpus.
func TestCorpusFalsePositives(t *testing.T) {
	v := os.Getenv("HUTCH_LEAKS_CORPUS_MB")
	if v == "" {
		t.Skip("HUTCH_LEAKS_CORPUS_MB=64 measures the false positives on this machine's text")
	}
	var mb int
	if _, err := fmt.Sscan(v, &mb); err != nil {
		t.Fatal(err)
	}
	text := buildLog(t, mb<<20)
	fs := New(nil).Scan(text)
	for _, f := range fs {
		end := min(len(text), int(f.Offset)+f.Length)
		t.Logf("false positive %+v: %.80q", f, text[f.Offset:end])
	}
	t.Logf("%d bytes of text, %d findings", len(text), len(fs))
	if len(fs) > 0 {
		t.Errorf("%d false positives", len(fs))
	}
}
