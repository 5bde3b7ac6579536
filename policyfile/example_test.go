//go:build linux

package policyfile_test

import (
	"fmt"
	"os"

	"github.com/hutchbox/hutch/policyfile"
	"github.com/hutchbox/hutch/runtime"
)

// A file sets only the keys it names, on the embedded default; a profile
// sets its own keys on top; every error names the file and the line.
func ExamplePolicy() {
	f, err := policyfile.Parse("hutch.toml", []byte(`version = 1
[sandbox]
network = "allow"
package_managers = ["python"]
[profiles.offline]
network = "none"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := policyfile.Policy("/work/project", "", f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Workspace, p.Network, p.PackageManagers, p.Leaks)
	p, _ = policyfile.Policy("/work/project", "offline", f)
	fmt.Println("offline:", p.Network)

	// Values are judged by runtime.Check, as New would; Explain names the
	// file's line of the field at fault.
	bad, _ := policyfile.Parse("bad.toml", []byte("version = 1\n[sandbox]\nnetwork = \"sometimes\"\n"))
	ws, _ := os.MkdirTemp("", "hutch-example-")
	defer os.Remove(ws)
	p, _ = policyfile.Policy(ws, "", bad)
	_, err = runtime.Check(p)
	fmt.Println(bad.Explain(err, ""))
	// Output:
	// /work/project allow [python] report
	// offline: none
	// bad.toml:3: sandbox.network: "sometimes": not a network mode (none, allow or host)
}
