package runtime

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// TestFileModeJSON: the file doors give a file's mode as POSIX's st_mode
// (what Python's stat.S_ISDIR and Node's fs.constants read) and its type
// as a word, and read back what they wrote.
func TestFileModeJSON(t *testing.T) {
	for _, tc := range []struct {
		mode  fs.FileMode
		posix uint32
		typ   string
	}{
		{0o644, 0o100644, "file"},
		{fs.ModeDir | 0o755, 0o040755, "dir"},
		{fs.ModeDir | fs.ModeSticky | 0o777, 0o041777, "dir"},
		{fs.ModeSymlink | 0o777, 0o120777, "symlink"},
		{fs.ModeSetuid | fs.ModeSetgid | 0o755, 0o106755, "file"},
		{fs.ModeNamedPipe | 0o600, 0o010600, "fifo"},
		{fs.ModeSocket | 0o755, 0o140755, "socket"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, 0o020666, "char_device"},
		{fs.ModeDevice | 0o660, 0o060660, "block_device"},
	} {
		t.Run(tc.typ+"/"+tc.mode.String(), func(t *testing.T) {
			if got := posixMode(tc.mode); got != tc.posix {
				t.Errorf("posixMode(%v) = %#o, want %#o", tc.mode, got, tc.posix)
			}
			if got := fileType(tc.mode); got != tc.typ {
				t.Errorf("fileType(%v) = %q, want %q", tc.mode, got, tc.typ)
			}
			b, err := json.Marshal(FileInfo{Path: "/w/x", Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]any
			json.Unmarshal(b, &fields)
			if fields["mode"] != float64(tc.posix) || fields["type"] != tc.typ {
				t.Errorf("JSON %s: want mode %d, type %q", b, tc.posix, tc.typ)
			}
			var back FileInfo
			if err := json.Unmarshal(b, &back); err != nil || back.Mode != tc.mode {
				t.Errorf("read back from %s: %v, %v; want %v", b, back.Mode, err, tc.mode)
			}
			// A read's answer carries the same two fields.
			b, err = json.Marshal(FileContent{FileInfo: FileInfo{Mode: tc.mode}, Kind: ContentText, Data: []byte("hi")})
			if err != nil {
				t.Fatal(err)
			}
			var c FileContent
			if err := json.Unmarshal(b, &c); err != nil || c.Mode != tc.mode || string(c.Data) != "hi" {
				t.Errorf("FileContent %s read back as %v %q (%v)", b, c.Mode, c.Data, err)
			}
			if !strings.Contains(string(b), `"type":"`+tc.typ+`"`) {
				t.Errorf("FileContent %s: no type %q", b, tc.typ)
			}
		})
	}
}
