//go:build !linux && !darwin

package runtime

// defaultMemory is 0 where hutch has no backend: New refuses there anyway.
func defaultMemory() int64 { return 0 }
