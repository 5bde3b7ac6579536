package leaks

import (
	"encoding/base64"
	"encoding/hex"
	"math/rand"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// passScanners are two Scanners with the default rules and values
// (name, value pairs): the first makes its pass at even offsets from
// the first byte it looks at, the second makes a pass at every byte and
// one of its own for the encoded runs, as a Scanner with a needle
// shorter than 3 bytes does.
func passScanners(tb testing.TB, values ...string) (even, every *Scanner) {
	even, every = New(nil), New(nil)
	for i := 0; i+1 < len(values); i += 2 {
		even.AddValue(values[i], values[i+1])
		every.AddValue(values[i], values[i+1])
	}
	if even.short {
		tb.Fatal("a needle is shorter than 3 bytes: the pass at even offsets is not used")
	}
	even.evenAfter = 0
	even.noBlocks = true
	every.short = true
	return even, every
}

// bothPasses are passScanners with a host value, and one with spaces
// (which has a '+' form).
func bothPasses(tb testing.TB) (even, every *Scanner) {
	return passScanners(tb, "HOST_KEY", "host-key-0123456789abcdef", "SPACED", "pass word with spaces")
}

// lookAt is what a look at b decides: what Scan, a Stream and a Redactor
// act on.
type lookAt struct {
	Found []found
	Keep  int
	Plus  []int
}

// runsCall is one call of encodedRuns's f.
type runsCall struct {
	From, To int
	Enc      Encoding
}

// runsBoth are the encoded runs of b as the pass at even offsets finds
// them, and as encodedRuns does byte by byte.
func runsBoth(s *Scanner, b []byte) (even, every []runsCall) {
	sc := scan{s: s, b: b}
	sc.evenBigrams(s.evenPairs(len(b)), b, true)
	f := func(from, to int, enc Encoding) { even = append(even, runsCall{from, to, enc}) }
	urlRuns(b, f)
	for _, r := range sc.runs {
		alphabetRun(b, r.from, r.to, f)
	}
	encodedRuns(b, func(from, to int, enc Encoding) { every = append(every, runsCall{from, to, enc}) })
	return even, every
}

func look(s *Scanner, b []byte, final bool) lookAt {
	sc := scan{s: s, b: b, final: final}
	sc.run()
	return lookAt{sc.found, sc.keep, sc.plus}
}

// needleText is text made of pieces of every needle (whole, cut, at
// every offset), words and the encodings' characters, so that needles
// start at odd and even offsets, at the text's ends and cut by them.
func needleText(rng *rand.Rand, s *Scanner, n int) []byte {
	var b strings.Builder
	for b.Len() < n {
		switch rng.Intn(6) {
		case 0:
			t := s.needles[rng.Intn(len(s.needles))].text
			from, to := 0, len(t)
			if rng.Intn(3) == 0 {
				from = rng.Intn(len(t))
			}
			if rng.Intn(3) == 0 {
				to = from + rng.Intn(len(t)-from+1)
			}
			b.Write(t[from:to])
		case 2:
			b.WriteString(randomString(rng, " \n%+=-_/:", 1+rng.Intn(3)))
		case 3:
			// A needle encoded, with what may surround it.
			t := string(s.needles[rng.Intn(len(s.needles))].text)
			t = randomString(rng, alnum, rng.Intn(20)) + t + randomString(rng, urlSafe, rng.Intn(20))
			b.WriteString([]string{
				base64.StdEncoding.EncodeToString([]byte(t)),
				base64.RawURLEncoding.EncodeToString([]byte(t)),
				hex.EncodeToString([]byte(t)),
				url.QueryEscape(t),
			}[rng.Intn(4)])
		case 4:
			// A run of an alphabet, long or short.
			b.WriteString(randomString(rng, []string{alnum, urlSafe, lowHex, alnum + "+/"}[rng.Intn(4)], rng.Intn(80)))
			b.WriteString(randomString(rng, "== ", rng.Intn(3)))
		default:
			b.WriteString(randomString(rng, "abcdefghijklmnopqrstuvwxyz", 1+rng.Intn(8)))
			b.WriteByte(' ')
		}
	}
	return []byte(b.String())
}

// TestPassesAgree: the pass at even offsets decides what the pass at
// every byte does (findings, where the next look starts, the '+' forms),
// on texts where needles start at every offset, whole and cut by the
// text's ends, final or not.
func TestPassesAgree(t *testing.T) {
	even, every := bothPasses(t)
	rng := rand.New(rand.NewSource(47))
	var hits, runs int
	for i := range 3000 {
		text := needleText(rng, even, rng.Intn(300))
		for _, final := range []bool{true, false} {
			got, want := look(even, text, final), look(every, text, final)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("text %d %q (final %v):\neven offsets %+v\nevery byte   %+v", i, text, final, got, want)
			}
			hits += len(want.Found)
		}
		evenRuns, everyRuns := runsBoth(even, text)
		if !reflect.DeepEqual(evenRuns, everyRuns) {
			t.Fatalf("text %d %q: encoded runs\neven offsets %v\nevery byte   %v", i, text, evenRuns, everyRuns)
		}
		runs += len(everyRuns)
	}
	if hits < 1000 || runs < 3000 {
		t.Fatalf("only %d findings and %d encoded runs in the texts: they do not test the passes", hits, runs)
	}
}

