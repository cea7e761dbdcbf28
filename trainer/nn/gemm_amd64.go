//go:build amd64 && !purego

package nn

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The assembly micro-kernels: AVX-512 where the CPU has it (a 12×16 tile),
// else AVX2 with FMA (two 6×16 halves); the tests check both against
// kernelGo.
var (
	useAVX512 = cpu.X86.HasAVX512F
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

//go:noescape
func kernelAVX2(c *float32, ldc int, pa, pb *float32, kb, astride int)

//go:noescape
func kernelAVX512(c *float32, ldc int, pa, pb *float32, kb int)

func kernel(c *float32, ldc int, pa, pb []float32, kb int) {
	_ = pa[kb*mr-1]
	_ = pb[kb*nr-1]
	switch {
	case useAVX512:
		kernelAVX512(c, ldc, unsafe.SliceData(pa), unsafe.SliceData(pb), kb)
	case useAVX2:
		kernelAVX2(c, ldc, unsafe.SliceData(pa), unsafe.SliceData(pb), kb, 4*mr)
		c6 := (*float32)(unsafe.Add(unsafe.Pointer(c), 4*6*ldc))
		kernelAVX2(c6, ldc, &pa[6], unsafe.SliceData(pb), kb, 4*mr)
	default:
		kernelGo(c, ldc, pa, pb, kb)
	}
}

// setKernel chooses the kernel for tests: "avx512", "avx2" or "go" (where
// the CPU has it).
func setKernel(k string) {
	useAVX512 = k == "avx512" && cpu.X86.HasAVX512F
	useAVX2 = (k == "avx2" || k == "avx512") && cpu.X86.HasAVX2 && cpu.X86.HasFMA
}

// kernels lists the kernels this CPU can run.
func kernels() []string {
	k := []string{"go"}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		k = append(k, "avx2")
	}
	if cpu.X86.HasAVX512F {
		k = append(k, "avx512")
	}
	return k
}
