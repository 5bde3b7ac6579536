//go:build linux

package oci_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

// A policy run through an installed OCI runtime, as root: the same
// resolved view, filter and limits hutch's own backend applies, with
// what the OCI form leaves out in the Result.
func ExampleRun() {
	p := runtime.DefaultPolicy("/srv/agent/workspace")
	p.Backend = runtime.BackendOCI // checked for an OCI runtime
	checked, err := runtime.Check(p)
	if err != nil {
		log.Fatal(err) // the policy's own errors, as runtime.New's
	}
	form, err := oci.Export(checked, []string{"sh", "-c", "make test"}, oci.Options{})
	if err != nil {
		log.Fatal(err)
	}
	path, err := oci.LookRuntime("crun")
	if err != nil {
		log.Fatal(err) // errors.Is(err, runtime.ErrBackendUnavailable)
	}
	r, err := oci.Run(context.Background(), form, path, oci.Stdio{Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit", r.ExitCode)
	if r.Usage != nil {
		fmt.Println("peak memory", r.Usage.PeakMemoryBytes)
	}
	for _, u := range r.Unenforced {
		fmt.Println("not enforced:", u)
	}
}

// Export is the bundle form of a policy: config.json with the same view,
// filter and limits, and one line for each thing of the policy that form
// cannot say. Form.Write makes the bundle directory for runc, crun or
// runsc; Pod makes the Kubernetes form of the same policy.
func ExampleExport() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	p := runtime.DefaultPolicy(ws)
	p.Pids = 64
	p.Backend = runtime.BackendOCI
	r, err := runtime.Check(p)
	if err != nil {
		log.Fatal(err)
	}
	form, err := oci.Export(r, []string{"sh", "-c", "make test"}, oci.Options{})
	if err != nil {
		log.Fatal(err)
	}
	s := form.Spec
	fmt.Println("args:", s.Process.Args)
	fmt.Println("read-only root:", s.Root.Readonly, "no new privileges:", s.Process.NoNewPrivileges)
	fmt.Println("pids limit:", *s.Linux.Resources.Pids.Limit)
	fmt.Println("seccomp default action:", s.Linux.Seccomp.DefaultAction)
	netns := false
	for _, ns := range s.Linux.Namespaces {
		netns = netns || ns.Type == "network"
	}
	fmt.Println("own network namespace:", netns)
	// Output:
	// args: [sh -c make test]
	// read-only root: true no new privileges: true
	// pids limit: 64
	// seccomp default action: SCMP_ACT_ERRNO
	// own network namespace: true
}
