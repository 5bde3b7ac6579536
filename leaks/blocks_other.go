//go:build !amd64 || purego

package leaks

// blockPassOK says the processor runs blockMasks: here it has none.
const blockPassOK = false

func blockMasks(t *blockTables, p *byte, n int, cand, alpha *uint64) {
	panic("leaks: no block pass on this processor")
}
