// Command hutch-image unpacks an image of an OCI image layout for the
// hutch CLI: hutch run --image (and every command that takes --image)
// runs it, beside hutch or on $PATH, and reads its one JSON reply.
//
//	hutch-image --cache DIR -- LAYOUT[:TAG]
//
// It is a program of its own so that hutch does not link the unpacker:
// umoci and what it links cost every hutch command about a millisecond of
// package initialisation before it starts, and most commands run on no
// image. It exits 0 with the image unpacked, 1 with a reply saying why
// not, 2 for a command line it does not take.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/hutchbox/hutch/images"
	"github.com/hutchbox/hutch/images/unpack"
	"github.com/hutchbox/hutch/internal/imagehelper"
)

func main() {
	fs := flag.NewFlagSet("hutch-image", flag.ContinueOnError)
	cache := fs.String("cache", "", "the cache directory to unpack into (default: images.DefaultCache)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hutch-image [--cache DIR] -- LAYOUT[:TAG]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if *cache == "" {
		c, err := images.DefaultCache()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hutch-image:", err)
			os.Exit(2)
		}
		*cache = c
	}
	layout, tag := images.ParseRef(fs.Arg(0))
	im, err := unpack.Layout(context.Background(), layout, tag, *cache)
	if werr := imagehelper.Write(os.Stdout, im, err); werr != nil {
		fmt.Fprintln(os.Stderr, "hutch-image:", werr)
		os.Exit(1)
	}
	if err != nil {
		os.Exit(1)
	}
}
