package runtime

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParseReported: the error lines agents meet, as the tools print
// them (each taken from the tool itself in a sandbox), name the path and
// the errno; lines that name no refusal name nothing.
func TestParseReported(t *testing.T) {
	rows := []struct {
		line string
		want reported // zero: nothing
	}{
		// coreutils
		{"touch: cannot touch '/etc/x': Read-only file system", reported{"/etc/x", "EROFS", true}},
		{"mkdir: cannot create directory ‘/etc/hd’: Read-only file system", reported{"/etc/hd", "EROFS", true}},
		{"mkdir: cannot create directory '/etc/hd': Read-only file system", reported{"/etc/hd", "EROFS", true}},
		{"cp: cannot create regular file '/etc/a b': Read-only file system", reported{"/etc/a b", "EROFS", true}},
		{"rm: cannot remove 'repo/.git/config': Read-only file system", reported{"repo/.git/config", "EROFS", true}},
		{"cat: /root/.aws/credentials: No such file or directory", reported{"/root/.aws/credentials", "ENOENT", false}},
		{"cat: /home/u/.aws/credentials: Permission denied", reported{"/home/u/.aws/credentials", "EACCES", false}},
		{"ls: cannot open directory '/home/u/.aws': Permission denied", reported{"/home/u/.aws", "EACCES", false}},
		{"ls: cannot access '/run/docker.sock': No such file or directory", reported{"/run/docker.sock", "ENOENT", false}},
		{"touch: cannot touch '/home/u/.aws/new': Permission denied", reported{"/home/u/.aws/new", "EACCES", true}},
		{"chmod: changing permissions of '/etc/passwd': Operation not permitted", reported{"/etc/passwd", "EPERM", true}},
		// sh (dash), bash
		{"sh: 1: cannot create /etc/x: Read-only file system", reported{"/etc/x", "EROFS", true}},
		{"sh: 1: cannot create repo/.git/hooks/x: Read-only file system", reported{"repo/.git/hooks/x", "EROFS", true}},
		{"sh: 1: cannot create /home/u/.aws/credentials: Permission denied", reported{"/home/u/.aws/credentials", "EACCES", true}},
		{"sh: 1: cannot create /tmp/home/.aws/config: Directory nonexistent", reported{"/tmp/home/.aws/config", "ENOENT", true}},
		{"sh: 1: cannot open /home/u/.netrc: No such file", reported{"/home/u/.netrc", "ENOENT", false}},
		{"bash: line 1: /etc/bb: Read-only file system", reported{"/etc/bb", "EROFS", false}},
		{"bash: /etc/bb: Permission denied", reported{"/etc/bb", "EACCES", false}},
		// Python
		{"OSError: [Errno 30] Read-only file system: '/etc/x'", reported{"/etc/x", "EROFS", false}},
		{"PermissionError: [Errno 13] Permission denied: '/home/u/.aws/credentials'", reported{"/home/u/.aws/credentials", "EACCES", false}},
		{`FileNotFoundError: [Errno 2] No such file or directory: "it's"`, reported{"it's", "ENOENT", false}},
		// Go
		{"open /etc/x: read-only file system", reported{"/etc/x", "EROFS", false}},
		{"main: mkdir /etc/d: read-only file system", reported{"/etc/d", "EROFS", true}},
		{"open /home/u/.ssh/id_rsa: permission denied", reported{"/home/u/.ssh/id_rsa", "EACCES", false}},
		{"rename /tmp/a /etc/b: read-only file system", reported{"/etc/b", "EROFS", true}},
		{"2026/11/29 05:00:00 stat /run/docker.sock: no such file or directory", reported{"/run/docker.sock", "ENOENT", false}},
		// Node
		{"Error: EROFS: read-only file system, open '/etc/x'", reported{"/etc/x", "EROFS", false}},
		{"Error: EACCES: permission denied, mkdir '/home/u/.aws/d'", reported{"/home/u/.aws/d", "EACCES", true}},
		{"Error: ENOENT: no such file or directory, open '/home/u/.aws/credentials'", reported{"/home/u/.aws/credentials", "ENOENT", false}},

		// No refusal, or no path.
		{"", reported{}},
		{"hello world", reported{}},
		{"Read-only file system", reported{}},
		{"error: Permission denied (publickey).", reported{}},
		{"git@github.com: Permission denied (publickey).", reported{}},
		{"fatal: could not read Username: No such device or address", reported{}},
		{"ssh: connect to host x port 22: Connection refused", reported{}},
		{"the disk said: Read-only file system, try later", reported{}},
		{"warning: the disk: is read only", reported{}},
		{"npm ERR! the operation was rejected: Permission denied", reported{}},
		{"Errno 30 happened", reported{}},
		{"x: \x1b[31m/etc/x\x1b[0m: Read-only file system", reported{}},
	}
	for _, r := range rows {
		got, ok := parseReported(r.line)
		if ok != (r.want != reported{}) || got != r.want {
			t.Errorf("parseReported(%q) = %+v, %v; want %+v", r.line, got, ok, r.want)
		}
	}
}

