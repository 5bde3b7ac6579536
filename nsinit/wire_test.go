//go:build linux && cgo

package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// TestWireRoundTrip: what Go encodes, the stage's C decoder and Go's
// decoder read back the same.
func TestWireRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
	}{
		{"no records", nil},
		{"ints only", []Record{{Kind: 1, Ints: []uint64{0, 1, ^uint64(0)}}}},
		{"blobs with NULs", []Record{{Kind: 7, Blobs: [][]byte{[]byte("/a/b"), {0, 1, 0}, {}}}}},
		{"full record", []Record{{Kind: 0xffff, Ints: make([]uint64, 8), Blobs: make([][]byte, 8)}}},
		{"several", []Record{{Kind: 1, Ints: []uint64{5}}, {Kind: 2, Blobs: [][]byte{[]byte("x")}}, {Kind: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeWire(tt.recs...)
			if err != nil {
				t.Fatal(err)
			}
			goRecs, err := DecodeWire(b)
			if err != nil {
				t.Fatalf("DecodeWire: %v", err)
			}
			cRecs, err := decodeWireC(b, len(tt.recs))
			if err != nil {
				t.Fatalf("wire_decode: %v", err)
			}
			want := normalize(tt.recs)
			if !reflect.DeepEqual(normalize(goRecs), want) || !reflect.DeepEqual(normalize(cRecs), want) {
				t.Errorf("decoded\n go %v\n  C %v\nwant %v", goRecs, cRecs, want)
			}
		})
	}
}

// normalize makes nil and empty fields compare equal.
func normalize(recs []Record) []Record {
	out := []Record{}
	for _, r := range recs {
		n := Record{Kind: r.Kind, Ints: append([]uint64{}, r.Ints...), Blobs: [][]byte{}}
		for _, b := range r.Blobs {
			n.Blobs = append(n.Blobs, append([]byte{}, b...))
		}
		out = append(out, n)
	}
	return out
}

// TestWireRefuses: every malformed message is refused by both decoders,
// for the same reason.
func TestWireRefuses(t *testing.T) {
	good, err := EncodeWire(Record{Kind: 1, Ints: []uint64{9}, Blobs: [][]byte{[]byte("path")}})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		msg  []byte
		why  string
	}{
		{"empty", nil, "shorter than a header"},
		{"bad magic", edit(func(b []byte) []byte { b[0] ^= 1; return b }), "bad magic"},
		{"other version", edit(func(b []byte) []byte { b[4] = 2; return b }), "unknown version"},
		{"length too big", edit(func(b []byte) []byte { le.PutUint32(b[8:], uint32(len(b)+1)); return b }), "length does not match the header"},
		{"truncated", good[:len(good)-1], "length does not match the header"},
		{"more records than sent", edit(func(b []byte) []byte { b[6] = 2; return b }), "truncated record header"},
		{"nine ints", edit(func(b []byte) []byte { b[14] = 9; return b }), "too many fields in a record"},
		{"body past the end", edit(func(b []byte) []byte { le.PutUint32(b[16:], 1000); return b }), "record body past the end"},
		{"ints past the body", edit(func(b []byte) []byte { b[14] = 3; return b }), "ints past the record's end"},
		{"blob past the body", edit(func(b []byte) []byte { le.PutUint32(b[28:], 5); return b }), "blob past the record's end"},
		{"blob without its NUL", edit(func(b []byte) []byte { b[len(b)-1] = 'x'; return b }), "blob without its NUL"},
		{"body longer than its fields", edit(func(b []byte) []byte {
			b = append(b, 0)
			le.PutUint32(b[8:], uint32(len(b)))
			le.PutUint32(b[16:], le.Uint32(b[16:])+1)
			return b
		}), "record body longer than its fields"},
		{"bytes after the last record", edit(func(b []byte) []byte {
			b = append(b, 0)
			le.PutUint32(b[8:], uint32(len(b)))
			return b
		}), "bytes after the last record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, goErr := DecodeWire(tt.msg)
			_, cErr := decodeWireC(tt.msg, 4)
			for side, err := range map[string]error{"go": goErr, "C": cErr} {
				if !errors.Is(err, ErrWire) || !bytes.Contains([]byte(err.Error()), []byte(tt.why)) {
					t.Errorf("%s decoder: %v, want %q", side, err, tt.why)
				}
			}
		})
	}
}

// FuzzWire holds the stage's C decoder to Go's on any input: both refuse
// it, or both return the same records, and the C one never crashes. Under
// `go test -asan` (make fuzz) a read past the message is caught too.
func FuzzWire(f *testing.F) {
	seed, _ := EncodeWire(Record{Kind: ZygSpawn, Ints: []uint64{1, 2, 3, 4, 5, 6}}, Record{Kind: 9, Blobs: [][]byte{[]byte("/tmp"), nil}})
	f.Add(seed)
	f.Add([]byte("HTCH"))
	if p, err := EncodeConfig(Config{Namespaces: []Layer{LayerUserNS}, Skip: []Layer{LayerSeccomp}, Rlimits: nil}); err == nil {
		f.Add(p.Message)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		goRecs, goErr := DecodeWire(b)
		// As the stage sizes its arrays: by the header's count.
		capacity := wireMaxRecords
		if len(b) >= 8 {
			capacity = min(int(binary.LittleEndian.Uint16(b[6:])), wireMaxRecords)
		}
		cRecs, cErr := decodeWireC(b, capacity)
		if (goErr == nil) != (cErr == nil) {
			t.Fatalf("go: %v, C: %v", goErr, cErr)
		}
		if goErr == nil && !reflect.DeepEqual(normalize(goRecs), normalize(cRecs)) {
			t.Fatalf("go %v, C %v", goRecs, cRecs)
		}
		// The init's check of its plan (init_check) runs on the same
		// bytes: it must refuse what the decoder refuses, and never
		// read past the message (make fuzz builds with -asan).
		if err := checkPlanC(b); goErr != nil && err == nil {
			t.Fatalf("init_check passed a message the decoder refuses: %v", goErr)
		}
		// And the filesystem executor's check (mnt_check), which runs
		// nothing either.
		if out := runMountSteps(b, true); goErr != nil && !out.failed {
			t.Fatalf("mnt_check passed a message the decoder refuses: %v", goErr)
		}
	})
}
