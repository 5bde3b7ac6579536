package leaks

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Encoding says how a secret was written where it was found.
type Encoding string

// The encodings a secret is looked for in: as written, URL-escaped,
// base64 (standard and URL-safe) and hex.
const (
	Raw       Encoding = "raw"
	URL       Encoding = "url"
	Base64    Encoding = "base64"
	Base64URL Encoding = "base64url"
	Hex       Encoding = "hex"
)

// Finding is one secret found: the rule (or "host-value" for a value the
// host registered, with its name), where the encoded form starts and how
// long it is, and the encoding. Never the secret.
type Finding struct {
	Rule     string   `json:"rule"`
	Name     string   `json:"name,omitempty"`
	Offset   int64    `json:"offset"`
	Length   int      `json:"length"`
	Encoding Encoding `json:"encoding"`
}

// HostValue is the rule id of a registered host value.
const HostValue = "host-value"

// Scanner finds secrets by its rules and the host's values. It is safe
// for concurrent use once built.
type Scanner struct {
	rules  []Rule
	values []hostValue
	// needles are what one pass over a text looks for: the rules'
	// keywords, the host values, and the '+' forms of those with a space
	// (a '+' is a space URL-encoded).
	needles []needle
	// firsts indexes the needles by their first two bytes (b[0] |
	// b[1]<<8); a one-byte needle is under every bigram it may start.
	// firsts.all[c] (second byte 0) also lists every needle starting with
	// c, for a text's last byte, which has no second.
	firsts bigramIndex
	// When every needle is at least 3 bytes long (short is false), the
	// pass can look only at the bigrams at even offsets: a needle
	// starting at p has its first two bytes there (p even) or its second
	// and third (p odd). seconds indexes the needles by their second and
	// third bytes. pairs has an entry per bigram: whether firsts or
	// seconds lists needles under it (needled) and which of its two bytes
	// are in a base64 alphabet (loB64, hiB64), so that the same lookups
	// find the runs that may be encoded. Half the lookups of a pass at
	// every byte, for a table twice as full, and no second pass for the
	// runs: about 0.7x the CPU of the two passes on build logs and on
	// binaries (BenchmarkPasses).
	//
	// seconds and pairs are made (about 0.2 ms) once the Scanner has
	// looked at evenAfter bytes (pairsAfter; tests set it): most Scanners
	// look at a command's arguments and a little output, and a pass at
	// every byte costs them less.
	seconds   bigramIndex
	short     bool
	evenAfter int64
	looked    atomic.Int64
	makePairs sync.Once
	pairs     atomic.Pointer[[1 << 16]uint8]
	// blocks are the tables of the block pass (blocks.go), which a
	// Scanner makes instead of the two above where the processor has it
	// (blockPassOK): every needle is added to them as it is registered,
	// into the bucket buckets gives its first two bytes. noBlocks (tests)
	// makes the others.
	blocks   *blockTables
	buckets  map[uint16]uint8
	noBlocks bool
}

// pairsAfter is how many bytes a Scanner looks at before it makes the
// table of the pass at even offsets.
const pairsAfter = 1 << 20

// The bits of an entry of Scanner.pairs.
const (
	loB64   = 1 << 0 // the bigram's first byte is in a base64 alphabet
	hiB64   = 1 << 1 // its second is
	needled = 1 << 7 // firsts or seconds lists needles under it
)

// pairClasses is the base64 bits of every bigram, from which each
// Scanner's pairs is made.
var pairClasses = sync.OnceValue(func() *[1 << 16]uint8 {
	t := new([1 << 16]uint8)
	for h := range t {
		if class[h&0xff]&b64 != 0 {
			t[h] |= loB64
		}
		if class[h>>8]&b64 != 0 {
			t[h] |= hiB64
		}
	}
	return t
})

