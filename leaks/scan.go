package leaks

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Encoding says how a secret was written where it was found.
type Encoding string

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
	// keywords are the rules' keywords, each with its rule's index.
	keywords []keyword
}

type keyword struct {
	text []byte
	rule int
}

type hostValue struct {
	name  string
	value []byte
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

// New makes a Scanner with rules (DefaultRules when nil).
func New(rules []Rule) *Scanner {
	if rules == nil {
		rules = DefaultRules()
	}
	s := &Scanner{rules: rules}
	for i, r := range rules {
		for _, k := range r.Keywords {
			if k != "" {
				s.keywords = append(s.keywords, keyword{[]byte(k), i})
			}
		}
	}
	return s
}

// AddValue registers a host secret's value under name: it is found
// exactly, in any of the encodings, whatever its format. Values shorter
// than 8 bytes are ignored (too common to mean anything).
func (s *Scanner) AddValue(name, value string) {
	if len(value) < minValueLen {
		return
	}
	s.values = append(s.values, hostValue{name: name, value: []byte(value)})
}

// secretWords are the words (between underscores) that make an
// environment variable's value a secret for AddEnv: OPENAI_API_KEY and
// GITHUB_TOKEN, not GIT_AUTHOR_NAME or KEYBOARD_LAYOUT.
var secretWords = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PRIVATE"}

// AddEnv registers the value of every variable of env (KEY=VALUE, as
// os.Environ gives it) whose name looks like a secret's: one of its
// words is KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, PRIVATE or the
// like.
func (s *Scanner) AddEnv(env []string) {
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, w := range strings.FieldsFunc(strings.ToUpper(k), func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
			if slices.Contains(secretWords, w) {
				s.AddValue(k, v)
				break
			}
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
	var found []Finding
	add := func(f Finding) {
		if !slices.Contains(found, f) {
			found = append(found, f)
		}
	}
	s.scanView(b, 0, len(b), Raw, add)
	// Decoded views: a finding in one is placed at the encoded run.
	for _, run := range encodedRuns(b) {
		s.scanView(run.decoded, run.offset, run.length, run.enc, add)
	}
	slices.SortFunc(found, func(a, b Finding) int {
		if a.Offset != b.Offset {
			return int(a.Offset - b.Offset)
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return found
}

// scanView applies the rules and the values to view. A raw view's
// findings are where they match; a decoded one's are its run (at, n).
func (s *Scanner) scanView(view []byte, at int64, n int, enc Encoding, add func(Finding)) {
	place := func(rule, name string, off, length int) {
		if enc == Raw {
			add(Finding{Rule: rule, Name: name, Offset: at + int64(off), Length: length, Encoding: Raw})
			return
		}
		add(Finding{Rule: rule, Name: name, Offset: at, Length: n, Encoding: enc})
	}
	for _, v := range s.values {
		for off := 0; ; {
			i := bytes.Index(view[off:], v.value)
			if i < 0 {
				break
			}
			place(HostValue, v.name, off+i, len(v.value))
			off += i + len(v.value)
		}
	}
	for ri, ws := range s.keywordWindows(view) {
		r := s.rules[ri]
		for _, w := range ws {
			for _, m := range r.Regex.FindAllSubmatchIndex(view[w[0]:w[1]], -1) {
				if r.MinEntropy > 0 && entropy(secretPart(view[w[0]:w[1]], m)) < r.MinEntropy {
					continue
				}
				place(r.ID, "", w[0]+m[0], m[1]-m[0])
			}
		}
	}
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

// keywordWindows are, by rule, the merged ranges of b around every
// occurrence of one of the rule's keywords, in which its expression is
// tried. Each keyword is a bytes.Index pass: vectorised, it beats a
// byte-by-byte pass over a table of first bytes here (measured).
func (s *Scanner) keywordWindows(b []byte) map[int][][2]int {
	var byRule map[int][][2]int
	for _, k := range s.keywords {
		for off := 0; ; {
			i := bytes.Index(b[off:], k.text)
			if i < 0 {
				break
			}
			i += off
			if byRule == nil {
				byRule = map[int][][2]int{}
			}
			byRule[k.rule] = append(byRule[k.rule], [2]int{max(0, i-before), min(len(b), i+after)})
			off = i + len(k.text)
		}
	}
	for r, ws := range byRule {
		slices.SortFunc(ws, func(a, b [2]int) int { return a[0] - b[0] })
		merged := ws[:1]
		for _, w := range ws[1:] {
			if last := &merged[len(merged)-1]; w[0] <= last[1] {
				last[1] = max(last[1], w[1])
			} else {
				merged = append(merged, w)
			}
		}
		byRule[r] = merged
	}
	return byRule
}

// run is a stretch of b in an encoding, decoded.
type run struct {
	offset  int64
	length  int
	enc     Encoding
	decoded []byte
}

// The shortest runs worth decoding: shorter ones are ordinary words.
const (
	minBase64 = 24
	minHex    = 40
)

// encodedRuns finds the stretches of b that decode as URL escapes
// (holding a %XX), base64 (standard or URL-safe, at least 24 characters)
// or hex (at least 40 digits), and decodes them.
func encodedRuns(b []byte) []run {
	var runs []run
	// URL escapes: a token (no space) with a %XX or a + in it.
	for off := 0; ; {
		i := bytes.IndexAny(b[off:], "%+")
		if i < 0 {
			break
		}
		i += off
		start, end := i, i
		for start > 0 && !isSpace(b[start-1]) {
			start--
		}
		for end < len(b) && !isSpace(b[end]) {
			end++
		}
		tok := string(b[start:end])
		d, err := url.QueryUnescape(tok)
		if err != nil {
			d, err = url.PathUnescape(tok)
		}
		if err == nil && d != tok {
			runs = append(runs, run{int64(start), end - start, URL, []byte(d)})
		}
		off = end
	}
	// Base64 and hex: maximal runs of their alphabets.
	for i := 0; i < len(b); {
		if class[b[i]]&b64 == 0 {
			i++
			continue
		}
		j := i
		var seen uint8 = hexDigit
		for j < len(b) && class[b[j]]&b64 != 0 {
			c := class[b[j]]
			seen = seen&^hexDigit | seen&c&hexDigit | c&(urlOnly|stdOnly)
			j++
		}
		if j-i < minBase64 {
			i = j
			continue
		}
		k := j
		for k < len(b) && k-j < 2 && b[k] == '=' {
			k++
		}
		switch {
		case seen&hexDigit != 0 && j-i >= minHex:
			n := (j - i) &^ 1
			if d, err := hex.DecodeString(string(b[i : i+n])); err == nil {
				runs = append(runs, run{int64(i), j - i, Hex, d})
			}
		case seen&urlOnly != 0 && seen&stdOnly != 0:
		case seen&urlOnly != 0:
			if d, ok := decodeBase64(base64.URLEncoding, b[i:k]); ok {
				runs = append(runs, run{int64(i), k - i, Base64URL, d})
			}
		default:
			if d, ok := decodeBase64(base64.StdEncoding, b[i:k]); ok {
				runs = append(runs, run{int64(i), k - i, Base64, d})
			}
		}
		i = k
	}
	return runs
}

// decodeBase64 decodes seg, padded or not; a lone last character, which
// carries no whole byte, is dropped.
func decodeBase64(enc *base64.Encoding, seg []byte) ([]byte, bool) {
	s := strings.TrimRight(string(seg), "=")
	if len(s)%4 == 1 {
		s = s[:len(s)-1]
	}
	d, err := enc.WithPadding(base64.NoPadding).DecodeString(s)
	return d, err == nil && len(d) > 0
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
