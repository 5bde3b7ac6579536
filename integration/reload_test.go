//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchbox/hutch/policyfile"
)

// TestReloadUnderLoad (issue 18, must show 2): 20 callers run commands
// while the policy file changes 50 times (every fifth change invalid).
// Two valid policies alternate, each a whole: A makes dir a writable and
// masks secret b; B makes dir b writable and masks secret a. Every
// command tries all four, and the host judges which policy it ran under:
// exactly one, whole, never a mix; the invalid files never take effect;
// and a command started after a reload was reported, before the next
// change, ran under that reload's policy (the pool never serves inits of
// the old one).
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reloads under load (about 70 s)")
	}
	ws, a, b, secrets := dir(t, "reload-ws-"), dir(t, "reload-a-"), dir(t, "reload-b-"), dir(t, "reload-sec-")
	for _, d := range []string{a, b} {
		must(os.Chmod(d, 0o777))
	}
	secretA, secretB := filepath.Join(secrets, "a"), filepath.Join(secrets, "b")
	must(os.WriteFile(secretA, []byte("secret of a"), 0o644))
	must(os.WriteFile(secretB, []byte("secret of b"), 0o644))
	file := filepath.Join(dir(t, "reload-pol-"), "policy.toml")
	versions := map[string]string{
		"A":       fmt.Sprintf("version = 1\n[sandbox]\nwritable = [%q]\ndeny = [%q]\nprewarm = 2\n", a, secretB),
		"B":       fmt.Sprintf("version = 1\n[sandbox]\nwritable = [%q]\ndeny = [%q]\nprewarm = 2\n", b, secretA),
		"invalid": fmt.Sprintf("version = 1\n[sandbox]\nwritable = [%q]\nmemory = \"1k\"\n", b),
	}
	write := func(v string) {
		// As an editor saves: a new file renamed over the old.
		tmp := file + ".tmp"
		must(os.WriteFile(tmp, []byte(versions[v]), 0o644))
		must(os.Rename(tmp, file))
	}
	write("A")
	reloaded := make(chan error, 1)
	w, err := policyfile.Watch(file, ws, "", func(err error) { reloaded <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sb := w.Sandbox()

	type run struct {
		i     int
		start time.Time
	}
	var (
		mu    sync.Mutex
		runs  []run
		next  atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		fails atomic.Int64
	)
	script := fmt.Sprintf(`echo x > %[1]s/$1; echo x > %[2]s/$1; cat %[3]s > ra-$1; cat %[4]s > rb-$1; true`, a, b, secretA, secretB)
	for range 20 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := int(next.Add(1))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				start := time.Now()
				err := sb.Command(ctx, "sh", "-c", script, "sh", fmt.Sprint(i)).Run()
				cancel()
				if err != nil {
					fails.Add(1)
					t.Errorf("command %d: %v", i, err)
					continue
				}
				mu.Lock()
				runs = append(runs, run{i, start})
				mu.Unlock()
			}
		})
	}

	// The changes, each waited for; the windows in which a command must
	// see a given valid policy: from its reload's report to the next
	// change.
	type window struct {
		version  string
		from, to time.Time
	}
	var windows []window
	current, refusals := "A", 0
	var latency time.Duration
	for k := range 50 {
		v := map[bool]string{true: "B", false: "A"}[current == "A"]
		if k%5 == 4 {
			v = "invalid"
		}
		changed := time.Now()
		if n := len(windows); n > 0 && windows[n-1].to.IsZero() {
			windows[n-1].to = changed
		}
		write(v)
		select {
		case err := <-reloaded:
			latency += time.Since(changed)
			switch {
			case v == "invalid" && err == nil:
				t.Fatalf("change %d: the invalid file took effect", k)
			case v == "invalid":
				refusals++
				// The old policy stays, and is still in effect from here.
				windows = append(windows, window{version: current, from: time.Now()})
			case err != nil:
				t.Fatalf("change %d to %s: %v", k, v, err)
			default:
				current = v
				windows = append(windows, window{version: v, from: time.Now()})
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("change %d: no reload in 30 s", k)
		}
		// Commands start under the policy just reported.
		time.Sleep(100 * time.Millisecond)
	}
	windows[len(windows)-1].to = time.Now()
	close(stop)
	wg.Wait()

	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	counts := map[string]int{}
	inWindow := 0
	for _, r := range runs {
		n := fmt.Sprint(r.i)
		wa, wb := exists(filepath.Join(a, n)), exists(filepath.Join(b, n))
		ra, rb := read(filepath.Join(ws, "ra-"+n)), read(filepath.Join(ws, "rb-"+n))
		var got string
		switch {
		case wa && !wb && ra == "secret of a" && rb == "":
			got = "A"
		case wb && !wa && rb == "secret of b" && ra == "":
			got = "B"
		default:
			t.Errorf("command %d ran under no one policy: wrote a %v, b %v; read a %q, b %q", r.i, wa, wb, ra, rb)
			continue
		}
		counts[got]++
		for _, win := range windows {
			if r.start.After(win.from) && r.start.Before(win.to) {
				inWindow++
				if got != win.version {
					t.Errorf("command %d started %v after policy %s was reported in effect, and ran under %s", r.i, r.start.Sub(win.from), win.version, got)
				}
			}
		}
	}
	t.Logf("%d commands (%d failed), %d under A and %d under B, %d started within a known policy's window; %d invalid files refused; a change took %v to be in effect or refused, on average",
		len(runs), fails.Load(), counts["A"], counts["B"], inWindow, refusals, latency/50)
	// How many start within a window depends on the machine's load (a
	// loaded one spends the changes' time building Sandboxes); some must.
	if counts["A"] == 0 || counts["B"] == 0 || inWindow < 20 || refusals != 10 {
		t.Errorf("a weak run: %v, %d in windows, %d refusals", counts, inWindow, refusals)
	}
}
