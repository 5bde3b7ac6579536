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
// byte: what reaches the destination holds none of them in any encoding,
// and every other byte as it was.
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
	for cut := 0; cut <= len(in); cut += 1 + cut/64 {
		var out bytes.Buffer
		found := 0
		r := s.Redactor(&out, func(Finding) { found++ })
		r.Write([]byte(in[:cut]))
		r.Write([]byte(in[cut:]))
		r.Close()
		got := out.String()
		for _, v := range []string{hostKey, ghToken} {
			for _, f := range append(forms(v), v) {
				if strings.Contains(got, f) {
					t.Fatalf("cut %d: %q passed through:\n%s", cut, f, got)
				}
			}
		}
		if !strings.HasPrefix(got, "start of the build log\n") || !strings.HasSuffix(got, " in it\nend\n") || strings.Count(got, "[REDACTED:") != 10 {
			t.Fatalf("cut %d: the rest was changed or a secret missed:\n%s", cut, got)
		}
		if found < 10 {
			t.Fatalf("cut %d: %d findings reported", cut, found)
		}
	}
}

// TestRedactorHoldsBackOnlyOverlap: text without secrets passes through
// unchanged, held back by at most Overlap bytes until Close.
func TestRedactorHoldsBackOnlyOverlap(t *testing.T) {
	var out bytes.Buffer
	r := New(nil).Redactor(&out, nil)
	chunk := bytes.Repeat([]byte("plain text, nothing secret here.\n"), 1000)
	r.Write(chunk)
	if held := len(chunk) - out.Len(); held != Overlap {
		t.Errorf("held back %d bytes", held)
	}
	r.Close()
	if !bytes.Equal(out.Bytes(), chunk) {
		t.Error("the text changed")
	}
}
