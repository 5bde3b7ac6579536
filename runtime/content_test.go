package runtime

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"golang.org/x/image/webp"
)

// tinyWebP is a 3x2 lossless WebP, every pixel opaque red, assembled by
// hand because Go has no WebP encoder. VP8L bits are read LSB first.
var tinyWebP = []byte{
	'R', 'I', 'F', 'F',
	0x16, 0x00, 0x00, 0x00, // RIFF size: 4 ("WEBP") + 8 (chunk header) + 10 (chunk data) = 22
	'W', 'E', 'B', 'P',
	'V', 'P', '8', 'L',
	0x0a, 0x00, 0x00, 0x00, // VP8L chunk size: 10 (even, so no pad byte)
	0x2f, // VP8L signature
	// 32 bits, little endian: width-1 (14 bits) = 2, height-1 (14 bits)
	// = 1, alpha hint (1 bit) = 0, version (3 bits) = 0:
	// 2 | 1<<14 = 0x00004002.
	0x02, 0x40, 0x00, 0x00,
	// The image stream, 37 bits, bit 0 first:
	//   bit  0     no transform
	//   bit  1     no color cache
	//   bit  2     no meta prefix codes (one code group for the image)
	//   bits 3-6   green: simple code (1), 1 symbol (0), 1-bit symbol (0), symbol 0
	//   bits 7-17  red: simple (1), 1 symbol (0), 8-bit symbol (1), symbol 0xff
	//   bits 18-21 blue: simple, 1 symbol, 1-bit symbol, symbol 0
	//   bits 22-32 alpha: simple, 1 symbol, 8-bit symbol, symbol 0xff
	//   bits 33-36 distance: simple, 1 symbol, 1-bit symbol, symbol 0
	// A one-symbol code has zero-length codes, so the 6 pixels take no
	// bits. Bits 37-39 pad the last byte.
	0x88, // bits 0-7:   0,0,0,1, 0,0,0,1 (bit 3 green simple, bit 7 red simple)
	0xfe, // bits 8-15:  0 (red 1 symbol), 1 (8-bit), 1,1,1,1,1,1 (red symbol bits 0-5)
	0x47, // bits 16-23: 1,1 (red symbol bits 6-7), 1,0,0,0 (blue), 1,0 (alpha simple, 1 symbol)
	0xff, // bits 24-31: 1 (alpha 8-bit), 1,1,1,1,1,1,1 (alpha symbol bits 0-6)
	0x03, // bits 32-39: 1 (alpha symbol bit 7), 1,0,0,0 (distance), 0,0,0 (padding)
}

func TestContentWebPFixture(t *testing.T) {
	m, err := webp.Decode(bytes.NewReader(tinyWebP))
	if err != nil {
		t.Fatalf("webp.Decode: %v", err)
	}
	if got, want := m.Bounds(), image.Rect(0, 0, 3, 2); got != want {
		t.Fatalf("bounds %v, want %v", got, want)
	}
	red := color.NRGBA{R: 0xff, A: 0xff}
	for y := range 2 {
		for x := range 3 {
			if got := color.NRGBAModel.Convert(m.At(x, y)); got != red {
				t.Errorf("pixel (%d,%d) = %v, want %v", x, y, got, red)
			}
		}
	}
}

// encodeImage returns a w x h image encoded by encode.
func encodeImage(t *testing.T, w, h int, encode func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	m := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	for y := range h {
		for x := range w {
			m.SetColorIndex(x, y, uint8((x+y)%2))
		}
	}
	var buf bytes.Buffer
	if err := encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pngOf(t *testing.T, w, h int) []byte {
	return encodeImage(t, w, h, func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) })
}

// detectFile writes data to dir/name and runs detectImage on the opened file.
func detectFile(t *testing.T, dir, name string, data []byte) (imageInfo, bool) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return detectImage(f, fi.Size())
}

