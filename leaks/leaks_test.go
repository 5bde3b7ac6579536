package leaks

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// randomString draws n characters of alphabet from rng: keys look like
// this, high in entropy.
func randomString(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.Intn(len(alphabet))]
	}
	return string(b)
}

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	urlSafe = alnum + "-_"
	lowHex  = "0123456789abcdef"
)

// samples are a real-looking secret per rule, and text of the same
// shape that is not one.
func samples() map[string]struct{ yes, no []string } {
	rng := rand.New(rand.NewSource(19))
	r := func(alpha string, n int) string { return randomString(rng, alpha, n) }
	return map[string]struct{ yes, no []string }{
		"anthropic": {
			yes: []string{"sk-ant-api03-" + r(urlSafe, 95), "sk-ant-admin01-" + r(urlSafe, 93)},
			no:  []string{"sk-ant-api03-short", "sk-ant-api03-" + strings.Repeat("x", 95)},
		},
		"openrouter": {
			yes: []string{"sk-or-v1-" + r(lowHex, 64)},
			no:  []string{"sk-or-v1-" + r(lowHex, 20), "sk-or-v1-" + strings.Repeat("0", 64)},
		},
		"openai": {
			yes: []string{"sk-proj-" + r(urlSafe, 120), "sk-" + r(alnum, 48)},
			no:  []string{"task-" + r(alnum, 48), "sk-" + strings.Repeat("a", 48), "sk-short"},
		},
		"private-key": {
			yes: []string{"-----BEGIN RSA PRIVATE KEY-----\nMIIE", "-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----"},
			no:  []string{"-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----"},
		},
		"github": {
			yes: []string{"ghp_" + r(alnum, 36), "github_pat_" + r(alnum+"_", 82)},
			no:  []string{"ghp_" + r(alnum, 10), "xghp_" + r(alnum, 36), "ghp_" + strings.Repeat("A", 36)},
		},
		"google": {
			yes: []string{"AIza" + r(urlSafe, 35)},
			no:  []string{"AIza" + r(urlSafe, 20), "AIza" + strings.Repeat("b", 35)},
		},
		"slack": {
			yes: []string{"xoxb-1234567890-1234567890123-" + r(alnum, 24), "xapp-1-A01B2C3D4E5-1234567890123-" + r(lowHex, 64)},
			no:  []string{"xoxb-123-456-abc", "xoxp-1234567890-1234567890123-" + r(alnum, 24)},
		},
		"discord": {
			yes: []string{"DISCORD_TOKEN=M" + r(urlSafe, 23) + "." + r(urlSafe, 6) + "." + r(urlSafe, 27), "Bot N" + r(urlSafe, 24) + "." + r(urlSafe, 6) + "." + r(urlSafe, 38)},
			no:  []string{"discord: version 1.2.3", "Bot M" + strings.Repeat("a", 23) + "." + strings.Repeat("b", 6) + "." + strings.Repeat("c", 27)},
		},
		"telegram": {
			yes: []string{"123456789:AA" + r(urlSafe, 33)},
			no:  []string{"12:AA" + r(urlSafe, 33), "123456789:AB" + r(urlSafe, 33)},
		},
		"brave": {
			yes: []string{"BSA" + r(urlSafe, 28)},
			no:  []string{"BSA" + r(urlSafe, 10), "BSA" + strings.Repeat("z", 28)},
		},
	}
}

func rulesFound(fs []Finding) map[string]bool {
	m := map[string]bool{}
	for _, f := range fs {
		m[f.Rule] = true
	}
	return m
}

// TestRules: every rule finds its secrets alone, in text, and in each
// encoding; finds none of the look-alikes; and a Finding never holds the
// secret.
func TestRules(t *testing.T) {
	s := New(nil)
	for id, c := range samples() {
		for _, secret := range c.yes {
			for enc, text := range map[Encoding]string{
				Raw:       "log: using " + secret + " now",
				URL:       "GET /x?key=" + url.QueryEscape(secret) + " HTTP/1.1",
				Base64:    "data " + base64.StdEncoding.EncodeToString([]byte(secret)) + " end",
				Base64URL: "data " + base64.RawURLEncoding.EncodeToString([]byte("id: "+secret)) + " end",
				Hex:       "dump " + hex.EncodeToString([]byte(secret)) + "\n",
			} {
				if enc == URL && url.QueryEscape(secret) == secret {
					continue // nothing to escape: the raw case
				}
				fs := s.Scan([]byte(text))
				ok := false
				for _, f := range fs {
					// Without - or _ URL-safe base64 is the standard kind.
					if f.Rule == id && (f.Encoding == enc || enc == Base64URL && f.Encoding == Base64) {
						ok = true
					}
					if f.Offset < 0 || int(f.Offset)+f.Length > len(text) {
						t.Errorf("%s %s: finding out of bounds %+v", id, enc, f)
					}
				}
				if !ok {
					t.Errorf("%s in %s: not found in %q (found %+v)", id, enc, text, fs)
				}
				// One secret, one rule: an Anthropic key is not an
				// OpenAI key too, though both start with sk-.
				if enc == Raw {
					if found := rulesFound(fs); len(found) != 1 {
						t.Errorf("%s: found by %v", id, found)
					}
				}
				if strings.Contains(fmt.Sprintf("%+v", fs), secret) {
					t.Errorf("%s: a Finding holds the secret", id)
				}
			}
		}
		for _, look := range c.no {
			if rulesFound(s.Scan([]byte("x " + look + " y")))[id] {
				t.Errorf("%s: a look-alike matched: %q", id, look)
			}
		}
	}
}

