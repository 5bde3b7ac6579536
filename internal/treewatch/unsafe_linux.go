package treewatch

import "unsafe"

// unsafePointer is the address of b's first byte, for reading a kernel
// record laid out there.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
