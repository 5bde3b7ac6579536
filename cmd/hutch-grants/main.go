// Command hutch-grants keeps the remembered grants' database for the
// hutch CLI: hutch grants and hutch serve run it, beside hutch or on
// $PATH, and ask it for the grants one JSON line at a time
// (internal/grantshelper), until its standard input ends.
//
//	hutch-grants --db FILE
//
// It is a program of its own so that hutch does not link SQLite: its
// packages cost every hutch command (a hutch run first of all) a third
// of its start in package initialisation, and only hutch grants and
// hutch serve keep grants. It exits 0 when its input ends, 1 when the
// database cannot be opened or a request cannot be read, 2 for a command
// line it does not take.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hutchbox/hutch/approvals"
	"github.com/hutchbox/hutch/approvals/grantsdb"
	"github.com/hutchbox/hutch/internal/grantshelper"
)

func main() {
	fs := flag.NewFlagSet("hutch-grants", flag.ContinueOnError)
	db := fs.String("db", "", "the grants database, created if missing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hutch-grants --db FILE\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *db == "" || fs.NArg() != 0 {
		fs.Usage()
		os.Exit(2)
	}
	err := grantshelper.Serve(os.Stdin, os.Stdout, func() (approvals.Backend, error) { return grantsdb.Open(*db) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "hutch-grants:", err)
		os.Exit(1)
	}
}