// writeParts writes text to w in parts cut at cuts (in order), then
// closes it.
func writeParts(w io.WriteCloser, text string, cuts ...int) {
	at := 0
	for _, c := range append(cuts, len(text)) {
		w.Write([]byte(text[at:c]))
		at = c
	}
	w.Close()
}

// everyByte are the cuts of a text n long into one-byte writes.
func everyByte(n int) []int {
	cuts := make([]int, 0, n)
	for i := 1; i < n; i++ {
		cuts = append(cuts, i)
	}
	return cuts
}

// TestSplitAtEveryByte: a secret written in parts (two parts cut at
// every byte, three parts cut at every two bytes, a byte at a time) is
// found once, at its place in the stream, whole: raw and encoded, for
// rules and registered host values alike, the stream's end too.
func TestSplitAtEveryByte(t *testing.T) {
	s := New(nil)
	hostKey := "host-own-key-" + randomString(rand.New(rand.NewSource(7)), alnum, 30)
	s.AddValue("MY_API_KEY", hostKey)
	// Longer than the bytes kept before a keyword, in words: kept whole
	// while a part of it ends what was written; URL-encoded, '+' only.
	phrase := "a long pass phrase with spaces that is longer than sixty four bytes"
	s.AddValue("PHRASE", phrase)
	c := samples()
	cases := map[string]string{
		"phrase raw":        "say " + phrase + " ok",
		"phrase url":        "q=" + url.QueryEscape(phrase) + "\n",
		"github raw":        "build ok\n" + c["github"].yes[0] + "\nmore",
		"github raw at end": "build ok\n" + c["github"].yes[0],
		"anthropic base64":  "auth: " + base64.StdEncoding.EncodeToString([]byte(c["anthropic"].yes[0])) + "\n",
		"private key url":   "k=" + url.QueryEscape(c["private-key"].yes[1]),
		"private key raw":   "key:\n" + c["private-key"].yes[0] + "\n",
		"discord raw":       "say " + c["discord"].yes[1] + "\n",
		// Its match ends before sk- once the word goes on past 38.
		"discord word goes on": "x=" + c["discord"].yes[0] + "deadbeefsk-or\n",
		"host value raw":       "env says " + hostKey + " done",
		"host value hex":       "x=" + hex.EncodeToString([]byte(hostKey)) + "\n",
		"host value url":       "q=" + url.QueryEscape("key "+hostKey+"&") + "\n",
		"host value base64url": "t " + base64.URLEncoding.EncodeToString([]byte("a "+hostKey)) + " .",
		"two values":           hostKey + " " + hostKey,
	}
	for name, text := range cases {
		want := s.Scan([]byte(text))
		if len(want) == 0 {
			t.Fatalf("%s: nothing found whole", name)
		}
		check := func(cuts ...int) {
			t.Helper()
			st := s.Stream(nil)
			writeParts(st, text, cuts...)
			got := st.Findings()
			slices.SortFunc(got, func(a, b Finding) int { return int(a.Offset - b.Offset) })
			if !slices.Equal(got, want) {
				t.Errorf("%s cut at %v: found %+v, want %+v", name, cuts, got, want)
			}
		}
		for i := 0; i <= len(text); i++ {
			check(i)
			for j := i; j <= len(text); j += 2 {
				check(i, j)
			}
		}
		check(everyByte(len(text))...)
	}
}

// TestLongRunSplit: a long base64 run (within Overlap) holding a host
// value, written in parts cut inside it, is reported once with its whole
// length, whether text follows it or it ends the stream.
func TestLongRunSplit(t *testing.T) {
	s := New(nil)
	s.AddValue("K", "the-host-key-12345")
	run := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("padding ", 300) + "the-host-key-12345"))
	for _, text := range []string{"data: " + run + "\nnext line\n", "data: " + run} {
		want := Finding{Rule: HostValue, Name: "K", Offset: 6, Length: len(run), Encoding: Base64}
		for _, cuts := range [][]int{{100}, {1000, 2000}, {500, 1000, 1500, 2000, 2500, 3000}, {len(text) - 1}} {
			st := s.Stream(nil)
			writeParts(st, text, cuts...)
			if got := st.Findings(); len(got) != 1 || got[0] != want {
				t.Errorf("cut at %v: found %+v, want %+v", cuts, got, want)
			}
		}
	}
}

