package leaks

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"math/rand"
	"net/url"
	"strings"
	"testing"
)

// TestRedactorEveryEncodingEveryCut: a registered host value and a rule's
// secret, raw and in every encoding, written in two parts cut at every
// byte, in three parts, and a byte at a time: what reaches the
// destination holds none of them in any encoding, and every other byte
// as it was.
func TestRedactorEveryEncodingEveryCut(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	hostKey := "hk-" + randomString(rng, alnum, 32)
	ghToken := samples()["github"].yes[0]
	forms := func(v string) []string {
		return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte("k=" + v)),
			hex.EncodeToString([]byte(v)), url.QueryEscape("x " + v + "&")}
	}
	var text strings.Builder
	text.WriteString("start of the build log\n")
	for _, v := range []string{hostKey, ghToken} {
		for _, f := range forms(v) {
			text.WriteString("line with " + f + " in it\n")
		}
	}
	text.WriteString("end\n")
	in := text.String()
	s := New(nil)
	s.AddValue("HOST_KEY", hostKey)
	want := len(s.Scan([]byte(in)))
	check := func(cuts ...int) {
		t.Helper()
		var out bytes.Buffer
		var found []Finding
		writeParts(s.Redactor(&out, func(f Finding) { found = append(found, f) }), in, cuts...)
		got := out.String()
		for _, v := range []string{hostKey, ghToken} {
			for _, f := range append(forms(v), v) {
				if strings.Contains(got, f) {
					t.Fatalf("cut %v: %q passed through:\n%s", cuts, f, got)
				}
			}
		}
		if !strings.HasPrefix(got, "start of the build log\n") || !strings.HasSuffix(got, " in it\nend\n") || strings.Count(got, "[REDACTED:") != 10 {
			t.Fatalf("cut %v: the rest was changed or a secret missed:\n%s", cuts, got)
		}
		if len(found) != want {
			t.Fatalf("cut %v: %d findings reported: %+v", cuts, len(found), found)
		}
		for _, f := range found {
			if !strings.HasPrefix(got[f.Offset:], "[REDACTED:"+f.Rule+"]") {
				t.Fatalf("cut %v: %+v is not where its marker is:\n%s", cuts, f, got)
			}
		}
	}
	for cut := 0; cut <= len(in); cut += 1 + cut/64 {
		check(cut)
		for cut2 := cut; cut2 <= len(in); cut2 += 7 + cut2/16 {
			check(cut, cut2)
		}
	}
	check(everyByte(len(in))...)
}

// TestRedactorHoldsBack: text without secrets passes through unchanged,
// held back until Close only by what may still be part of a secret: the
// bytes a keyword's match may start before it (64, to a token's start),
// a token that may go on, a keyword's window, Overlap bytes at most.
func TestRedactorHoldsBack(t *testing.T) {
	plain := strings.Repeat("plain text, nothing secret here.\n", 1000)
	for _, c := range []struct {
		name     string
		text     string
		min, max int
	}{
		{"lines", plain, before, before + 10},
		{"a token going on", plain + strings.Repeat("x", 200), 200, 200},
		{"a keyword", plain + "ghp_ is a prefix " + strings.Repeat("z", 100) + "\n", before + 100, before + 140},
		{"a token longer than Overlap", plain + strings.Repeat("y", 5000), Overlap, Overlap},
	} {
		var out bytes.Buffer
		r := New(nil).Redactor(&out, nil)
		r.Write([]byte(c.text))
		if held := len(c.text) - out.Len(); held < c.min || held > c.max {
			t.Errorf("%s: held back %d bytes, want %d to %d", c.name, held, c.min, c.max)
		}
		r.Close()
		if out.String() != c.text {
			t.Errorf("%s: the text changed", c.name)
		}
	}
}
