package hostgit

import "os"

// openUntrusted opens path for reading. (Windows has no FIFOs to block
// on; a symbolic link is followed.)
func openUntrusted(path string) (*os.File, error) { return os.Open(path) }

// processGone reports false: nothing is swept on Windows.
func processGone(pid int) bool { return false }

// ownedByMe reports false on Windows.
func ownedByMe(fi os.FileInfo) bool { return false }
