//go:build !amd64 || purego

package trainer

func kernel(c *float32, ldc int, pa, pb []float32, kb int) { kernelGo(c, ldc, pa, pb, kb) }

func setKernel(string) {}

func kernels() []string { return []string{"go"} }
