package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
	"unicode/utf8"
)

// The file door: a Sandbox's ReadFile, WriteFile, ReadDir, Stat and
// OpenForSend act on the host's files exactly as a command of the same
// Sandbox started at that moment could. On Linux the paths are opened by
// a file server inside the sandbox: an init built from the same plan as
// a command's (the same mounts, deny names and repositories as of now,
// the same credentials without capabilities, Landlock and seccomp) that
// opens, makes and lists what it is asked and hands the opened files to
// the host. The kernel resolves and judges every path in the sandbox's
// view; the host only reads and writes the files it was handed, never a
// path of its own.

// ErrDenied is matched (errors.Is) by a file operation the sandbox's
// policy does not allow: a masked path (the deny-list, deny names), or a
// write outside the writable trees. It wraps fs.ErrPermission.
var ErrDenied = fmt.Errorf("denied by the sandbox's policy: %w", fs.ErrPermission)

// ErrPrivate is matched by a file operation on a path in a filesystem of
// the sandbox's own (its /tmp, /dev, /proc): each command gets its own,
// which exists only while the command runs, so there is nothing there on
// the host to read or write. (A hidden directory, such as /run, is
// ErrDenied: the view shows it empty.)
var ErrPrivate = errors.New("in a filesystem private to each command (its /tmp, /dev or /proc), not on the host")

// DefaultReadLimit is how much ReadFile returns when ReadOptions.Limit is 0.
const DefaultReadLimit = 1 << 20

// DefaultSendLimit is the largest file OpenForSend lets leave the machine
// when its caller gives no limit: 25 MiB.
const DefaultSendLimit = 25 << 20

// FileInfo describes a file the file door reached.
type FileInfo struct {
	// Path is the file's path as a command of the Sandbox names it, every
	// symlink resolved.
	Path string `json:"path"`
	// HomePath is Path as ~/... when it lies in the sandbox's HOME
	// (Policy.Home), as agents show it; empty otherwise.
	HomePath string `json:"home_path,omitempty"`
	// HostPath is the same file's path on the host.
	HostPath string `json:"host_path"`
	Size     int64  `json:"size"`
	// Mode is the file's type and permissions. In JSON it is "mode", the
	// POSIX st_mode (type bits, set-id and sticky bits, permissions: a
	// directory 0o40755 is 16877, so Python's stat.S_ISDIR holds), and
	// "type", the type as a word (see fileType).
	Mode    fs.FileMode `json:"-"`
	ModTime time.Time   `json:"mod_time"`
	// Writable says a command may write it (WriteFile may).
	Writable bool `json:"writable"`
	// In a ReadDir listing: Denied, the entry is masked (a command sees
	// an empty file or directory there, and ReadFile refuses it); Private,
	// a command sees a filesystem of its own there (/tmp, /dev, /proc),
	// not this host entry.
	Denied  bool `json:"denied,omitempty"`
	Private bool `json:"private,omitempty"`
}

// ReadMode says how ReadFile presents a file.
type ReadMode string

const (
	// ReadAuto detects the content: an image (PNG, JPEG, GIF, WebP) is
	// returned whole as ContentImage, text as ContentText, anything else as
	// ContentBinary.
	ReadAuto ReadMode = ""
	// ReadText returns the window as text, trimmed to whole UTF-8
	// characters, whatever the content.
	ReadText ReadMode = "text"
	// ReadBinary returns the window's bytes as they are.
	ReadBinary ReadMode = "binary"
)

// ContentKind is what ReadFile found.
type ContentKind string

// The kinds ReadFile tells apart.
const (
	ContentText   ContentKind = "text"
	ContentBinary ContentKind = "binary"
	ContentImage  ContentKind = "image"
)

// ReadOptions are ReadFile's.
type ReadOptions struct {
	// Offset is the first byte to return; Limit the most bytes to return
	// (0: DefaultReadLimit). An image is returned whole, up to Limit.
	Offset, Limit int64
	Mode          ReadMode
	// NoFollow refuses a path whose last component is a symlink, as some
	// agents' file tools do; its target is never read.
	NoFollow bool
}

