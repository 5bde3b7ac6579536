package runtime

import (
	"bytes"
	"image"
	_ "image/gif"  // registers GIF with image.DecodeConfig
	_ "image/jpeg" // registers JPEG with image.DecodeConfig
	_ "image/png"  // registers PNG with image.DecodeConfig
	"io"
	"unicode/utf8"

	_ "golang.org/x/image/webp" // registers WebP with image.DecodeConfig
)

// imageInfo describes an image file found by detectImage.
type imageInfo struct {
	MIME          string
	Width, Height int
}

// imageMIME maps the format names image.DecodeConfig reports to MIME types.
// It doubles as the allow-list: another package in the binary may register
// more formats with package image, and those are not images to us.
var imageMIME = map[string]string{
	"png":  "image/png",
	"jpeg": "image/jpeg",
	"gif":  "image/gif",
	"webp": "image/webp",
}

// detectImage reports whether the size bytes of r hold a PNG, JPEG, GIF or
// WebP image, and its MIME type and dimensions. It goes by content, never
// by name: a file's name is whatever the sandboxed program chose, and a
// misnamed image is still an image (and a misnamed text file is not).
//
// Only the header is decoded (image.DecodeConfig through an
// io.SectionReader), so a huge file costs a few kilobytes of reading.
// A file that merely starts with a magic number is not an image: the
// decoder must parse a whole header to a positive width and height.
// The body is not checked; a file cut after its header still counts.
func detectImage(r io.ReaderAt, size int64) (imageInfo, bool) {
	if size <= 0 {
		return imageInfo{}, false
	}
	cfg, format, err := image.DecodeConfig(io.NewSectionReader(r, 0, size))
	if err != nil {
		return imageInfo{}, false
	}
	mime, ok := imageMIME[format]
	if !ok || cfg.Width <= 0 || cfg.Height <= 0 {
		return imageInfo{}, false
	}
	return imageInfo{MIME: mime, Width: cfg.Width, Height: cfg.Height}, true
}

// isText reports whether sample, the first bytes of a file, looks like
// text: no NUL byte and valid UTF-8. The caller reads a bounded sample, not
// the whole file, so when !atEOF the sample may end partway through a
// character; an incomplete sequence at the very end is then allowed. At
// EOF there is no more to come, and it makes the file invalid. An empty
// sample is text (an empty file reads as "").
func isText(sample []byte, atEOF bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return false
	}
	if !atEOF {
		sample = sample[:len(sample)-partialTail(sample)]
	}
	return utf8.Valid(sample)
}

// utf8Window trims b, the bytes [offset, offset+len(b)) of a text file, to
// whole characters, so that a ranged read never hands back half a
// character (which would decode as U+FFFD, or be rejected by a JSON
// encoder). When !atStart, leading continuation bytes (at most 3, the most
// a valid character has) are dropped; when !atEnd, a trailing incomplete
// sequence is dropped. At the file's own start or end nothing is dropped:
// there is no neighbour holding the rest of the character.
//
// skippedHead and skippedTail count the bytes dropped at each edge, so the
// caller can report the exact range it returned:
// [offset+skippedHead, offset+len(b)-skippedTail). out aliases b.
func utf8Window(b []byte, atStart, atEnd bool) (out []byte, skippedHead, skippedTail int) {
	if !atStart {
		for skippedHead < len(b) && skippedHead < utf8.UTFMax-1 && !utf8.RuneStart(b[skippedHead]) {
			skippedHead++
		}
	}
	out = b[skippedHead:]
	if !atEnd {
		skippedTail = partialTail(out)
		out = out[:len(out)-skippedTail]
	}
	return out, skippedHead, skippedTail
}

// partialTail returns the length of the incomplete UTF-8 sequence that
// ends b: the last character's first bytes, cut off before the rest. It is
// 0 when b ends on a character boundary or in bytes that would be invalid
// however b went on (utf8.FullRune counts an invalid prefix as complete),
// so trimming it never hides an encoding error.
func partialTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
}