// TestStreamBounded: a long stream keeps at most Overlap bytes, and a
// secret far into it is found at its offset.
func TestStreamBounded(t *testing.T) {
	s := New(nil)
	st := s.Stream(nil)
	line := []byte("ok: compiled package github.com/x/y in 0.12s\n")
	var off int64
	for range 20000 {
		st.Write(line)
		off += int64(len(line))
	}
	secret := samples()["google"].yes[0]
	st.Write([]byte("key " + secret + "\n"))
	if len(st.buf) > Overlap {
		t.Errorf("the stream keeps %d bytes", len(st.buf))
	}
	// Its keyword's window may yet grow: told once it cannot, or at Close.
	if fs := st.Findings(); len(fs) != 0 {
		t.Errorf("findings %+v before the window is whole", fs)
	}
	for range 20 {
		st.Write(line)
	}
	fs := st.Findings()
	if len(fs) != 1 || fs[0].Rule != "google" || fs[0].Offset != off+4 {
		t.Errorf("findings %+v; want google at %d", fs, off+4)
	}
	st.Close()
	if len(st.Findings()) != 1 {
		t.Errorf("findings %+v after Close", st.Findings())
	}
}

func TestAddEnv(t *testing.T) {
	s := New(nil)
	s.AddEnv([]string{"OPENAI_API_KEY=abcdefgh12345678", "GITHUB_TOKEN=zyxwvut98765", "PATH=/usr/bin:/bin", "DB_PASSWORD=short", "HOME=/home/someone/long",
		"GIT_AUTHOR_NAME=Someone Longname", "KEYBOARD_LAYOUT=us-international",
		"SSH_AUTH_SOCK=/tmp/ssh-XXXXabcd/agent.123", "GIT_ASKPASS=ksshaskpass-helper", "SIGNING_KEY_FILE=keys/signing.pem",
		"GOOGLE_APPLICATION_CREDENTIALS=/home/someone/.config/gcloud/adc.json", "DATABASE_PASSWORD_URL=postgres://db.internal/x"})
	var names []string
	for _, v := range s.values {
		names = append(names, v.name)
	}
	if strings.Join(names, ",") != "OPENAI_API_KEY,GITHUB_TOKEN" {
		t.Errorf("registered %v", names)
	}
	fs := s.Scan([]byte("PATH=/usr/bin:/bin home=/home/someone/long key=abcdefgh12345678"))
	if len(fs) != 1 || fs[0].Name != "OPENAI_API_KEY" || fs[0].Rule != HostValue {
		t.Errorf("findings %+v", fs)
	}
}

// TestRandomCuts: texts made of secrets (and look-alikes), in every
// encoding, among words and the characters that end tokens and runs,
// written in parts cut at random: a Stream tells what Scan finds of the
// whole text, each once; a Redactor tells as many and redacts the same
// bytes as when written whole.
func TestRandomCuts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := New(nil)
	phrase := "a pass phrase with spaces that is long enough to matter here"
	s.AddValue("K", "the-host-key-12345")
	s.AddValue("P", phrase)
	secrets := []string{"the-host-key-12345", phrase}
	for _, c := range samples() {
		secrets = append(append(secrets, c.yes...), c.no...)
	}
	encode := []func(string) string{
		func(v string) string { return v },
		func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) },
		func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte("x " + v)) },
		func(v string) string { return hex.EncodeToString([]byte(v)) },
		url.QueryEscape,
	}
	words := []string{"ok", "build", "\n", " ", "  ", "x=", "%", "+", "==", "'", "\"", "func main() {", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "deadbeef"}
	order := func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), strings.Compare(a.Rule, b.Rule),
			strings.Compare(string(a.Encoding), string(b.Encoding)), cmp.Compare(a.Length, b.Length))
	}
	// Where findings overlap, which marker stands for them, and whether
	// one or two, may differ with the cuts.
	markers := regexp.MustCompile(`(\[REDACTED:[a-z-]+\])+`)
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.Intn(12) {
			if rng.Intn(3) == 0 {
				b.WriteString(encode[rng.Intn(len(encode))](secrets[rng.Intn(len(secrets))]))
			} else {
				b.WriteString(words[rng.Intn(len(words))])
			}
		}
		text := b.String()
		var cuts []int
		for c := rng.Intn(20); c < len(text); c += 1 + rng.Intn(1+rng.Intn(80)) {
			cuts = append(cuts, c)
		}
		want := s.Scan([]byte(text))
		slices.SortFunc(want, order)
		st := s.Stream(nil)
		writeParts(st, text, cuts...)
		got := st.Findings()
		slices.SortFunc(got, order)
		if !slices.Equal(got, want) {
			t.Fatalf("%q cut at %v: found %+v, want %+v", text, cuts, got, want)
		}
		var whole, parts bytes.Buffer
		nWhole, nParts := 0, 0
		writeParts(s.Redactor(&whole, func(Finding) { nWhole++ }), text)
		writeParts(s.Redactor(&parts, func(Finding) { nParts++ }), text, cuts...)
		w, p := markers.ReplaceAllString(whole.String(), "[R]"), markers.ReplaceAllString(parts.String(), "[R]")
		if w != p || nWhole != len(want) || nParts != len(want) {
			t.Fatalf("%q cut at %v: redacted\n%q (%d told)\nin parts\n%q (%d told)", text, cuts, whole.String(), nWhole, parts.String(), nParts)
		}
	}
}

