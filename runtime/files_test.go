package runtime

import (
	"io/fs"
	"testing"
)

// TestFileContentText: text only for text content of whole UTF-8
// characters; bytes otherwise.
func TestFileContentText(t *testing.T) {
	for _, tc := range []struct {
		c    FileContent
		text string
		ok   bool
	}{
		{FileContent{Kind: ContentText, Data: []byte("héllo")}, "héllo", true},
		{FileContent{Kind: ContentText, Data: []byte{'a', 0xc3}}, "", false},
		{FileContent{Kind: ContentBinary, Data: []byte("abc")}, "", false},
	} {
		if s, ok := tc.c.Text(); s != tc.text || ok != tc.ok {
			t.Errorf("Text() of %q (%s) = %q, %v", tc.c.Data, tc.c.Kind, s, ok)
		}
	}
}

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
		m, err := ParsePerm(tc.in)
		if (err == nil) != tc.ok || m != tc.want {
			t.Errorf("ParsePerm(%q) = %v, %v", tc.in, m, err)
		}
	}
}