// bigramIndex lists needles by a bigram of theirs. set is one entry per
// bigram: the pass looks one up for each bigram it meets, and compares
// needles only where one is set. Bytes, not bits: testing a bit takes a
// shift by a variable, slower here than the bigger table (the part text
// uses stays in the cache).
//
// A set entry is also where the pass finds its list: k below manyBigrams
// is lists[k-1], a copy of all's; manyBigrams says to look in all, for
// the bigrams set after the first 254. Ordinary text meets some set
// bigram every hundred bytes or so ("di" of discord), and a map lookup
// there cost more than the pass.
type bigramIndex struct {
	set   *[1 << 16]uint8
	lists [][]int32
	all   map[uint16][]int32
}

func newBigramIndex() bigramIndex {
	return bigramIndex{set: new([1 << 16]uint8), all: map[uint16][]int32{}}
}

// manyBigrams marks a set bigram whose list is in all only.
const manyBigrams = 255

// candidates are the needles bigram h (set) stands for.
func (x *bigramIndex) candidates(h uint16) []int32 {
	if k := x.set[h]; k != manyBigrams {
		return x.lists[k-1]
	}
	return x.all[h]
}

// add sets bigram h and lists needle i under it.
func (x *bigramIndex) add(h uint16, i int32) {
	if x.set[h] == 0 {
		x.set[h] = manyBigrams
		if len(x.lists) < manyBigrams-1 {
			x.lists = append(x.lists, nil)
			x.set[h] = uint8(len(x.lists))
		}
	}
	x.list(h, i)
}

// list lists needle i under h, and in h's copy if it has one; it does
// not set h.
func (x *bigramIndex) list(h uint16, i int32) {
	x.all[h] = append(x.all[h], i)
	if k := x.set[h]; k != 0 && k != manyBigrams {
		x.lists[k-1] = x.all[h]
	}
}

type hostValue struct {
	name  string
	value []byte
}

type needleKind uint8

const (
	keywordNeedle needleKind = iota // index is the rule's
	valueNeedle                     // index is the value's
	plusNeedle                      // a token holding it is URL-decoded
)

type needle struct {
	text  []byte
	kind  needleKind
	index int
	// head is text's first 8 bytes (fewer if it is shorter, the rest of
	// mask 0): most comparisons fail in one load.
	head, mask uint64
}

func newNeedle(text []byte, kind needleKind, index int) needle {
	nd := needle{text: text, kind: kind, index: index}
	for i, c := range text[:min(8, len(text))] {
		nd.head |= uint64(c) << (8 * i)
		nd.mask |= 0xff << (8 * i)
	}
	return nd
}

// The shortest value worth registering: shorter ones would be found in
// ordinary text.
const minValueLen = 8

// window bounds: the bytes before a keyword and after it in which its
// rule's expression is tried.
const (
	before = 64
	after  = 512
)

// New makes a Scanner with rules. With nil it has the default rules
// (DefaultRules), each expression compiled only once a keyword first calls
// for it.
func New(rules []Rule) *Scanner {
	if rules == nil {
		rules = defaultRules()
	}
	s := &Scanner{rules: rules, firsts: newBigramIndex(), evenAfter: pairsAfter,
		blocks: newBlockTables(), buckets: map[uint16]uint8{}}
	for i, r := range rules {
		for _, k := range r.Keywords {
			if k != "" {
				s.addNeedle([]byte(k), keywordNeedle, i)
			}
		}
	}
	return s
}

// addNeedle registers text for the pass, and its '+' form if it holds a
// space: URL-decoding a token whose only escapes are '+' can reveal only
// something with a space in it, so such tokens are decoded only where
// one occurs.
func (s *Scanner) addNeedle(text []byte, kind needleKind, index int) {
	i := int32(len(s.needles))
	s.needles = append(s.needles, newNeedle(text, kind, index))
	first := uint16(text[0])
	if len(text) == 1 {
		for c := range 256 {
			s.firsts.add(first|uint16(c)<<8, i)
		}
	} else {
		s.firsts.add(first|uint16(text[1])<<8, i)
	}
	if len(text) > 1 && text[1] != 0 {
		s.firsts.list(first, i)
	}
	if len(text) < 3 {
		s.short = true
	} else {
		s.blocks.addNeedle(text, s.bucketOf(text))
		if pairs := s.pairs.Load(); pairs != nil {
			s.addSecond(pairs, i)
		}
	}
	if kind != plusNeedle && bytes.IndexByte(text, ' ') >= 0 {
		s.addNeedle(bytes.ReplaceAll(text, []byte(" "), []byte("+")), plusNeedle, 0)
	}
}

