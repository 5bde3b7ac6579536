package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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

// TestFileContentJSON: a read has one JSON shape in every door: text as
// "content", anything else as "content_base64", with "length"; and it
// reads back into the same FileContent.
func TestFileContentJSON(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    FileContent
		want string // a field the JSON must hold
		not  string // and one it must not
	}{
		{"text", FileContent{Kind: ContentText, Data: []byte("héllo\n")}, `"content":"héllo\n"`, `"content_base64"`},
		{"empty text", FileContent{Kind: ContentText, Data: []byte{}}, `"content":""`, `"content_base64"`},
		{"binary", FileContent{Kind: ContentBinary, Data: []byte{0xff, 0}}, `"content_base64":"/wA="`, `"content":`},
		{"text kind, not UTF-8", FileContent{Kind: ContentText, Data: []byte{0xff}}, `"content_base64":"/w=="`, `"content":`},
		{"empty binary", FileContent{Kind: ContentBinary}, `"content_base64":""`, `"content":`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if !strings.Contains(s, tt.want) || strings.Contains(s, tt.not) || strings.Contains(s, `"data"`) ||
				!strings.Contains(s, fmt.Sprintf(`"length":%d`, len(tt.c.Data))) {
				t.Errorf("%s", b)
			}
			var back FileContent
			if err := json.Unmarshal(b, &back); err != nil || !bytes.Equal(back.Data, tt.c.Data) || back.Kind != tt.c.Kind {
				t.Errorf("read back %+v, %v", back, err)
			}
		})
	}
}