func FuzzPassesAgree(f *testing.F) {
	even, every := bothPasses(f)
	rng := rand.New(rand.NewSource(48))
	for range 20 {
		f.Add(needleText(rng, even, rng.Intn(100)), rng.Intn(2) == 0)
	}
	f.Add([]byte("sk-"), false)
	f.Add([]byte("xsk-"), true)
	f.Fuzz(func(t *testing.T, text []byte, final bool) {
		if got, want := look(even, text, final), look(every, text, final); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q (final %v):\neven offsets %+v\nevery byte   %+v", text, final, got, want)
		}
		if evenRuns, everyRuns := runsBoth(even, text); !reflect.DeepEqual(evenRuns, everyRuns) {
			t.Fatalf("%q: encoded runs\neven offsets %v\nevery byte   %v", text, evenRuns, everyRuns)
		}
	})
}

// TestEvenPassMidStream: a Scanner makes its pass at even offsets once
// it has looked at pairsAfter bytes, not before, and a stream that
// crosses that point finds what the pass at every byte finds.
func TestEvenPassMidStream(t *testing.T) {
	rng := rand.New(rand.NewSource(49))
	_, every := bothPasses(t)
	s := New(nil)
	s.noBlocks = true
	s.AddValue("HOST_KEY", "host-key-0123456789abcdef")
	s.AddValue("SPACED", "pass word with spaces")
	text := needleText(rng, every, 3*pairsAfter)
	findings := func(s *Scanner) []Finding {
		st := s.Stream(nil)
		for i := 0; i < len(text); i += 32 << 10 {
			st.Write(text[i:min(len(text), i+32<<10)])
			if i+32<<10 < pairsAfter/2 && s.pairs.Load() != nil {
				t.Fatalf("the pass at even offsets was made after %d bytes", i)
			}
		}
		st.Close()
		return st.Findings()
	}
	got, want := findings(s), findings(every)
	if s.pairs.Load() == nil {
		t.Fatal("the pass at even offsets was not made")
	}
	if len(want) < 1000 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d findings, the pass at every byte %d", len(got), len(want))
	}
}

// TestValueAddedAfterEvenPass: a value registered after the pass at
// even offsets was made is found by it, wherever it starts.
func TestValueAddedAfterEvenPass(t *testing.T) {
	even, every := bothPasses(t)
	even.Scan([]byte("made"))
	if even.pairs.Load() == nil {
		t.Fatal("the pass at even offsets was not made")
	}
	for _, s := range []*Scanner{even, every} {
		s.AddValue("LATE", "late-value-987654")
	}
	for pad := range 4 {
		text := []byte(strings.Repeat("x", pad) + " late-value-987654 " + strings.Repeat("y", 40))
		got, want := even.Scan(text), every.Scan(text)
		if len(want) != 1 || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, the pass at every byte %+v", text, got, want)
		}
	}
}

// TestEvenPassConcurrent: Streams of one Scanner, written at once, make
// its pass at even offsets once between them and find what the pass at
// every byte finds (run with -race, the making is checked too).
func TestEvenPassConcurrent(t *testing.T) {
	_, every := bothPasses(t)
	s := New(nil)
	s.noBlocks = true
	s.AddValue("HOST_KEY", "host-key-0123456789abcdef")
	s.AddValue("SPACED", "pass word with spaces")
	s.evenAfter = 64 << 10
	texts := make([][]byte, 4)
	for i := range texts {
		texts[i] = needleText(rand.New(rand.NewSource(int64(50+i))), every, 256<<10)
	}
	findings := func(s *Scanner, text []byte) []Finding {
		st := s.Stream(nil)
		for i := 0; i < len(text); i += 8 << 10 {
			st.Write(text[i:min(len(text), i+8<<10)])
		}
		st.Close()
		return st.Findings()
	}
	got := make([][]Finding, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Go(func() { got[i] = findings(s, text) })
	}
	wg.Wait()
	for i, text := range texts {
		if want := findings(every, text); !reflect.DeepEqual(got[i], want) {
			t.Errorf("stream %d: %d findings, the pass at every byte %d", i, len(got[i]), len(want))
		}
	}
	if s.pairs.Load() == nil {
		t.Error("the pass at even offsets was not made")
	}
}

// TestPairsBits: an entry of the even pass's table holds no bit but the
// two base64 bits and needled, which evenBigrams's shifts rely on.
func TestPairsBits(t *testing.T) {
	even, _ := bothPasses(t)
	pairs := even.evenPairs(0)
	var needles int
	for h, e := range pairs {
		if e&^(loB64|hiB64|needled) != 0 {
			t.Fatalf("bigram %#04x: entry %#08b", h, e)
		}
		if e&needled != 0 {
			needles++
		}
	}
	if needles == 0 {
		t.Fatal("no bigram is needled")
	}
}
