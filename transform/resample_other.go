//go:build !amd64 || purego

package transform

// resampleKernel is false where there are no assembly resampling kernels.
var resampleKernel = false

func cvtRowAVX2(dst *float32, src *byte, n8 int) { panic("transform: no resampling kernel") }
func hpassAVX2(dst, row *float32, idx *int32, wgt *float32, taps, n8, stride int) {
	panic("transform: no resampling kernel")
}
func vpassAVX2(dst *byte, mid *float32, stride int, wgt *float32, taps, n8 int) {
	panic("transform: no resampling kernel")
}