func TestDetectImage(t *testing.T) {
	pngData := pngOf(t, 3, 5)
	jpegData := encodeImage(t, 7, 2, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) })
	gifData := encodeImage(t, 4, 4, func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) })

	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want imageInfo // zero when not an image
	}{
		{"a.png", pngData, imageInfo{"image/png", 3, 5}},
		{"a.jpg", jpegData, imageInfo{"image/jpeg", 7, 2}},
		{"a.gif", gifData, imageInfo{"image/gif", 4, 4}},
		{"a.webp", tinyWebP, imageInfo{"image/webp", 3, 2}},
		{"png-named.txt", pngData, imageInfo{"image/png", 3, 5}},
		{"noext", gifData, imageInfo{"image/gif", 4, 4}},

		{"text.png", []byte("hello, world\nnot an image\n"), imageInfo{}},
		{"empty.png", nil, imageInfo{}},
		{"garbage.png", append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xa5}, 64)...), imageInfo{}},
		{"magic-only.png", []byte("\x89PNG\r\n\x1a\n"), imageInfo{}},
		{"truncated.jpg", jpegData[:20], imageInfo{}},
		{"magic-only.gif", []byte("GIF89a"), imageInfo{}},
		{"riff-only.webp", tinyWebP[:16], imageInfo{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := detectFile(t, dir, tc.name, tc.data)
			if ok != (tc.want != imageInfo{}) || got != tc.want {
				t.Errorf("detectImage = %+v, %v; want %+v", got, ok, tc.want)
			}
		})
	}

	t.Run("cwebp", func(t *testing.T) {
		cwebp, err := exec.LookPath("cwebp")
		if err != nil {
			t.Skip("cwebp not on PATH")
		}
		in, out := filepath.Join(dir, "in.png"), filepath.Join(dir, "out.webp")
		if err := os.WriteFile(in, pngOf(t, 6, 9), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(cwebp, "-quiet", "-lossless", in, "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("cwebp: %v\n%s", err, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		m, err := webp.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("webp.Decode: %v", err)
		}
		if got, want := m.Bounds(), image.Rect(0, 0, 6, 9); got != want {
			t.Errorf("bounds %v, want %v", got, want)
		}
		if got, ok := detectFile(t, dir, "cwebp.bin", data); !ok || got != (imageInfo{"image/webp", 6, 9}) {
			t.Errorf("detectImage = %+v, %v", got, ok)
		}
	})
}

// farReader is a ReaderAt over data followed by zeros out to size, which
// records the furthest byte read.
type farReader struct {
	data []byte
	size int64
	max  int64
}

func (r *farReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for ; n < len(p) && off+int64(n) < r.size; n++ {
		if i := off + int64(n); i < int64(len(r.data)) {
			p[n] = r.data[i]
		} else {
			p[n] = 0
		}
	}
	r.max = max(r.max, off+int64(n))
	if n < len(p) {
		return n, os.ErrClosed // any error: past the end
	}
	return n, nil
}

func TestDetectImageReadsOnlyHeader(t *testing.T) {
	r := &farReader{data: pngOf(t, 3, 5), size: 1 << 40}
	got, ok := detectImage(r, r.size)
	if !ok || got != (imageInfo{"image/png", 3, 5}) {
		t.Fatalf("detectImage = %+v, %v", got, ok)
	}
	if r.max > 64<<10 {
		t.Errorf("read %d bytes of a 1 TiB file; want only the header", r.max)
	}
}

func TestIsText(t *testing.T) {
	const emoji = "hi 🙂" // 🙂 is 4 bytes: f0 9f 99 82
	for _, tc := range []struct {
		name   string
		sample string
		atEOF  bool
		want   bool
	}{
		{"empty", "", true, true},
		{"empty sample", "", false, true},
		{"ascii", "hello, world\n\tx = 1\n", true, true},
		{"multibyte", "héllo 世界 🙂", true, true},
		{"nul", "a\x00b", true, false},
		{"nul not at eof", "a\x00b", false, false},
		{"0xff", "abc\xffdef", true, false},
		{"0xff at end, not eof", "abc\xff", false, false},
		{"bad continuation", "a\xc3(b", true, false},
		{"cut emoji, more to come", emoji[:len(emoji)-1], false, true},
		{"cut emoji after lead byte", emoji[:len(emoji)-3], false, true},
		{"cut emoji at eof", emoji[:len(emoji)-1], true, false},
		{"cut 2-byte, more to come", "h\xc3", false, true},
		// e0 80 can begin no character, so it is invalid however the file goes on.
		{"invalid prefix at end", "a\xe0\x80", false, false},
		{"cut emoji not at end", emoji[:len(emoji)-1] + "x", false, false},
	} {
		if got := isText([]byte(tc.sample), tc.atEOF); got != tc.want {
			t.Errorf("%s: isText(%q, %v) = %v, want %v", tc.name, tc.sample, tc.atEOF, got, tc.want)
		}
	}
}

