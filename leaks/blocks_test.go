package leaks

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// blockScanners are a Scanner making the block pass and one making the
// pass at every byte, both with the default rules and a host value with
// spaces and one without.
func blockScanners(tb testing.TB) (blocked, every *Scanner) {
	if !blockPassOK {
		tb.Skip("the processor has no block pass (AVX2): the Scanners make the others, tested as such")
	}
	_, every = bothPasses(tb)
	blocked = New(nil)
	blocked.AddValue("HOST_KEY", "host-key-0123456789abcdef")
	blocked.AddValue("SPACED", "pass word with spaces")
	if blocked.blockTables() == nil {
		tb.Fatal("a Scanner with the default rules makes no block pass on a processor that has it")
	}
	return blocked, every
}

// runsBlocked are the encoded runs of b as the block pass finds them.
func runsBlocked(s *Scanner, b []byte) (runs []runsCall) {
	sc := scan{s: s, b: b}
	sc.blockPass(s.blockTables(), b, true)
	f := func(from, to int, enc Encoding) { runs = append(runs, runsCall{from, to, enc}) }
	urlRuns(b, f)
	for _, r := range sc.runs {
		alphabetRun(b, r.from, r.to, f)
	}
	return runs
}

// atPageEnd is a copy of text that ends where an unreadable page begins:
// a read past its end faults.
func atPageEnd(tb testing.TB, text []byte) []byte {
	page := unix.Getpagesize()
	n := (len(text) + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	if err := unix.Mprotect(mem[n:], unix.PROT_NONE); err != nil {
		tb.Fatal(err)
	}
	b := mem[n-len(text) : n : n]
	copy(b, text)
	return b
}

// agree fails t unless the block pass decides on text what the pass at
// every byte does, final or not, and finds the same encoded runs; it
// returns how many findings and runs there were. The block pass looks at
// text where nothing can be read past its end.
func agree(t *testing.T, blocked, every *Scanner, text []byte) (hits, runs int) {
	t.Helper()
	text = atPageEnd(t, text)
	for _, final := range []bool{true, false} {
		got, want := look(blocked, text, final), look(every, text, final)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q (final %v):\nblock pass %+v\nevery byte %+v", text, final, got, want)
		}
		hits += len(want.Found)
	}
	var everyRuns []runsCall
	encodedRuns(text, func(from, to int, enc Encoding) { everyRuns = append(everyRuns, runsCall{from, to, enc}) })
	if got := runsBlocked(blocked, text); !reflect.DeepEqual(got, everyRuns) {
		t.Fatalf("%q: encoded runs\nblock pass %v\nevery byte %v", text, got, everyRuns)
	}
	return hits, len(everyRuns)
}

// TestBlockPassAgrees: the block pass decides what the pass at every byte
// does (findings, where the next look starts, the '+' forms, the encoded
// runs), on texts where needles start at every offset of a block, whole
// and cut by the text's ends, short and long ones crossing the batches of
// blocks.
func TestBlockPassAgrees(t *testing.T) {
	blocked, every := blockScanners(t)
	rng := rand.New(rand.NewSource(51))
	var hits, runs int
	for i := range 3000 {
		n := rng.Intn(300)
		if i%50 == 0 {
			n = blockBatch*blockSize - 200 + rng.Intn(9000)
		}
		h, r := agree(t, blocked, every, needleText(rng, blocked, n))
		hits, runs = hits+h, runs+r
	}
	if hits < 1000 || runs < 3000 {
		t.Fatalf("only %d findings and %d encoded runs in the texts: they do not test the pass", hits, runs)
	}
}

func FuzzBlockPassAgrees(f *testing.F) {
	blocked, every := blockScanners(f)
	rng := rand.New(rand.NewSource(52))
	for range 20 {
		f.Add(needleText(rng, blocked, rng.Intn(200)))
	}
	f.Add([]byte("0123456789012345678901234567890123456789 sk-"))
	f.Fuzz(func(t *testing.T, text []byte) { agree(t, blocked, every, text) })
}

// blockMasksGo is blockMasks as the tables define it, one offset at a
// time; the alphabet from class itself, not the tables.
func blockMasksGo(t *blockTables, v []byte, n int) (cand, alpha []uint64) {
	for k := range n {
		var c, a uint64
		for j := range blockSize {
			p := k*blockSize + j
			sel := uint8(0xff)
			for i := range 3 {
				sel &= t.nibbles[2*i][v[p+i]&15] & t.nibbles[2*i+1][v[p+i]>>4]
			}
			if sel != 0 {
				c |= 1 << j
			}
			if class[v[p]]&b64 != 0 {
				a |= 1 << j
			}
		}
		cand, alpha = append(cand, c), append(alpha, a)
	}
	return cand, alpha
}