// blockTables are the tables of the block pass, nil where it is not
// made: the processor has none, or a needle is shorter than 3 bytes.
func (s *Scanner) blockTables() *blockTables {
	if !blockPassOK || s.short || s.noBlocks {
		return nil
	}
	return s.blocks
}

// evenPairs is the table of the pass at even offsets, nil while the
// pass at every byte is to be used: a needle is shorter than 3 bytes, or
// the Scanner has looked at fewer than evenAfter bytes (counting n, what
// it is about to look at).
func (s *Scanner) evenPairs(n int) *[1 << 16]uint8 {
	if s.short {
		return nil
	}
	if pairs := s.pairs.Load(); pairs != nil {
		return pairs
	}
	if s.looked.Add(int64(n)) < s.evenAfter {
		return nil
	}
	s.makePairs.Do(func() {
		pairs := new([1 << 16]uint8)
		*pairs = *pairClasses()
		s.seconds = newBigramIndex()
		for i := range s.needles {
			s.addSecond(pairs, int32(i))
		}
		s.pairs.Store(pairs)
	})
	return s.pairs.Load()
}

// addSecond lists needle i (3 bytes or more) in seconds, and marks its
// first and second bigrams in pairs.
func (s *Scanner) addSecond(pairs *[1 << 16]uint8, i int32) {
	t := s.needles[i].text
	first, second := uint16(t[0])|uint16(t[1])<<8, uint16(t[1])|uint16(t[2])<<8
	s.seconds.add(second, i)
	pairs[first] |= needled
	pairs[second] |= needled
}

// AddValue registers a host secret's value under name: it is found
// exactly, in any of the encodings, whatever its format. Values shorter
// than 8 bytes are ignored (too common to mean anything).
func (s *Scanner) AddValue(name, value string) {
	if len(value) < minValueLen {
		return
	}
	s.values = append(s.values, hostValue{name: name, value: []byte(value)})
	s.addNeedle([]byte(value), valueNeedle, len(s.values)-1)
}

// secretWords are the words (between underscores) that make an
// environment variable's value a secret for AddEnv: OPENAI_API_KEY and
// GITHUB_TOKEN, not GIT_AUTHOR_NAME or KEYBOARD_LAYOUT.
var secretWords = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PRIVATE"}

// locationWords, as a name's last word, make its value where a secret is,
// not one: SSH_AUTH_SOCK, GIT_ASKPASS, PRIVATE_KEY_FILE, AWS_CONFIG_PATH.
// The sandbox's masks guard what they name; a command naming them is no
// leak.
var locationWords = []string{"SOCK", "SOCKET", "FILE", "PATH", "DIR", "ASKPASS", "HOME", "URL"}

// AddEnv registers the value of every variable of env (KEY=VALUE, as
// os.Environ gives it) whose name looks like a secret's: one of its
// words is KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, PRIVATE or the
// like. Left out are values that say where a secret is rather than being
// one: the name's last word is SOCK, FILE, PATH, DIR or the like, or the
// value is an absolute path (GOOGLE_APPLICATION_CREDENTIALS).
func (s *Scanner) AddEnv(env []string) {
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(v, "/") {
			continue
		}
		words := strings.FieldsFunc(strings.ToUpper(k), func(r rune) bool { return r == '_' || r == '-' || r == '.' })
		if len(words) == 0 || slices.Contains(locationWords, words[len(words)-1]) {
			continue
		}
		if slices.ContainsFunc(words, func(w string) bool { return slices.Contains(secretWords, w) }) {
			s.AddValue(k, v)
		}
	}
}

