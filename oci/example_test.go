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
	form, err := oci.Export(p, []string{"sh", "-c", "make test"}, oci.Options{})
	if err != nil {
		log.Fatal(err) // the policy's own errors, as runtime.New's
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
