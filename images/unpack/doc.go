// Package unpack unpacks an image of an OCI image layout on disk into a
// root file system, once per manifest digest, with umoci's unpacker in
// its rootless mode (see package images for what that keeps and what it
// takes away).
//
// It is a package of its own because umoci and what it links (zstd,
// protobuf, logrus, go-mtree...) cost every program that links them
// about a millisecond of package initialisation at each start. The hutch
// CLI starts once per command, so it does not link them: it runs the
// hutch-image helper (cmd/hutch-image), which is this package's Layout
// behind a command line. A Go program that runs on images calls Layout
// itself.
package unpack