// DefaultScanner is New(nil) with the host's environment registered.
func DefaultScanner() *Scanner {
	s := New(nil)
	s.AddEnv(os.Environ())
	return s
}

// Scan finds the secrets in b, raw and decoded, sorted by offset.
func (s *Scanner) Scan(b []byte) []Finding {
	sc := scan{s: s, b: b, final: true}
	sc.run()
	if len(sc.found) == 0 {
		return nil
	}
	fs := make([]Finding, len(sc.found))
	for i, f := range sc.found {
		fs[i] = f.Finding
	}
	return fs
}

// scan is one look at b: all of what Scan is given, or what a Stream or
// a Redactor holds, which more may follow (final false).
type scan struct {
	s     *Scanner
	b     []byte
	final bool

	found []found
	// keep is where, unless final, the next look must start (with what
	// follows b appended) to see whole what b's end may have cut: an
	// open finding, a keyword window that may still grow, a needle the
	// end cuts, the last token, the bytes before a keyword yet to come.
	// It is a token's start, so that no run and no \b is cut, but never
	// more than Overlap bytes back.
	keep int

	// The view being scanned: b, or a run of it decoded.
	at, length int
	enc        Encoding
	wins       [][]window // by rule, the view's merged keyword windows
	plus       []int      // where '+' forms occur in b
	runs       []window   // b's runs of a base64 alphabet, minBase64 long or more
	passRuns   bool       // runs were found by the pass for the needles (block or even)
	decoded    []byte     // reused for every run
}

// window is a stretch of a view in which a rule's expression is tried,
// not cut to the view's bounds.
type window struct{ from, to int }

// found is a Finding with what a look that more may follow needs of it.
type found struct {
	Finding
	// from is where what it was found in starts in b: its match's keyword
	// window (below 0 if the window reaches before b), or itself.
	from int
	// open: it may still change with what follows: it touches b's end
	// (its run, token or match may go on), or its keyword window may
	// still grow (a keyword within after+before of the end would merge
	// into it).
	open bool
}

// run scans b raw, and every run in it that may be encoded decoded; then
// sets keep and sorts the findings.
func (sc *scan) run() {
	n := len(sc.b)
	sc.keep = n
	sc.view(sc.b, 0, n, Raw)
	if !sc.passRuns {
		encodedRuns(sc.b, sc.decode)
	} else {
		urlRuns(sc.b, sc.decode)
		for _, r := range sc.runs {
			alphabetRun(sc.b, r.from, r.to, sc.decode)
		}
	}
	end := 0
	for _, p := range sc.plus {
		if p < end {
			continue
		}
		var start int
		start, end = token(sc.b, p)
		// A token with a '%' in it is decoded as such, or is not URL.
		if bytes.IndexByte(sc.b[start:end], '%') < 0 {
			sc.decode(start, end, URL)
		}
	}
	if sc.final {
		sc.keep = n
	} else {
		// A keyword still to come may have its match start up to before
		// bytes back; and back to a token's start (from the end, that
		// keeps the last token, which may go on).
		floor := max(0, n-Overlap)
		k := min(sc.keep, n-before)
		for k > floor && !isSpace(sc.b[k-1]) {
			k--
		}
		sc.keep = max(k, floor)
	}
	slices.SortFunc(sc.found, func(a, b found) int {
		if a.Offset != b.Offset {
			return int(a.Offset - b.Offset)
		}
		return strings.Compare(a.Rule, b.Rule)
	})
}