// TestReportScanner: lines cut across writes are read whole, lines
// without an error phrase are not parsed, the count is per path and
// errno, and parsing stops at maxReportedLines.
func TestReportScanner(t *testing.T) {
	text := "ok\n" +
		"touch: cannot touch '/etc/x': Read-only file system\n" +
		"cat: /home/u/.aws/credentials: Permission denied\n" +
		"more output\n" +
		"touch: cannot touch '/etc/x': Read-only file system\n" +
		strings.Repeat("y", maxReportedLine+10) + ": Read-only file system\n" +
		"open /etc/last: read-only file system" // no newline: the stream's end
	for _, size := range []int{1, 3, 7, 64, len(text)} {
		var s reportScanner
		for b := []byte(text); len(b) > 0; {
			n := min(size, len(b))
			if w, err := s.Write(b[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			b = b[n:]
		}
		order, counts := s.flush()
		var got []string
		for _, r := range order {
			got = append(got, r.path+" "+r.errno+" "+strings.Repeat("x", counts[r]))
		}
		want := []string{"/etc/x EROFS xx", "/home/u/.aws/credentials EACCES x", "/etc/last EROFS x"}
		if !slices.Equal(got, want) || s.judged != 4 {
			t.Errorf("writes of %d: %q, %d lines parsed; want %q, 4", size, got, s.judged, want)
		}
	}

	// A flood: its head is read as it comes, its middle dropped, its
	// tail read at the end.
	filler := []byte(strings.Repeat("src/pkg/file.go:123:45: undefined: someIdentifier\n", 1000))
	var f reportScanner
	write := func(b []byte) {
		for len(b) > 0 {
			n := min(len(b), 32<<10)
			f.Write(b[:n])
			b = b[n:]
		}
	}
	write([]byte("touch: cannot touch '/etc/head': Read-only file system\n"))
	for range 2 * maxReportedHead / len(filler) {
		write(filler)
	}
	write([]byte("touch: cannot touch '/etc/middle': Read-only file system\n"))
	for range 4 * maxReportedTail / len(filler) {
		write(filler)
	}
	write([]byte("touch: cannot touch '/etc/tail': Read-only file system\n"))
	write(filler[:maxReportedTail/2])
	kept := cap(f.tail)
	order, _ := f.flush()
	var got []string
	for _, r := range order {
		got = append(got, r.path)
	}
	if want := []string{"/etc/head", "/etc/tail"}; !slices.Equal(got, want) || kept > 4*maxReportedTail {
		t.Errorf("a flood: %q read (%d bytes kept of the tail); want %q", got, kept, want)
	}

	var s reportScanner
	for i := range maxReportedLines + 10 {
		s.Write([]byte("cat: /etc/f" + strings.Repeat("x", i) + ": Permission denied\n"))
	}
	if len(s.order) != maxReportedLines || s.judged != maxReportedLines {
		t.Errorf("%d lines kept, %d parsed; want %d", len(s.order), s.judged, maxReportedLines)
	}
}

// TestExplainSummary: nothing for no denials; a line each for the first
// five; the refusals beyond them (their counts and the dropped ones) in
// one last line.
func TestExplainSummary(t *testing.T) {
	d := func(obj string, n int) Denial {
		return Denial{Source: DenialFile, Op: "write", Object: obj, Count: n, Rule: RuleOutsideWritable, Reason: obj + " is outside the writable trees"}
	}
	var seven []Denial
	for i := range 7 {
		seven = append(seven, d(fmt.Sprintf("/etc/x%d", i), i+1))
	}
	rows := []struct {
		ds      []Denial
		dropped int
		want    string
	}{
		{nil, 0, ""},
		{[]Denial{d("/etc/x", 1)}, 0, "hutch: refused write /etc/x: /etc/x is outside the writable trees\n"},
		{[]Denial{d("/etc/x", 2)}, 1, "hutch: refused write /etc/x (2 times): /etc/x is outside the writable trees\nhutch: and 1 more refusal (Result.Denials)\n"},
		{seven, 3, "hutch: refused write /etc/x0: /etc/x0 is outside the writable trees\n" +
			"hutch: refused write /etc/x1 (2 times): /etc/x1 is outside the writable trees\n" +
			"hutch: refused write /etc/x2 (3 times): /etc/x2 is outside the writable trees\n" +
			"hutch: refused write /etc/x3 (4 times): /etc/x3 is outside the writable trees\n" +
			"hutch: refused write /etc/x4 (5 times): /etc/x4 is outside the writable trees\n" +
			"hutch: and 16 more refusals (Result.Denials)\n"},
	}
	for _, r := range rows {
		if got := explainSummary(r.ds, r.dropped); got != r.want {
			t.Errorf("explainSummary(%d denials, %d dropped) =\n%s\nwant\n%s", len(r.ds), r.dropped, got, r.want)
		}
	}
}

// BenchmarkReportScanner is the scanner's cost on a command's stderr in
// 64 KiB writes, as the copy makes them: ordinary lines (a compiler's,
// a test runner's) in the head, read as they come, and beyond it, only
// kept; lines that are all refusals, which stop being parsed after
// maxReportedLines.
func BenchmarkReportScanner(b *testing.B) {
	ordinary := "src/pkg/file.go:123:45: undefined: someIdentifier (and a bit more text)\n"
	for _, bb := range []struct {
		name   string
		line   string
		beyond bool
	}{
		{"ordinary head", ordinary, false},
		{"ordinary beyond the head", ordinary, true},
		{"refusals", "touch: cannot touch '/etc/hutch-bench': Read-only file system\n", false},
	} {
		b.Run(bb.name, func(b *testing.B) {
			chunk := []byte(strings.Repeat(bb.line, 64<<10/len(bb.line)))
			b.SetBytes(int64(len(chunk)))
			var s reportScanner
			for b.Loop() {
				if !bb.beyond && s.seen >= maxReportedHead {
					s = reportScanner{}
				}
				s.Write(chunk)
			}
		})
	}
}