// TestHeld: a secret at the end of what was written so far is held back
// (more may follow and change its extent), but Held tells it at once, to
// a caller that must not wait; text without one is not held.
func TestHeld(t *testing.T) {
	s := New(nil)
	token := samples()["github"].yes[0]
	for _, tc := range []struct {
		text string
		held bool
	}{
		{"building\nusing " + token + "\n", true},
		{"building\nusing " + token, true},
		{"building\nusing " + base64.StdEncoding.EncodeToString([]byte(token)), true},
		{"building\nno secret in here, ghp_ alone\n", false},
	} {
		st := s.Stream(nil)
		st.Write([]byte(tc.text))
		var out strings.Builder
		r := s.Redactor(&out, nil)
		r.Write([]byte(tc.text))
		if st.Held() != tc.held || r.Held() != tc.held {
			t.Errorf("%q: Stream.Held %v, Redactor.Held %v, want %v", tc.text, st.Held(), r.Held(), tc.held)
		}
		if strings.Contains(out.String(), "ghp_") && tc.held {
			t.Errorf("%q: passed on before it was settled: %q", tc.text, out.String())
		}
		st.Close()
		if got := len(st.Findings()) > 0; got != tc.held {
			t.Errorf("%q: %d findings after Close", tc.text, len(st.Findings()))
		}
	}
}

// TestRulesCompiledWhenCalledFor: the default rules' expressions are
// compiled when a keyword first calls for one, not when a Scanner is made
// (a fresh hutch run paid 5 ms for all of them before its command ran),
// and a rule compiled late finds what it did compiled early.
func TestRulesCompiledWhenCalledFor(t *testing.T) {
	// Fresh expressions: the package's own are shared by every test.
	rules := defaultRules()
	for i := range rules {
		rules[i].lazy = pattern(rules[i].lazy.pattern)
	}
	compiled := func() []string {
		var ids []string
		for _, r := range rules {
			if r.lazy.re != nil {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	s := New(rules)
	if fs := s.Scan([]byte("total 8\ndrwxr-xr-x 2 root root 4096 README.md main.go\n")); len(fs) != 0 {
		t.Fatalf("findings in plain text: %+v", fs)
	}
	if ids := compiled(); len(ids) != 0 {
		t.Fatalf("compiled with no keyword in the text: %v", ids)
	}
	token := "ghp_" + randomString(rand.New(rand.NewSource(1)), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 36)
	fs := s.Scan([]byte("export GH=" + token + "\n"))
	if found := rulesFound(fs); len(found) != 1 || !found["github"] {
		t.Fatalf("github token: found %+v", fs)
	}
	if ids := compiled(); !slices.Equal(ids, []string{"github"}) {
		t.Fatalf("compiled %v, want only the rule whose keyword occurred", ids)
	}
	for _, r := range DefaultRules() {
		if r.Regex == nil {
			t.Errorf("DefaultRules: %s has no compiled expression", r.ID)
		}
	}
}

// TestManyValues: every host value is found when there are more first
// bigrams than the pass's table has lists for (the rest are looked up
// another way).
func TestManyValues(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	s := New(nil)
	var text strings.Builder
	want := map[string]bool{}
	for i := range 600 {
		name := fmt.Sprintf("V%d", i)
		v := randomString(rng, "abcdefghijklmnopqrstuvwxyz0123456789", 12)
		s.AddValue(name, v)
		want[name] = true
		fmt.Fprintf(&text, "line %d: %s here\n", i, v)
	}
	got := map[string]bool{}
	for _, f := range s.Scan([]byte(text.String())) {
		if f.Rule == HostValue {
			got[f.Name] = true
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("value %s not found", name)
		}
	}
	if lists := len(s.firsts.lists); lists != manyBigrams-1 {
		t.Errorf("%d lists: the test does not reach past the table's", lists)
	}
}