// news are the look's findings not yet told, at stream offsets (b
// starting at base), which it records in told: those settled (not open,
// or open but what they were found in about to be dropped, so told as
// they are), not found again in a keyword window that lost its start to
// an earlier look (cut: what it held was told when it was whole). It
// forgets what cannot be found again.
func (sc *scan) news(base int64, cut bool, told map[Finding]bool) []Finding {
	var fs []Finding
	for _, f := range sc.found {
		if !sc.final && f.open && max(0, f.from) >= sc.keep || cut && f.from < 0 {
			continue
		}
		g := f.Finding
		g.Offset += base
		if !told[g] {
			told[g] = true
			fs = append(fs, g)
		}
	}
	for g := range told {
		if g.Offset < base+int64(sc.keep) {
			delete(told, g)
		}
	}
	return fs
}

// view applies the rules and the values to v: b itself (enc Raw), or the
// run of b at at, length long, decoded.
func (sc *scan) view(v []byte, at, length int, enc Encoding) {
	sc.at, sc.length, sc.enc = at, length, enc
	for i := range sc.wins {
		sc.wins[i] = sc.wins[i][:0]
	}
	if len(v) == 0 {
		return
	}
	s := sc.s
	i := 0
	if t := s.blockTables(); t != nil {
		i = sc.blockPass(t, v, enc == Raw)
		sc.passRuns = sc.passRuns || enc == Raw
	} else if pairs := s.evenPairs(len(v)); pairs != nil {
		i = sc.evenBigrams(pairs, v, enc == Raw)
		sc.passRuns = sc.passRuns || enc == Raw
	}
	// At every byte from i: all of v when there is neither the block pass
	// nor the even one (a needle shorter than 3 bytes; for the even one,
	// fewer than evenAfter bytes looked at yet), else the few bytes they
	// leave. Eight bigrams at a time, read from one word, tested
	// together: the tests do not wait on each other, and one branch in
	// 40 or so is taken (0.3% of the bigrams of build logs are set).
	set := s.firsts.set
	for ; i+9 <= len(v); i += 8 {
		w := binary.LittleEndian.Uint64(v[i:])
		h7 := uint16(w>>56) | uint16(v[i+8])<<8
		if set[uint16(w)]|set[uint16(w>>8)]|set[uint16(w>>16)]|set[uint16(w>>24)]|
			set[uint16(w>>32)]|set[uint16(w>>40)]|set[uint16(w>>48)]|set[h7] != 0 {
			for j := range 8 {
				if h := uint16(v[i+j]) | uint16(v[i+j+1])<<8; set[h] != 0 {
					sc.hit(v, i+j, s.firsts.candidates(h))
				}
			}
		}
	}
	for ; i+1 < len(v); i++ {
		if h := uint16(v[i]) | uint16(v[i+1])<<8; set[h] != 0 {
			sc.hit(v, i, s.firsts.candidates(h))
		}
	}
	sc.hit(v, len(v)-1, s.firsts.all[uint16(v[len(v)-1])])
	for ri, ws := range sc.wins {
		r := &s.rules[ri]
		for _, w := range ws {
			from, to := max(0, w.from), min(len(v), w.to)
			open := w.to+before > len(v)
			if open && enc == Raw {
				sc.keep = min(sc.keep, from)
			}
			for _, m := range r.regex().FindAllSubmatchIndex(v[from:to], -1) {
				if r.MinEntropy > 0 && entropy(secretPart(v[from:to], m)) < r.MinEntropy {
					continue
				}
				sc.place(r.ID, "", from+m[0], m[1]-m[0], w.from, open)
			}
		}
	}
}