// needleBytes and inputBytes are what TestBlockMasks's needles and
// inputs are made of every other round, so that needles share bytes and
// nibbles, and occur cut.
const (
	needleBytes = "abcsk-_+/ \x80\xff"
	inputBytes  = needleBytes + "AZ09="
)

// TestBlockMasks: the vector code makes the masks its tables define,
// for random needles (any bytes) and inputs, every needle's start is a
// candidate, and it reads nothing past the 64n+2 bytes it is given: the
// input ends where an unreadable page begins.
func TestBlockMasks(t *testing.T) {
	if !blockPassOK {
		t.Skip("the processor has no block pass (AVX2)")
	}
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(53))
	var starts int
	for round := range 2000 {
		tables := newBlockTables()
		var needles [][]byte
		for k := range 1 + rng.Intn(24) {
			nd := make([]byte, 3+rng.Intn(6))
			for i := range nd {
				nd[i] = byte(rng.Intn(256))
				if round%2 == 0 {
					nd[i] = needleBytes[rng.Intn(len(needleBytes))]
				}
			}
			needles = append(needles, nd)
			tables.addNeedle(nd, uint8(k%buckets))
		}
		n := rng.Intn(page/blockSize - 1)
		v := mem[page-(n*blockSize+2) : page]
		for i := range v {
			if rng.Intn(4) == 0 {
				nd := needles[rng.Intn(len(needles))]
				i += copy(v[i:], nd) - 1
				continue
			}
			v[i] = byte(rng.Intn(256))
			if round%2 == 0 {
				v[i] = inputBytes[rng.Intn(len(inputBytes))]
			}
		}
		cand, alpha := make([]uint64, n+1), make([]uint64, n+1)
		cand[n], alpha[n] = 0xdeadbeef, 0xdeadbeef
		if n > 0 {
			blockMasks(tables, &v[0], n, &cand[0], &alpha[0])
		}
		if cand[n] != 0xdeadbeef || alpha[n] != 0xdeadbeef {
			t.Fatalf("round %d: %d blocks, a mask written past them", round, n)
		}
		wantCand, wantAlpha := blockMasksGo(tables, v, n)
		for k := range n {
			if cand[k] != wantCand[k] || alpha[k] != wantAlpha[k] {
				t.Fatalf("round %d, block %d of %d: cand %064b alpha %064b, the tables say %064b and %064b",
					round, k, n, cand[k], alpha[k], wantCand[k], wantAlpha[k])
			}
			for j := range blockSize {
				p := k*blockSize + j
				for _, nd := range needles {
					if len(v)-p >= 3 && string(v[p:p+3]) == string(nd[:3]) {
						starts++
						if cand[k]&(1<<j) == 0 {
							t.Fatalf("round %d: a needle %q starts at %d, not a candidate", round, nd, p)
						}
					}
				}
			}
		}
	}
	if starts < 5000 {
		t.Fatalf("only %d needle starts in the inputs: they do not test the candidates", starts)
	}
}

// TestLongRun: longRun says whether a mask has minBase64 bits set in a
// row, as counting them does.
func TestLongRun(t *testing.T) {
	rng := rand.New(rand.NewSource(54))
	for i := range 100000 {
		m := rng.Uint64() | rng.Uint64() | rng.Uint64()
		if i%3 == 0 {
			// A run of ones of a random length at a random place.
			n, at := rng.Intn(40), rng.Intn(64)
			m = (1<<n - 1) << at
		}
		longest, run := 0, 0
		for j := range 64 {
			if m&(1<<j) != 0 {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if got := longRun(m); got != (longest >= minBase64) {
			t.Fatalf("%064b: longRun %v, its longest run %d bits", m, got, longest)
		}
	}
}

// TestValueAddedAfterBlockPass: a value registered after the block pass
// has looked at text is found by it, wherever in a block it starts, as
// the pass at every byte finds it.
func TestValueAddedAfterBlockPass(t *testing.T) {
	blocked, every := blockScanners(t)
	blocked.Scan([]byte(strings.Repeat("made before the value ", 20)))
	for _, s := range []*Scanner{blocked, every} {
		s.AddValue("LATE", "late-value-987654")
	}
	for pad := range blockSize + 3 {
		text := []byte(strings.Repeat("x", pad) + " late-value-987654 " + strings.Repeat("y", 2*blockSize))
		got, want := blocked.Scan(text), every.Scan(text)
		if len(want) != 1 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, the pass at every byte %+v", text, got, want)
		}
	}
}
