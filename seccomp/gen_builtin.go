//go:build ignore

// gen_builtin compiles the built-in filters (seccomp.Builtins) with the
// libseccomp it is linked against and writes their programs to
// precompiled/, which the package embeds. go generate ./seccomp runs it;
// TestPrecompiled says when it must run again.
package main

import (
	"log"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hutchbox/hutch/seccomp"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen_builtin: ")
	// The package embeds programs for linux/amd64 only: a program checks
	// each system call's architecture against the one it was compiled on.
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		log.Fatalf("the embedded programs are linux/amd64's; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	written := map[string]bool{}
	for _, b := range seccomp.Builtins() {
		prog, err := b.Compile()
		if err != nil {
			log.Fatalf("%s: %v", b, err)
		}
		f := filepath.Join("precompiled", string(b)+".bpf")
		if err := os.WriteFile(f, prog, 0o644); err != nil {
			log.Fatal(err)
		}
		written[f] = true
	}
	// Programs of filters that are no longer built in. (They go last: the
	// package, this program included, builds only with some to embed.)
	old, err := filepath.Glob(filepath.Join("precompiled", "*.bpf"))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range old {
		if !written[f] {
			if err := os.Remove(f); err != nil {
				log.Fatal(err)
			}
		}
	}
}
