// Command gostart does nothing. BenchmarkCLI times its whole process as
// the floor under any command written in Go on the machine: the loader,
// libc and the Go runtime's start, with cgo linked as hutch's is.
package main

import "C"

func main() {}
