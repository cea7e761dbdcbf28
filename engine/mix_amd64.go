//go:build amd64 && !purego

package engine

import "golang.org/x/sys/cpu"

// blendKernel reports whether the AVX2 MixUp kernel can run here;
// TestBlendKernel checks it against the Go loop.
var blendKernel = cpu.X86.HasAVX2

//go:noescape
func blend32AVX2(dst, src *float32, n int, m, l float32)
