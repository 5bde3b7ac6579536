//go:build amd64 && !purego

package leaks

import "golang.org/x/sys/cpu"

// blockPassOK says the processor runs blockMasks.
var blockPassOK = cpu.X86.HasAVX2

// blockMasks writes the masks of the n blocks of 64 bytes at p, reading
// 64n+2 bytes (blockReach for the last), into cand[:n] and alpha[:n].
//
//go:noescape
func blockMasks(t *blockTables, p *byte, n int, cand, alpha *uint64)