// evenBigrams finds the needles (every one at least 3 bytes long) that
// start in v before the offset it returns, in order, looking only at the
// bigrams at even offsets: those of 16 bytes are the 16-bit halves of
// two words, tested together. At an even q where a needle's bigram is,
// the needles listed under it as their second and third bytes are
// compared at q-1, then those listed as their first two at q. Up to the
// returned offset, every start is covered once: an even one by its first
// bigram, an odd one by its second.
//
// With findRuns, the same lookups' base64 bits find v's runs of a
// base64 alphabet at least minBase64 long, whole, into sc.runs: the
// sixteen bits of a block say where each ends and starts, so most blocks
// take no branch but the one that says no run of them is long enough.
// (Passing over the blocks that no long run can reach, tested from the
// same bits, took more on text than it saved: the test is a branch that
// text's words make hard to predict.)
func (sc *scan) evenBigrams(pairs *[1 << 16]uint8, v []byte, findRuns bool) int {
	if findRuns {
		sc.runs = sc.runs[:0]
	}
	start := 0 // where the run reaching the block, if any, starts
	q := 0
	for ; q+16 <= len(v); q += 16 {
		w := binary.LittleEndian.Uint64(v[q:])
		x := binary.LittleEndian.Uint64(v[q+8:])
		e0, e1, e2, e3 := pairs[uint16(w)], pairs[uint16(w>>16)], pairs[uint16(w>>32)], pairs[uint16(w>>48)]
		e4, e5, e6, e7 := pairs[uint16(x)], pairs[uint16(x>>16)], pairs[uint16(x>>32)], pairs[uint16(x>>48)]
		if (e0|e1|e2|e3|e4|e5|e6|e7)&needled != 0 {
			sc.evenHits(v, q, uint(e0>>7)|uint(e1>>7)<<1|uint(e2>>7)<<2|uint(e3>>7)<<3|
				uint(e4>>7)<<4|uint(e5>>7)<<5|uint(e6>>7)<<6|uint(e7>>7)<<7)
		}
		if !findRuns {
			continue
		}
		// Each lane's two bits, 2k up: the shifts of a byte drop the
		// needled bit of all but the first lane of each four.
		m := uint16(e0&3|e1<<2|e2<<4|e3<<6) | uint16(e4&3|e5<<2|e6<<4|e7<<6)<<8
		if m == 0xffff {
			continue // the run goes on
		}
		// The run reaching the block ends at its first byte out of the
		// alphabets; one starts after its last. A run within the block
		// is too short.
		if end := q + bits.TrailingZeros16(^m); end-start >= minBase64 {
			sc.runs = append(sc.runs, window{start, end})
		}
		start = q + 16 - bits.LeadingZeros16(^m)
	}
	if findRuns {
		// A run starting in the last bytes (fewer than 16) is too short.
		end := q
		for end < len(v) && class[v[end]]&b64 != 0 {
			end++
		}
		if end-start >= minBase64 {
			sc.runs = append(sc.runs, window{start, end})
		}
	}
	// The odd start q-1 needs the bigram at q, which the loop did not
	// reach: the pass at every byte goes on from there.
	return max(0, q-1)
}

// evenHits compares the needles listed under the bigrams at the even
// offsets of the 16 bytes of v at q whose bit is set in lanes (bit k for
// offset q+2k), in order of their starts.
func (sc *scan) evenHits(v []byte, q int, lanes uint) {
	s := sc.s
	for ; lanes != 0; lanes &= lanes - 1 {
		j := q + 2*bits.TrailingZeros(lanes)
		h := uint16(v[j]) | uint16(v[j+1])<<8
		if j > 0 && s.seconds.set[h] != 0 {
			sc.hit(v, j-1, s.seconds.candidates(h))
		}
		if s.firsts.set[h] != 0 {
			sc.hit(v, j, s.firsts.candidates(h))
		}
	}
}

