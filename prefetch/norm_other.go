//go:build !amd64 || purego

package prefetch

const affineKernel, halfKernel = false, false

func affine32AVX2(dst *float32, src *byte, n int, sb *[48]float32) { panic("unreachable") }
func affine16AVX2(dst *uint16, src *byte, n int, sb *[48]float32)  { panic("unreachable") }
