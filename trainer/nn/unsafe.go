package nn

import "unsafe"

// unsafeSlice is the n floats starting at p.
func unsafeSlice(p *float32, n int) []float32 { return unsafe.Slice(p, n) }
