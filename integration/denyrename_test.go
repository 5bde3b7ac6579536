//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// TestDenyFollowsRenameAndCreation: the deny-list is a promise about paths
// for the command's whole life. While a command runs, the host replaces the
// masked ~/.netrc by rename (as an editor saves it), and creates
// ~/.git-credentials and ~/.kube/config, denied paths that did not exist
// when it started. The command then copies each into the workspace; the
// host checks that no copy holds the secret, and that an ordinary file the
// host created meanwhile in a directory of the home was readable. (A new
// entry of the home itself is not, until the next command: the home is
// carved entry by entry, and a name that appears later has no rule.)
func TestDenyFollowsRenameAndCreation(t *testing.T) {
	ws := dir(t, "ws-")
	const secret = "HUTCH-IT-LATE-SECRET-91c2"
	netrc := filepath.Join(fakeHome, ".netrc")
	old, err := os.ReadFile(netrc)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(fakeHome, ".git-credentials")
	kube := filepath.Join(fakeHome, ".kube")
	proj := filepath.Join(fakeHome, "proj-"+filepath.Base(ws))
	must(os.MkdirAll(proj, 0o755))
	notes := filepath.Join(proj, "notes")
	t.Cleanup(func() {
		os.RemoveAll(proj)
		_ = os.WriteFile(netrc, old, 0o600)
		os.Remove(creds)
		os.RemoveAll(kube)
	})
	started, goOn := filepath.Join(ws, "started"), filepath.Join(ws, "go")
	script := `touch started
i=0; while [ ! -e go ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
cat "$1" > netrc.copy 2>/dev/null
cat "$2" > creds.copy 2>/dev/null
cat "$3"/config > kube.copy 2>/dev/null
cat "$4" > notes.copy 2>/dev/null
exit 0`
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, ws, nil, "sh", "-c", script, "sh", netrc, creds, kube, notes)
	}()
	if !waitFor(30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }) {
		t.Fatalf("the command did not start: %s", <-done)
	}
	tmp := netrc + ".tmp"
	must(os.WriteFile(tmp, []byte("machine x password "+secret+"\n"), 0o600))
	must(os.Rename(tmp, netrc))
	must(os.WriteFile(creds, []byte("https://u:"+secret+"@example.test\n"), 0o600))
	must(os.MkdirAll(kube, 0o700))
	must(os.WriteFile(filepath.Join(kube, "config"), []byte(secret+"\n"), 0o600))
	must(os.WriteFile(notes, []byte("PUBLIC-NOTES\n"), 0o644))
	must(os.WriteFile(goOn, nil, 0o644))
	res := <-done
	if res.code != 0 {
		t.Fatalf("command failed:\n%s", res)
	}
	if res.result != nil && !slices.Contains(res.result.Layers, runtime.LayerLandlock) {
		// Without Landlock the masks alone keep the deny-list, for the
		// inodes there at the start: the Result must say so.
		if !slices.ContainsFunc(res.result.Unenforced, func(s string) bool { return strings.Contains(s, "replaced or created during a run") }) {
			t.Errorf("no Landlock and nothing in Unenforced about the deny-list: %q", res.result.Unenforced)
		}
		t.Skipf("Landlock not enforced here (%v): the deny-list follows inodes, as Unenforced says", res.result.Skipped)
	}
	for _, c := range []string{"netrc.copy", "creds.copy", "kube.copy"} {
		if b, _ := os.ReadFile(filepath.Join(ws, c)); strings.Contains(string(b), secret) {
			t.Errorf("host: %s holds the secret written during the run: %q", c, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.copy")); string(b) != "PUBLIC-NOTES\n" {
		t.Errorf("host: an ordinary file created in a directory of the home during the run was not readable: %q", b)
	}
}
