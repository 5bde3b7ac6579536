//go:build linux

package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The pre-runtime stage reads and writes one binary message format,
// described in wire.h: a header ("HTCH", version, record count, length)
// and records of a kind, a few u64s and a few byte strings. It is flat so
// that C can check every length of it in a few lines; the meaning of each
// kind belongs to the protocol that uses it (see package spawn).

const (
	wireMagic      = 0x48435448
	wireVersion    = 1
	wireHeader     = 12
	wireMaxInts    = 8
	wireMaxBlobs   = 8
	wireMaxRecords = 4096
	wireMaxMessage = 16 << 20
)

// Record is one record of a wire message.
type Record struct {
	Kind  uint16
	Ints  []uint64
	Blobs [][]byte
}

// Int returns r.Ints[i], or 0 when the record has fewer.
func (r Record) Int(i int) uint64 {
	if i < len(r.Ints) {
		return r.Ints[i]
	}
	return 0
}

// Blob returns r.Blobs[i], or nil when the record has fewer.
func (r Record) Blob(i int) []byte {
	if i < len(r.Blobs) {
		return r.Blobs[i]
	}
	return nil
}

// ErrWire is wrapped by every decoding and encoding error.
var ErrWire = errors.New("nsinit: bad wire message")

// EncodeWire writes records as one message.
func EncodeWire(records ...Record) ([]byte, error) {
	if len(records) > wireMaxRecords {
		return nil, fmt.Errorf("%w: %d records, over %d", ErrWire, len(records), wireMaxRecords)
	}
	b := make([]byte, wireHeader, 64)
	le := binary.LittleEndian
	le.PutUint32(b[0:], wireMagic)
	le.PutUint16(b[4:], wireVersion)
	le.PutUint16(b[6:], uint16(len(records)))
	for _, r := range records {
		if len(r.Ints) > wireMaxInts || len(r.Blobs) > wireMaxBlobs {
			return nil, fmt.Errorf("%w: record %d with %d ints and %d blobs", ErrWire, r.Kind, len(r.Ints), len(r.Blobs))
		}
		body := 8 * len(r.Ints)
		for _, bl := range r.Blobs {
			body += 4 + len(bl) + 1
		}
		if body > wireMaxMessage {
			return nil, fmt.Errorf("%w: record %d of %d bytes", ErrWire, r.Kind, body)
		}
		b = le.AppendUint16(b, r.Kind)
		b = append(b, byte(len(r.Ints)), byte(len(r.Blobs)))
		b = le.AppendUint32(b, uint32(body))
		for _, v := range r.Ints {
			b = le.AppendUint64(b, v)
		}
		for _, bl := range r.Blobs {
			b = le.AppendUint32(b, uint32(len(bl)))
			b = append(b, bl...)
			b = append(b, 0)
		}
	}
	if len(b) > wireMaxMessage {
		return nil, fmt.Errorf("%w: message of %d bytes, over %d", ErrWire, len(b), wireMaxMessage)
	}
	le.PutUint32(b[8:], uint32(len(b)))
	return b, nil
}

// DecodeWire parses one message. It checks what wire_decode checks, so
// that either side refuses what the other would.
func DecodeWire(b []byte) ([]Record, error) {
	bad := func(why string) ([]Record, error) { return nil, fmt.Errorf("%w: %s", ErrWire, why) }
	le := binary.LittleEndian
	if len(b) < wireHeader {
		return bad("shorter than a header")
	}
	if le.Uint32(b) != wireMagic {
		return bad("bad magic")
	}
	if le.Uint16(b[4:]) != wireVersion {
		return bad("unknown version")
	}
	n := int(le.Uint16(b[6:]))
	if int(le.Uint32(b[8:])) != len(b) || len(b) > wireMaxMessage {
		return bad("length does not match the header")
	}
	if n > wireMaxRecords {
		return bad("too many records")
	}
	out := make([]Record, 0, n)
	off := wireHeader
	for range n {
		if len(b)-off < 8 {
			return bad("truncated record header")
		}
		r := Record{Kind: le.Uint16(b[off:])}
		nints, nblobs := int(b[off+2]), int(b[off+3])
		body := int(le.Uint32(b[off+4:]))
		off += 8
		if nints > wireMaxInts || nblobs > wireMaxBlobs {
			return bad("too many fields in a record")
		}
		if body > len(b)-off {
			return bad("record body past the end")
		}
		end := off + body
		if nints*8 > end-off {
			return bad("ints past the record's end")
		}
		for range nints {
			r.Ints = append(r.Ints, le.Uint64(b[off:]))
			off += 8
		}
		for range nblobs {
			if end-off < 4 {
				return bad("blob length past the record's end")
			}
			bl := int(le.Uint32(b[off:]))
			off += 4
			if bl >= end-off {
				return bad("blob past the record's end")
			}
			if b[off+bl] != 0 {
				return bad("blob without its NUL")
			}
			r.Blobs = append(r.Blobs, bytes.Clone(b[off:off+bl]))
			off += bl + 1
		}
		if off != end {
			return bad("record body longer than its fields")
		}
		out = append(out, r)
	}
	if off != len(b) {
		return bad("bytes after the last record")
	}
	return out, nil
}
