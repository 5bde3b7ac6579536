//go:build linux

package runtime_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchbox/hutch/runtime"
)

// Which rule decides a path, before any command runs: Check decides the
// policy without making a sandbox, and its Resolved answers from the view
// a command would get. The Reason is what an agent's model reads.
func ExampleResolved_Explain() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("TOKEN=x\n"), 0o600)

	r, err := runtime.Check(runtime.DefaultPolicy(ws))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range []struct {
		path   string
		access runtime.Access
	}{
		{".env", runtime.AccessRead},
		{"main.go", runtime.AccessWrite},
		{"/etc/passwd", runtime.AccessWrite},
		{"/tmp/scratch", runtime.AccessWrite},
	} {
		x, err := r.Explain(q.path, q.access)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(q.access, q.path, x.Allowed, x.Rule)
	}
	x, _ := r.Explain("/etc/passwd", runtime.AccessWrite)
	fmt.Println(x.Reason)
	// Output:
	// read .env false deny-name
	// write main.go true writable-tree
	// write /etc/passwd false outside-writable
	// write /tmp/scratch true private-tmp
	// /etc/passwd lies in /etc, outside the writable trees: the host's tree, read-only
}
