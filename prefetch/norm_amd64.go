//go:build amd64 && !purego

package prefetch

import "golang.org/x/sys/cpu"

// affineKernel and halfKernel report whether the AVX2 kernels can run here
// (binary16 needs F16C too). TestNormKernelMatchesTables checks them
// against the tables.
var (
	affineKernel = cpu.X86.HasAVX2
	halfKernel   = cpu.X86.HasAVX2 && cpu.X86.HasF16C
)

//go:noescape
func affine32AVX2(dst *float32, src *byte, n int, sb *[48]float32)

//go:noescape
func affine16AVX2(dst *uint16, src *byte, n int, sb *[48]float32)