// FileContent is what ReadFile returns.
type FileContent struct {
	FileInfo
	Kind ContentKind `json:"kind"`
	// Data is the bytes read; for text, whole UTF-8 characters, starting
	// at Offset (which may lie past ReadOptions.Offset, by at most 3 bytes,
	// when that fell inside a character). In JSON it is "content" (text)
	// or "content_base64", with its "length" (see MarshalJSON).
	Data   []byte `json:"-"`
	Offset int64  `json:"offset"`
	// EOF says Data reaches the end of the file.
	EOF bool `json:"eof"`
	// MIME, Width and Height describe an image.
	MIME   string `json:"mime,omitempty"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	// Leaks are the secrets found in Data (Policy.Leaks), never the
	// secrets themselves; under LeaksRedact they are replaced in Data.
	Leaks []Leak `json:"leaks,omitempty"`
}

// fileType names a file's type as the file doors' JSON gives it ("type").
func fileType(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "file"
	case fs.ModeDir:
		return "dir"
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeNamedPipe:
		return "fifo"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeDevice | fs.ModeCharDevice:
		return "char_device"
	case fs.ModeDevice:
		return "block_device"
	}
	return "other"
}

// posixMode is m as a POSIX st_mode: its S_IFMT type bits, S_ISUID,
// S_ISGID, S_ISVTX and permission bits.
func posixMode(m fs.FileMode) uint32 {
	out := uint32(m.Perm())
	for _, b := range posixBits {
		if m&b.mode != 0 {
			out |= b.posix
		}
	}
	switch m.Type() {
	case 0:
		out |= 0o100000
	case fs.ModeDir:
		out |= 0o040000
	case fs.ModeSymlink:
		out |= 0o120000
	case fs.ModeNamedPipe:
		out |= 0o010000
	case fs.ModeSocket:
		out |= 0o140000
	case fs.ModeDevice | fs.ModeCharDevice:
		out |= 0o020000
	case fs.ModeDevice:
		out |= 0o060000
	}
	return out
}

// fileModeOf is posixMode's inverse.
func fileModeOf(posix uint32) fs.FileMode {
	m := fs.FileMode(posix & 0o777)
	for _, b := range posixBits {
		if posix&b.posix != 0 {
			m |= b.mode
		}
	}
	switch posix & 0o170000 {
	case 0o040000:
		m |= fs.ModeDir
	case 0o120000:
		m |= fs.ModeSymlink
	case 0o010000:
		m |= fs.ModeNamedPipe
	case 0o140000:
		m |= fs.ModeSocket
	case 0o020000:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		m |= fs.ModeDevice
	case 0o100000:
	default:
		m |= fs.ModeIrregular
	}
	return m
}

var posixBits = [...]struct {
	mode  fs.FileMode
	posix uint32
}{{fs.ModeSetuid, 0o4000}, {fs.ModeSetgid, 0o2000}, {fs.ModeSticky, 0o1000}}

// fileInfoJSON is FileInfo in JSON, with its mode in POSIX terms.
type fileInfoJSON struct {
	fileInfoFields
	Type string `json:"type"`
	Mode uint32 `json:"mode"`
}

// fileInfoFields has FileInfo's fields and none of its methods.
type fileInfoFields FileInfo

// MarshalJSON writes Mode as "mode", a POSIX st_mode, and "type".
func (fi FileInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(fi.toJSON())
}

func (fi FileInfo) toJSON() fileInfoJSON {
	return fileInfoJSON{fileInfoFields: fileInfoFields(fi), Type: fileType(fi.Mode), Mode: posixMode(fi.Mode)}
}

// UnmarshalJSON reads what MarshalJSON writes.
func (fi *FileInfo) UnmarshalJSON(b []byte) error {
	var in fileInfoJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*fi = FileInfo(in.fileInfoFields)
	fi.Mode = fileModeOf(in.Mode)
	return nil
}

// fileContentJSON is FileContent in JSON: the one shape of a read in
// every door (hutch read, the local API's files/read): the file's info
// as FileInfo writes it, then the window.
type fileContentJSON struct {
	fileInfoJSON
	Kind          ContentKind `json:"kind"`
	Offset        int64       `json:"offset"`
	EOF           bool        `json:"eof"`
	MIME          string      `json:"mime,omitempty"`
	Width         int         `json:"width,omitempty"`
	Height        int         `json:"height,omitempty"`
	Leaks         []Leak      `json:"leaks,omitempty"`
	Content       *string     `json:"content,omitempty"`
	ContentBase64 *[]byte     `json:"content_base64,omitempty"`
	Length        int         `json:"length"`
}

// MarshalJSON writes Data as "content" when it is text (Text), else as
// "content_base64", and its "length" in bytes.
func (c FileContent) MarshalJSON() ([]byte, error) {
	out := fileContentJSON{fileInfoJSON: c.FileInfo.toJSON(), Kind: c.Kind, Offset: c.Offset, EOF: c.EOF,
		MIME: c.MIME, Width: c.Width, Height: c.Height, Leaks: c.Leaks, Length: len(c.Data)}
	if s, ok := c.Text(); ok {
		out.Content = &s
	} else {
		data := c.Data
		if data == nil {
			data = []byte{}
		}
		out.ContentBase64 = &data
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *FileContent) UnmarshalJSON(b []byte) error {
	var in fileContentJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*c = FileContent{FileInfo: FileInfo(in.fileInfoFields), Kind: in.Kind, Offset: in.Offset, EOF: in.EOF,
		MIME: in.MIME, Width: in.Width, Height: in.Height, Leaks: in.Leaks}
	c.Mode = fileModeOf(in.Mode)
	switch {
	case in.Content != nil:
		c.Data = []byte(*in.Content)
	case in.ContentBase64 != nil:
		c.Data = *in.ContentBase64
	}
	return nil
}

// Text is Data as a string when it is text (Kind ContentText, whole
// UTF-8 characters): what the file doors give as text, and the rest as
// bytes (base64 in JSON).
func (c *FileContent) Text() (string, bool) {
	if c.Kind != ContentText || !utf8.Valid(c.Data) {
		return "", false
	}
	return string(c.Data), true
}

// WriteOptions are WriteFile's.
type WriteOptions struct {
	// Append adds to the end of the file instead of replacing it.
	Append bool
	// Perm is the mode of a file the write creates (0: 0644); missing
	// parent directories are created 0755. Both are subject to the umask.
	Perm fs.FileMode
	// NoFollow refuses a path whose last component is a symlink.
	NoFollow bool
}

// FilePathError is a path the file door refuses as written, before
// looking at any file: Field names the argument, Reason says why.
type FilePathError struct {
	Field, Path, Reason string
}

// Error implements error.
func (e *FilePathError) Error() string {
	return fmt.Sprintf("hutch: %s %q: %s", e.Field, e.Path, e.Reason)
}

// checkFilePath refuses what no file operation takes (pathFault), before
// looking at any file.
func checkFilePath(field, p string) error {
	if why := pathFault(p); why != "" {
		return &FilePathError{Field: field, Path: p, Reason: why}
	}
	return nil
}