// hit compares the needles of cands with v at p.
func (sc *scan) hit(v []byte, p int, cands []int32) {
	for _, i := range cands {
		nd := &sc.s.needles[i]
		if p+8 <= len(v) && binary.LittleEndian.Uint64(v[p:])&nd.mask != nd.head {
			continue // nor is v[p:], 8 bytes or more, a part of it
		}
		if !bytes.HasPrefix(v[p:], nd.text) {
			// A needle the end cuts may go on in what follows.
			if sc.enc == Raw && len(v)-p < len(nd.text) && bytes.HasPrefix(nd.text, v[p:]) {
				from := p
				if nd.kind == keywordNeedle {
					from -= before
				}
				sc.keep = min(sc.keep, max(0, from))
			}
			continue
		}
		switch nd.kind {
		case keywordNeedle:
			if sc.wins == nil {
				sc.wins = make([][]window, len(sc.s.rules))
			}
			// Hits come in order: a window meets the last one or follows it.
			ws := sc.wins[nd.index]
			if len(ws) > 0 && p-before <= ws[len(ws)-1].to {
				ws[len(ws)-1].to = p + after
			} else {
				sc.wins[nd.index] = append(ws, window{p - before, p + after})
			}
		case valueNeedle:
			sc.place(HostValue, sc.s.values[nd.index].name, p, len(nd.text), p, false)
		case plusNeedle:
			if sc.enc == Raw {
				sc.plus = append(sc.plus, p)
			}
		}
	}
}

// place adds a finding at off, n long, in the view: there in a raw view,
// the whole run in a decoded one; from and open as in found (open is
// set too if it touches the end).
func (sc *scan) place(rule, name string, off, n, from int, open bool) {
	f := found{Finding{Rule: rule, Name: name, Offset: int64(off), Length: n, Encoding: Raw}, from, open}
	if sc.enc != Raw {
		f.Offset, f.Length, f.Encoding = int64(sc.at), sc.length, sc.enc
		f.from, f.open = sc.at, false
	}
	if int(f.Offset)+f.Length == len(sc.b) {
		f.open = true
	}
	if f.open {
		sc.keep = min(sc.keep, max(0, f.from))
	}
	i := slices.IndexFunc(sc.found, func(g found) bool { return g.Finding == f.Finding })
	if i < 0 {
		sc.found = append(sc.found, f)
		return
	}
	g := &sc.found[i]
	g.from, g.open = min(g.from, f.from), g.open || f.open
}

// secretPart is the first matched group of m in b, or the whole match.
func secretPart(b []byte, m []int) []byte {
	for g := 1; 2*g+1 < len(m); g++ {
		if m[2*g] >= 0 {
			return b[m[2*g]:m[2*g+1]]
		}
	}
	return b[m[0]:m[1]]
}

// decode scans the run of b from from to to, decoded from enc, if it
// decodes.
func (sc *scan) decode(from, to int, enc Encoding) {
	src := sc.b[from:to]
	var ok bool
	switch enc {
	case URL:
		sc.decoded, ok = unescapeURL(sc.decoded[:0], src)
	case Hex:
		n := len(src) &^ 1
		sc.decoded = slices.Grow(sc.decoded[:0], n/2)[:n/2]
		_, err := hex.Decode(sc.decoded, src[:n])
		ok = err == nil
	case Base64:
		sc.decoded, ok = decodeBase64(sc.decoded[:0], base64.RawStdEncoding, src)
	case Base64URL:
		sc.decoded, ok = decodeBase64(sc.decoded[:0], base64.RawURLEncoding, src)
	}
	if ok {
		sc.view(sc.decoded, from, to-from, enc)
	}
}

// The shortest runs worth decoding: shorter ones are ordinary words.
const (
	minBase64 = 24
	minHex    = 40
)

// encodedRuns calls f with the stretches of b that may be encoded: the
// tokens (no space) holding a %XX (urlRuns), and the runs of the base64
// alphabets (standard or URL-safe, at least 24 characters, with their
// padding) or of hex digits (at least 40), found byte by byte, as a
// Scanner with a needle shorter than 3 bytes does (the others find them
// in the pass for the needles).
func encodedRuns(b []byte, f func(from, to int, enc Encoding)) {
	urlRuns(b, f)
	// A run is at least minBase64 long: look at the next minBase64 bytes
	// from the last back, and at the first not in the alphabet (most
	// often within a word's length) skip past it, no run holding it. Most
	// bytes are never looked at.
	for i := 0; i+minBase64 <= len(b); {
		// No run starts before i.
		j := i + minBase64 - 1
		for j >= i && class[b[j]]&b64 != 0 {
			j--
		}
		if j >= i {
			i = j + 1
			continue
		}
		end := i + minBase64
		for end < len(b) && class[b[end]]&b64 != 0 {
			end++
		}
		i = alphabetRun(b, i, end, f)
	}
}

