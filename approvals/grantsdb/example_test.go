package grantsdb_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/approvals/grantsdb"
)

// A Go program keeps its users' remembered grants itself, in a SQLite
// file, and judges its agent's tool calls by them: bash is prompted by
// default, and a grant of "npm *" answers the calls it matches.
func ExampleOpenStore() {
	dir, err := os.MkdirTemp("", "grants-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := grantsdb.OpenStore(filepath.Join(dir, "grants.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	if _, err := store.Add(approvals.Grant{Agent: "coder", Tool: "bash", Workspace: "/w", Pattern: "npm *", Decision: approvals.Allow}); err != nil {
		fmt.Println(err)
		return
	}
	e := approvals.Engine{Store: store}
	for _, arg := range []string{"npm test", "curl https://example.com"} {
		v, err := e.Lookup(approvals.Call{Agent: "coder", Tool: "bash", Workspace: "/w", Arg: arg})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s\n", arg, v.Decision)
	}
	// Output:
	// npm test: allow
	// curl https://example.com: prompt
}
