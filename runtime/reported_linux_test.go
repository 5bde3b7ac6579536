//go:build linux

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

// fileDenials are r's denials of source file, each as "op object rule".
func fileDenials(r *runtime.Result) []string {
	var out []string
	for _, d := range r.Denials {
		if d.Source == runtime.DenialFile {
			out = append(out, fmt.Sprintf("%s %s %s", d.Op, d.Object, d.Rule))
		}
	}
	return out
}

// TestCmdExplain: Cmd.Explain appends the command's denials to its
// Stderr (or its one output writer) after its own output, and only then;
// the denials are judged by the Sandbox the command ran in, a grant's
// included; a Sandbox recording no denials refuses Cmd.Explain before
// anything runs and records none.
func TestCmdExplain(t *testing.T) {
	extra, err := os.MkdirTemp("/var/tmp", "hutch-cmdexplain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(extra) })
	sb, _ := newSandbox(t, func(p *runtime.Policy) { p.Grantable = runtime.Grant{Writable: []string{extra}} })
	etc := fmt.Sprintf("/etc/hutch-cmdexplain-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(etc) })
	script := `touch "$1"; echo "touch: cannot touch '$2/x': Read-only file system" >&2; echo end >&2`
	touched := "touch: cannot touch '" + etc + "': Read-only file system\n"
	summary := "hutch: refused write " + etc + ": "

	for _, tt := range []struct {
		name     string
		explain  bool
		grant    bool
		combined bool
		want     []string
	}{
		{"without explain", false, false, false, []string{"write " + etc + " outside-writable", "write " + extra + "/x outside-writable"}},
		{"explain", true, false, false, []string{"write " + etc + " outside-writable", "write " + extra + "/x outside-writable"}},
		{"explain, one writer", true, false, true, []string{"write " + etc + " outside-writable", "write " + extra + "/x outside-writable"}},
		// Granted, the tree is writable: the printed refusal is none.
		{"granted", true, true, false, []string{"write " + etc + " outside-writable"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := sb.Command(context.Background(), "sh", "-c", script, "sh", etc, extra)
			c.Explain = tt.explain
			if tt.grant {
				c.Grant = runtime.Grant{Writable: []string{extra}}
			}
			var out []byte
			var err error
			if tt.combined {
				out, err = c.CombinedOutput()
			} else {
				var stderr bytes.Buffer
				c.Stderr = &stderr
				err = c.Run()
				out = stderr.Bytes()
			}
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out)
			}
			if _, err := os.Stat(etc); err == nil {
				t.Fatalf("host: %s written from the sandbox", etc)
			}
			if got := fileDenials(c.Result); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("denials %q; want %q", got, tt.want)
			}
			s := string(out)
			_, after, ok := strings.Cut(s, "end\n")
			switch {
			case !strings.HasPrefix(s, touched) || !ok:
				t.Errorf("output %q: not the command's own first", s)
			case !tt.explain && after != "":
				t.Errorf("without Explain, %q after the command's output", after)
			case tt.explain && (!strings.HasPrefix(after, summary) || strings.Count(after, "\nhutch: refused ") != len(tt.want)-1):
				t.Errorf("after the command's output %q; want a line %q... for each of %q", after, summary, tt.want)
			}
		})
	}

	// A path holding a secret is no Denial: the Result and the summary
	// go around the redactor.
	// (Made by the shell: an argument holding one is refused.)
	c := sb.Command(context.Background(), "sh", "-c", `p=ghp; touch /etc/${p}_0123456789abcdefghijABCDEFGHIJ012345`)
	c.Explain = true
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.Run()
	if got := fileDenials(c.Result); len(got) != 0 || strings.Contains(stderr.String(), "hutch: refused") {
		t.Errorf("a path holding a secret: denials %q, stderr %q; want none", got, stderr.String())
	}

	off, _ := newSandbox(t, func(p *runtime.Policy) { p.Denials = runtime.DenialsOff })
	c = off.Command(context.Background(), "sh", "-c", script, "sh", etc, extra)
	c.Explain = true
	var pe *runtime.PolicyError
	if err := c.Run(); !errors.As(err, &pe) || pe.Field != "Cmd.Explain" {
		t.Errorf("Cmd.Explain under Denials off: %v; want a *PolicyError for Cmd.Explain", err)
	}
	c = off.Command(context.Background(), "sh", "-c", script, "sh", etc, extra)
	if err := c.Run(); err != nil || len(c.Result.Denials) != 0 {
		t.Errorf("Denials off: %v, denials %+v; want none", err, c.Result.Denials)
	}
}