// urlRuns calls f with the tokens of b (between spaces) holding a %XX.
func urlRuns(b []byte, f func(from, to int, enc Encoding)) {
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '%')
		if i < 0 {
			return
		}
		i += off
		if i+2 >= len(b) || class[b[i+1]]&hexDigit == 0 || class[b[i+2]]&hexDigit == 0 {
			off = i + 1
			continue
		}
		start, end := token(b, i)
		f(start, end, URL)
		off = end
	}
}

// alphabetRun calls f with the run of b from start to end (all of it in
// a base64 alphabet, no such byte either side, at least minBase64 long)
// as hex if it is hex digits only and long enough, else as base64url or
// base64 with its padding, unless it mixes the two alphabets; it returns
// where the run ends with its padding.
func alphabetRun(b []byte, start, end int, f func(from, to int, enc Encoding)) int {
	// What every byte is and what some byte is: two chains that do not
	// wait on each other.
	every, some := hexDigit, uint8(0)
	for _, c := range b[start:end] {
		k := class[c]
		every &= k
		some |= k
	}
	seen := every&hexDigit | some&(urlOnly|stdOnly)
	pad := end
	for pad < len(b) && pad-end < 2 && b[pad] == '=' {
		pad++
	}
	switch {
	case seen&hexDigit != 0 && end-start >= minHex:
		f(start, end, Hex)
	case seen&urlOnly != 0 && seen&stdOnly != 0:
	case seen&urlOnly != 0:
		f(start, pad, Base64URL)
	default:
		f(start, pad, Base64)
	}
	return pad
}

// token is the stretch of b around i between spaces.
func token(b []byte, i int) (start, end int) {
	start, end = i, i
	for start > 0 && !isSpace(b[start-1]) {
		start--
	}
	for end < len(b) && !isSpace(b[end]) {
		end++
	}
	return start, end
}

// unescapeURL appends tok URL-decoded to dst, as url.QueryUnescape would
// (a '+' is a space), without making strings of every token.
func unescapeURL(dst, tok []byte) ([]byte, bool) {
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; c {
		case '%':
			if i+2 >= len(tok) || class[tok[i+1]]&hexDigit == 0 || class[tok[i+2]]&hexDigit == 0 {
				return dst, false
			}
			dst = append(dst, unhex(tok[i+1])<<4|unhex(tok[i+2]))
			i += 2
		case '+':
			dst = append(dst, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// decodeBase64 appends seg decoded to dst, padded or not; a lone last
// character, which carries no whole byte, is dropped.
func decodeBase64(dst []byte, enc *base64.Encoding, seg []byte) ([]byte, bool) {
	seg = bytes.TrimRight(seg, "=")
	if len(seg)%4 == 1 {
		seg = seg[:len(seg)-1]
	}
	dst = slices.Grow(dst, enc.DecodedLen(len(seg)))[:enc.DecodedLen(len(seg))]
	n, err := enc.Decode(dst, seg)
	return dst[:n], err == nil && n > 0
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '"' || c == '\''
}

// The byte classes of the encodings' alphabets.
const (
	b64      uint8 = 1 << iota // either base64 alphabet
	hexDigit                   // 0-9a-fA-F
	urlOnly                    // - and _
	stdOnly                    // + and /
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case 'A' <= c && c <= 'F', 'a' <= c && c <= 'f', '0' <= c && c <= '9':
			t[c] = b64 | hexDigit
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
			t[c] = b64
		case c == '-' || c == '_':
			t[c] = b64 | urlOnly
		case c == '+' || c == '/':
			t[c] = b64 | stdOnly
		}
	}
	return t
}()
