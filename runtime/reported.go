package runtime

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The file source of Result.Denials (DenialFile). A refusal the mounts
// make (EROFS on a write outside the writable trees, EACCES on a masked
// path, ENOENT in a hidden directory) leaves no record in the kernel that
// hutch could read cheaply, but the command usually says what it met on
// its stderr, in one of a few formats. hutch reads those lines as the
// stream is copied and, once the command has ended, asks the command's
// own plan (Explain, with the deny-name matches and repositories its init
// was built with) whether that access to that path is refused. Only the
// plan's answer makes a Denial: a command cannot report a refusal the
// sandbox does not make (a "Read-only file system" about a workspace
// file is no denial), but it can print one it did not meet.
//
// The cost is a search for a few phrases in each line of the command's
// stderr (about 2 ms a MiB), bounded per command: the first
// maxReportedHead bytes are read as they come, and of the rest only the
// last maxReportedTail, kept and read once the command has ended (where
// a failing command says why); only lines holding a phrase are parsed,
// at most maxReportedLines, after which the stream is only copied.

// maxReportedLines bounds the lines of a command's stderr parsed for a
// refusal, maxReportedLine the length of a line looked at,
// maxReportedHead and maxReportedTail the bytes read: a command printing
// errors in a loop, or a flood of output, costs a bounded amount.
const (
	maxReportedLines = 256
	maxReportedLine  = 4096
	maxReportedHead  = 4 << 20
	maxReportedTail  = 64 << 10
)

// reported is one refusal a command's error output names: the path as
// it gave it, the errno, and whether the line says a write was tried
// ("cannot create", "mkdir").
type reported struct {
	path  string
	errno string
	write bool
}

// errorPhrases are the error texts the formats hutch reads print, by
// errno: strerror's (coreutils, sh, bash, Python), Go's (lower case),
// dash's own for a file it cannot create or open.
var errorPhrases = []struct {
	text, errno string
}{
	{"Read-only file system", "EROFS"},
	{"read-only file system", "EROFS"},
	{"Permission denied", "EACCES"},
	{"permission denied", "EACCES"},
	{"Operation not permitted", "EPERM"},
	{"operation not permitted", "EPERM"},
	{"No such file or directory", "ENOENT"},
	{"no such file or directory", "ENOENT"},
	{"Directory nonexistent", "ENOENT"},
	{"No such file", "ENOENT"},
}

// errnoNumbers are Python's [Errno N] of the errnos read.
var errnoNumbers = map[string]string{"30": "EROFS", "13": "EACCES", "1": "EPERM", "2": "ENOENT"}

