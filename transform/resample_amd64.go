//go:build amd64 && !purego

package transform

import "golang.org/x/sys/cpu"

// resampleKernel reports whether the AVX2 resampling kernels can run here;
// tests turn it off to check the pure-Go loops against them.
var resampleKernel = cpu.X86.HasAVX2

// The resampling passes in assembly: see resample_amd64.s.
//
//go:noescape
func cvtRowAVX2(dst *float32, src *byte, n8 int)

//go:noescape
func hpassAVX2(dst, row *float32, idx *int32, wgt *float32, taps, n8, stride int)

//go:noescape
func vpassAVX2(dst *byte, mid *float32, stride int, wgt *float32, taps, n8 int)
