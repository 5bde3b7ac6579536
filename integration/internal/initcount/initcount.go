// Package initcount is a package of a host program whose init function
// has side effects: when a file named like the running executable plus
// CounterSuffix exists, every process that runs this init appends its pid
// to it, then sleeps for the duration written in the executable's
// SleepSuffix file, if there is one. The count says how many processes ran
// the host program's Go code; the sleep, where that start lands in a
// spawn. The files, not the environment, switch it on: a process the host
// re-executes need not inherit its environment.
//
// Go initializes packages in import-path order once their imports are:
// this one, importing only the standard library and sorting before
// github.com/hutchbox/hutch/nsinit, runs before nsinit's own init, so any
// process that starts the host binary's Go runtime, as a re-executed init
// would, runs it.
package initcount

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The files beside the executable that switch the side effects on.
const (
	CounterSuffix = ".initcount"
	SleepSuffix   = ".initsleep"
)

func init() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.OpenFile(exe+CounterSuffix, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	if b, err := os.ReadFile(exe + SleepSuffix); err == nil {
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			time.Sleep(d)
		}
	}
}
