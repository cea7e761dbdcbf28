//go:build amd64 && !purego

package trainer

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 reports whether the assembly micro-kernel can run here; the tests
// check it against kernelGo.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func kernelAVX2(c *float32, ldc int, pa, pb *float32, kb int)

func kernel(c *float32, ldc int, pa, pb []float32, kb int) {
	if useAVX2 {
		_ = pa[kb*mr-1]
		_ = pb[kb*nr-1]
		kernelAVX2(c, ldc, unsafe.SliceData(pa), unsafe.SliceData(pb), kb)
		return
	}
	kernelGo(c, ldc, pa, pb, kb)
}

func setKernel(asm bool) { useAVX2 = asm && cpu.X86.HasAVX2 && cpu.X86.HasFMA }