func TestUTF8Window(t *testing.T) {
	// a: 0; é: 1-2 (c3 a9); €: 3-5 (e2 82 ac); 🙂: 6-9 (f0 9f 99 82); z: 10.
	const s = "aé€🙂z"
	for _, tc := range []struct {
		name           string
		off, n         int
		atStart, atEnd bool
		want           string
		head, tail     int
	}{
		{"whole file", 0, 11, true, true, s, 0, 0},
		{"start inside 2-byte", 2, 4, false, false, "€", 1, 0},
		{"end inside 2-byte", 0, 2, true, false, "a", 0, 1},
		{"start after 1 byte of 3-byte", 4, 7, false, true, "🙂z", 2, 0},
		{"start after 2 bytes of 3-byte", 5, 6, false, true, "🙂z", 1, 0},
		{"end inside 3-byte", 0, 5, true, false, "aé", 0, 2},
		{"start inside 4-byte", 7, 4, false, true, "z", 3, 0},
		{"end after 3 bytes of 4-byte", 3, 6, false, false, "€", 0, 3},
		{"end after 1 byte of 4-byte", 3, 4, false, false, "€", 0, 1},
		{"both edges cut", 2, 6, false, false, "€", 1, 2},
		{"inside one character", 7, 2, false, false, "", 2, 0},
		{"lead and one continuation", 6, 2, false, false, "", 0, 2},
		{"on boundaries", 1, 5, false, false, "é€", 0, 0},
		{"empty", 4, 0, false, false, "", 0, 0},
		// At the file's own edges there is nothing to complete a character.
		{"file starts mid-character", 2, 9, true, true, s[2:], 0, 0},
		{"file ends mid-character", 0, 8, true, true, s[:8], 0, 0},
	} {
		out, head, tail := utf8Window([]byte(s[tc.off:tc.off+tc.n]), tc.atStart, tc.atEnd)
		if string(out) != tc.want || head != tc.head || tail != tc.tail {
			t.Errorf("%s: utf8Window(s[%d:%d], %v, %v) = %q, %d, %d; want %q, %d, %d",
				tc.name, tc.off, tc.off+tc.n, tc.atStart, tc.atEnd, out, head, tail, tc.want, tc.head, tc.tail)
		}
	}

	// Invalid text: no character has more than 3 continuation bytes, so
	// no more than 3 are dropped.
	out, head, tail := utf8Window([]byte("\x80\x80\x80\x80A"), false, false)
	if string(out) != "\x80A" || head != 3 || tail != 0 {
		t.Errorf("5 continuation bytes: got %q, %d, %d", out, head, tail)
	}
}

// TestUTF8WindowEveryWindow checks every window of a mixed string against
// the string's own character boundaries: out must be exactly
// s[off+head : end-tail], start on the first boundary at or after off
// (unless atStart), end on the last boundary at or before end (unless
// atEnd), and be valid UTF-8.
func TestUTF8WindowEveryWindow(t *testing.T) {
	const s = "aé€🙂z\n日本 ü𝄞 x😀é"
	boundary := func(i int) bool { return i == 0 || i == len(s) || utf8.RuneStart(s[i]) }
	for off := 0; off <= len(s); off++ {
		for end := off; end <= len(s); end++ {
			atStart, atEnd := off == 0, end == len(s)
			out, head, tail := utf8Window([]byte(s[off:end]), atStart, atEnd)

			wantStart := off
			if !atStart {
				for wantStart < end && !boundary(wantStart) {
					wantStart++
				}
			}
			wantEnd := end
			if !atEnd {
				for wantEnd > wantStart && !boundary(wantEnd) {
					wantEnd--
				}
			}
			if off+head != wantStart || end-tail != wantEnd || string(out) != s[wantStart:wantEnd] || !utf8.Valid(out) {
				t.Fatalf("utf8Window(s[%d:%d]) = %q, head %d, tail %d; want s[%d:%d] = %q",
					off, end, out, head, tail, wantStart, wantEnd, s[wantStart:wantEnd])
			}
		}
	}
}
