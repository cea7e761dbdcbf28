//go:build !amd64 || purego

package engine

const blendKernel = false

func blend32AVX2(dst, src *float32, n int, m, l float32) { panic("unreachable") }