// The formats' expressions, compiled when a line first calls for them:
// every hutch process (the CLI, the spawn server, a file server, a
// supervisor) would otherwise compile them at its start, and only a
// command's error output ever reads them.
var (
	// Node: "EROFS: read-only file system, open '/etc/x'".
	nodeError = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\b(EROFS|EACCES|EPERM|ENOENT): [a-z ,-]*?, ([a-z]+) '([^']*)'`)
	})
	// Python: "[Errno 30] Read-only file system: '/etc/x'".
	pythonError = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\[Errno (30|13|1|2)\] [A-Za-z -]+: ('[^']*'|"[^"]*")`)
	})
	// Go's *fs.PathError: "open /etc/x: read-only file system".
	goOp = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^| )(open|openat|mkdir|mkdirat|remove|unlinkat|rename|link|symlink|stat|lstat|chmod|chown|lchown|truncate|chtimes|readlink|chdir|write|read|fchmodat) (.+)$`)
	})
)

// writeOps are the operations in those formats that write: a system call
// (Go, Node) or coreutils' and dash's words for one.
var writeOps = map[string]bool{
	"mkdir": true, "mkdirat": true, "remove": true, "unlinkat": true, "unlink": true, "rmdir": true,
	"rename": true, "link": true, "symlink": true, "chmod": true, "chown": true, "lchown": true,
	"truncate": true, "chtimes": true, "utime": true, "copyfile": true, "write": true, "fchmodat": true,
}

// leadIns are coreutils' and the shells' words before the path they
// name, and whether they say a write.
var leadIns = []struct {
	text  string
	write bool
}{
	{"cannot create directory ", true},
	{"cannot create regular file ", true},
	{"cannot create symbolic link ", true},
	{"cannot create ", true},
	{"cannot touch ", true},
	{"cannot remove ", true},
	{"cannot make directory ", true},
	{"cannot overwrite ", true},
	{"cannot move ", true},
	{"cannot unlink ", true},
	{"cannot rmdir ", true},
	{"cannot change permissions of ", true},
	{"cannot change ownership of ", true},
	{"failed to remove ", true},
	{"changing permissions of ", true},
	{"changing ownership of ", true},
	{"cannot open directory ", false},
	{"cannot open ", false},
	{"cannot access ", false},
	{"cannot stat ", false},
	{"cannot read ", false},
	{"can't cd to ", false},
	{"can't open ", false},
}

// parseReported reads the refusal one line of error output names, if it
// names one with a path.
func parseReported(line string) (reported, bool) {
	if m := nodeError().FindStringSubmatch(line); m != nil {
		return checkedReported(reported{path: m[3], errno: m[1], write: writeOps[m[2]]})
	}
	if m := pythonError().FindStringSubmatch(line); m != nil {
		return checkedReported(reported{path: m[2][1 : len(m[2])-1], errno: errnoNumbers[m[1]]})
	}
	for _, ph := range errorPhrases {
		i := strings.LastIndex(line, ": "+ph.text)
		if i < 0 {
			continue
		}
		// The error ends a tool's line; one inside a sentence is no
		// report of a path.
		if rest := strings.TrimRight(line[i+2+len(ph.text):], " \r"); rest != "" {
			continue
		}
		r, ok := reportedPath(line[:i])
		r.errno = ph.errno
		if !ok {
			return reported{}, false
		}
		return checkedReported(r)
	}
	return reported{}, false
}

// reportedPath reads the path that ends prefix, the text before ":
// <error>": quoted ('x', ‘x’, "x") after a tool's words, or the last
// ": "-separated field, less coreutils' words or Go's operation.
func reportedPath(prefix string) (reported, bool) {
	var r reported
	for _, q := range [][2]string{{"'", "'"}, {"‘", "’"}, {`"`, `"`}} {
		if !strings.HasSuffix(prefix, q[1]) {
			continue
		}
		body := prefix[:len(prefix)-len(q[1])]
		i := strings.LastIndex(body, q[0])
		if i < 0 {
			return r, false
		}
		r.path = body[i+len(q[0]):]
		before := body[:i]
		for _, l := range leadIns {
			if strings.HasSuffix(before, l.text) {
				r.write = l.write
				break
			}
		}
		return r, true
	}
	field := lastField(prefix)
	for _, l := range leadIns {
		if strings.HasPrefix(field, l.text) {
			field, r.write = field[len(l.text):], l.write
			break
		}
	}
	if m := goOp().FindStringSubmatch(field); m != nil {
		field = m[2]
		r.write = writeOps[m[1]]
		if m[1] == "rename" || m[1] == "link" || m[1] == "symlink" {
			// "rename OLD NEW": the new name is the one written.
			field = field[strings.LastIndexByte(field, ' ')+1:]
		}
	}
	r.path = field
	return r, true
}

// lastField is what follows the last ": " of s (the shells' and
// coreutils' "tool: line: path"), or s.
func lastField(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// checkedReported keeps r when its path could be one: not empty, no
// control characters, and no blank unless it is absolute (words before
// an error are a sentence, not a relative path).
func checkedReported(r reported) (reported, bool) {
	if r.path == "" || r.errno == "" || len(r.path) > 4096 {
		return reported{}, false
	}
	for _, c := range r.path {
		if c < ' ' || c == 0x7f {
			return reported{}, false
		}
	}
	if !strings.HasPrefix(r.path, "/") && strings.ContainsAny(r.path, " \t") {
		return reported{}, false
	}
	return r, true
}

// reportScanner reads a command's error output for the refusals it
// names. It is an io.Writer fed the stream as it is copied, by one
// goroutine; its Write never fails and keeps at most one partial line
// (maxReportedLine) between writes.
type reportScanner struct {
	// mu is held by Write and by the judge, which may read while a
	// copy runs on past Cmd.WaitDelay.
	mu      sync.Mutex
	partial []byte
	long    bool // the partial line went past maxReportedLine: skipped
	judged  int  // lines parsed
	order   []reported
	counts  map[reported]int
	// seen counts the bytes read as they came (maxReportedHead); tail
	// keeps the stream's end beyond them, cut when bytes between were
	// dropped.
	seen int
	tail []byte
	cut  bool
}

// Write implements io.Writer.
func (s *reportScanner) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.judged >= maxReportedLines {
		return n, nil
	}
	head := min(len(p), maxReportedHead-s.seen)
	s.seen += head
	s.scan(p[:head])
	if rest := p[head:]; len(rest) > 0 {
		s.keepTail(rest)
	}
	return n, nil
}

// keepTail keeps the last maxReportedTail bytes of the stream beyond the
// head, in at most twice that.
func (s *reportScanner) keepTail(p []byte) {
	if len(p) > maxReportedTail {
		p, s.cut = p[len(p)-maxReportedTail:], true
		s.tail = s.tail[:0]
	}
	if len(s.tail)+len(p) > 2*maxReportedTail {
		keep := maxReportedTail - len(p)
		s.tail = append(s.tail[:0], s.tail[len(s.tail)-keep:]...)
		s.cut = true
	}
	s.tail = append(s.tail, p...)
}

// scan reads p's lines, holding a cut last one for the next.
func (s *reportScanner) scan(p []byte) {
	for len(p) > 0 && s.judged < maxReportedLines {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.hold(p)
			break
		}
		if len(s.partial) > 0 || s.long {
			s.hold(p[:i])
			if !s.long {
				s.line(s.partial)
			}
			s.partial, s.long = s.partial[:0], false
		} else {
			s.line(p[:i])
		}
		p = p[i+1:]
	}
}

// hold keeps b as (more of) the partial line.
func (s *reportScanner) hold(b []byte) {
	if s.long {
		return
	}
	if len(s.partial)+len(b) > maxReportedLine {
		s.partial, s.long = s.partial[:0], true
		return
	}
	s.partial = append(s.partial, b...)
}

// flush reads the stream's last line, which had no newline, and returns
// the refusals read, in the order first named, with how many lines named
// each.
func (s *reportScanner) flush() ([]reported, map[reported]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tail; len(t) > 0 {
		if s.cut {
			// The line held and the tail's first are each part of a
			// line whose middle was dropped.
			s.partial, s.long = s.partial[:0], false
			t = t[bytes.IndexByte(t, '\n')+1:]
		}
		s.scan(t)
		s.tail, s.cut = nil, false
	}
	if len(s.partial) > 0 && !s.long && s.judged < maxReportedLines {
		s.line(s.partial)
	}
	s.partial, s.long = nil, false
	return slices.Clone(s.order), maps.Clone(s.counts)
}

// phraseMarks are what a line must hold for parseReported to be asked:
// every errorPhrases text, and Node's and Python's forms, hold one.
var phraseMarks = [][]byte{[]byte("file system"), []byte("ermission denied"), []byte("ot permitted"), []byte("o such file"), []byte("nonexistent")}

// marked says whether b holds one of phraseMarks.
func marked(b []byte) bool {
	for _, m := range phraseMarks {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

// line parses one line that holds an error phrase.
func (s *reportScanner) line(b []byte) {
	if len(b) > maxReportedLine {
		return
	}
	if !marked(b) {
		return
	}
	s.judged++
	r, ok := parseReported(string(b))
	if !ok {
		return
	}
	if s.counts == nil {
		s.counts = make(map[reported]int)
	}
	if s.counts[r] == 0 {
		s.order = append(s.order, r)
	}
	s.counts[r]++
}

// explainShown is how many denials Policy.Explain's summary names.
const explainShown = 5

// explainSummary is Policy.Explain's summary of a command's denials, the
// lines hutch appends to its stderr: one for each of the first
// explainShown ("hutch: refused <Denial.String()>"), then how many
// refusals more there were; "" for none.
func explainSummary(ds []Denial, dropped int) string {
	if len(ds) == 0 && dropped == 0 {
		return ""
	}
	var b strings.Builder
	for i, d := range ds {
		if i == explainShown {
			break
		}
		b.WriteString("hutch: refused " + d.String() + "\n")
	}
	more := dropped
	for _, d := range ds[min(len(ds), explainShown):] {
		more += d.Count
	}
	switch {
	case more == 1:
		b.WriteString("hutch: and 1 more refusal (Result.Denials)\n")
	case more > 1:
		fmt.Fprintf(&b, "hutch: and %d more refusals (Result.Denials)\n", more)
	}
	return b.String()
}
