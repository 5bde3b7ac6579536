package localapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTail: a log's tail is its last bytes, less the rest of a character
// the cut fell inside, so that text stays text.
func TestTail(t *testing.T) {
	for _, tt := range []struct {
		name, log string
		n         int64
		want      string
		truncated bool
	}{
		{"all of it", "abc", 10, "abc", false},
		{"exactly", "abc", 3, "abc", false},
		{"ascii cut", "abcdef", 2, "ef", true},
		{"cut inside é", "xé!", 2, "!", true},
		{"cut inside a 4-byte character", "x😀y", 4, "y", true},
		{"cut before a character", "xé", 2, "é", true},
		{"long, cut inside", strings.Repeat("日本", 40000), 100001, strings.Repeat("日本", 40000)[240000-100001+2:], true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated, err := tail(strings.NewReader(tt.log), tt.n)
			if err != nil || string(got) != tt.want || truncated != tt.truncated || !utf8.Valid(got) {
				t.Errorf("tail(%d) = %q (truncated %v, %v), want %q (%v)", tt.n, got, truncated, err, tt.want, tt.truncated)
			}
		})
	}
}
