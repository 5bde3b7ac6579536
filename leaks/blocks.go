package leaks

import "math/bits"

// The block pass: where the processor has 256-bit byte shuffles (AVX2 on
// amd64), the pass for the needles and the encoded runs looks at 64
// bytes at a time (two halves of 32) with a handful of vector
// instructions (blockMasks) instead of a table lookup per bigram. On
// build logs that pass was what bounded a command's output under
// LeaksReport, at a third of a pipe's speed; the vector code runs at
// about 10 GB/s, and the whole Stream at twice its old speed.
//
// For each 64-byte block it makes two masks, a bit per offset:
//
//   - cand: the needles' first three bytes may start there. Each needle
//     is in one of 8 buckets (all those with the same first two bytes in
//     the same one); a byte's low and high nibbles each select, in a
//     16-entry table per needle byte, the buckets having a needle with
//     that nibble there, and an offset is a candidate when some bucket is
//     selected by all six nibbles of its three bytes. Every needle's start
//     is a candidate (nothing is missed); a candidate that is not one is
//     passed over by the same table lookup as the other passes
//     (firsts.set), so the needles compared are the same.
//   - alpha: the byte is in a base64 alphabet, exactly: the low nibble
//     selects, as bits, the high nibbles (0-7) that make a byte of the
//     alphabets with it. The runs of at least minBase64 are found from
//     these bits, as the other passes find them.
//
// Only a Scanner whose needles are all at least 3 bytes long makes it,
// as with the pass at even offsets; with a shorter one, it makes the
// pass at every byte.

// blockTables are the tables blockMasks shuffles with, 16 entries each,
// written twice (a 256-bit shuffle looks up within each 128-bit half).
// The layout is blockMasks's: do not reorder.
type blockTables struct {
	// nibbles[2k] and nibbles[2k+1] give, for needle byte k (0-2), the
	// buckets having a needle with that low or high nibble there.
	nibbles [6][32]uint8
	// alphaLow gives, for a low nibble, the high nibbles (bit h for h
	// below 8) making a byte of the base64 alphabets; alphaHigh the bit of
	// a high nibble (none for 8 and up: no such byte is ASCII).
	alphaLow, alphaHigh [32]uint8
}

// blockSize is what blockMasks looks at in a block, and blockReach what
// it reads of the input for one: the two bytes after the block are the
// candidates' second and third at its last offsets.
const (
	blockSize  = 64
	blockReach = blockSize + 2
)

// blockBatch is how many blocks one call of blockMasks takes: its masks
// are on the pass's stack.
const blockBatch = 64

// buckets is the number of buckets of the needles.
const buckets = 8

// newBlockTables returns tables with the alphabets' and no needle.
func newBlockTables() *blockTables {
	t := new(blockTables)
	for c := range 128 {
		if class[c]&b64 != 0 {
			t.alphaLow[c&15] |= 1 << (c >> 4)
			t.alphaLow[16+(c&15)] |= 1 << (c >> 4)
		}
	}
	for h := range 8 {
		t.alphaHigh[h], t.alphaHigh[16+h] = 1<<h, 1<<h
	}
	return t
}

// addNeedle adds the needle text (3 bytes or more) to bucket k.
func (t *blockTables) addNeedle(text []byte, k uint8) {
	bit := uint8(1) << k
	for i, c := range text[:3] {
		for _, n := range [2]int{2 * i, 2*i + 1} {
			nibble := c & 15
			if n%2 == 1 {
				nibble = c >> 4
			}
			t.nibbles[n][nibble] |= bit
			t.nibbles[n][16+nibble] |= bit
		}
	}
}

// bucketOf assigns the needle text (3 bytes or more) its bucket: the
// one of the needles with the same first two bytes, else the next in
// turn. Needles alike share their nibbles, so that a bucket selects
// few bytes besides theirs.
func (s *Scanner) bucketOf(text []byte) uint8 {
	h := uint16(text[0]) | uint16(text[1])<<8
	k, ok := s.buckets[h]
	if !ok {
		k = uint8(len(s.buckets) % buckets)
		s.buckets[h] = k
	}
	return k
}

// blockPass finds the needles (every one at least 3 bytes long) that
// start in v before the offset it returns, in order, from the masks of
// blockMasks; the pass at every byte goes on from there, over fewer than
// blockReach bytes. With findRuns, it finds all of v's runs of a base64
// alphabet at least minBase64 long, whole, into sc.runs.
func (sc *scan) blockPass(t *blockTables, v []byte, findRuns bool) int {
	if findRuns {
		sc.runs = sc.runs[:0]
	}
	q, start := 0, 0 // start: just after the last byte out of the alphabets met
	if len(v) >= blockReach {
		// Most views are a decoded run, too short for a block.
		q, start = sc.blockBatches(t, v, findRuns)
	}
	if findRuns {
		for i := q; i < len(v); i++ {
			if class[v[i]]&b64 == 0 {
				if i-start >= minBase64 {
					sc.runs = append(sc.runs, window{start, i})
				}
				start = i + 1
			}
		}
		if len(v)-start >= minBase64 {
			sc.runs = append(sc.runs, window{start, len(v)})
		}
	}
	return q
}

// blockBatches is blockPass over v's whole blocks (v is blockReach long
// or more), a batch of masks at a time: it returns where they end, and
// where the run reaching that point starts.
func (sc *scan) blockBatches(t *blockTables, v []byte, findRuns bool) (q, start int) {
	var cand, alpha [blockBatch]uint64
	for len(v)-q >= blockReach {
		n := min(blockBatch, (len(v)-q-(blockReach-blockSize))/blockSize)
		blockMasks(t, &v[q], n, &cand[0], &alpha[0])
		for k := range n {
			b := q + k*blockSize
			for c := cand[k]; c != 0; c &= c - 1 {
				p := b + bits.TrailingZeros64(c)
				if h := uint16(v[p]) | uint16(v[p+1])<<8; sc.s.firsts.set[h] != 0 {
					sc.hit(v, p, sc.s.firsts.candidates(h))
				}
			}
			m := alpha[k]
			if !findRuns || m == 1<<64-1 {
				continue // no runs looked for, or the run goes on
			}
			// The run reaching the block ends at its first byte out of
			// the alphabets; one starts after its last; between them,
			// shorter runs, seldom long enough.
			first, last := bits.TrailingZeros64(^m), blockSize-1-bits.LeadingZeros64(^m)
			if b+first-start >= minBase64 {
				sc.runs = append(sc.runs, window{start, b + first})
			}
			if inner := m &^ (2<<first - 1) & (1<<last - 1); longRun(inner) {
				sc.innerRuns(b, inner, first, last)
			}
			start = b + last + 1
		}
		q += n * blockSize
	}
	return q, start
}

// longRun says whether m has minBase64 (24) bits set in a row: after the
// shifts, bit i stays set only if bits i to i+23 all were.
func longRun(m uint64) bool {
	m &= m >> 1 // 2 in a row
	m &= m >> 2 // 4
	m &= m >> 4 // 8
	m &= m >> 8 // 16
	m &= m >> 8 // 24
	return m != 0
}

// innerRuns adds the runs of the block at b found in its alphabet mask m
// between its bytes first and last, both out of the alphabets.
func (sc *scan) innerRuns(b int, m uint64, first, last int) {
	for i := first + 1; i < last; {
		if m&(1<<i) == 0 {
			i++
			continue
		}
		j := i
		for j < last && m&(1<<j) != 0 {
			j++
		}
		if j-i >= minBase64 {
			sc.runs = append(sc.runs, window{b + i, b + j})
		}
		i = j
	}
}
