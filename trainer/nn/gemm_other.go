//go:build !amd64 || purego

package nn

func kernel(c *float32, ldc int, pa, pb []float32, kb int) { kernelGo(c, ldc, pa, pb, kb) }

func setKernel(string) {}

func kernels() []string { return []string{"go"} }
