//go:build !amd64 || purego

package trainer

const useAVX2 = false

func kernel(c *float32, ldc int, pa, pb []float32, kb int) { kernelGo(c, ldc, pa, pb, kb) }

func setKernel(bool) {}
