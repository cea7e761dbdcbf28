//go:build amd64 && !purego

package jpegdec

import "golang.org/x/sys/cpu"

// The AVX2 kernels: IDCTs (idct_amd64.s), colour conversion and
// upsampling (colour_amd64.s). idct2 and, without AVX2, all of them run
// in Go.

// useAVX2 selects the colour and upsampling kernels of colour_amd64.s.
// They take 32 samples a step, the last step overlapping the one before:
// rows shorter than a step go to the Go kernels, and the outputs must not
// overlap the inputs.
var useAVX2 = cpu.X86.HasAVX2

func yccRGB(y, cb, cr, r, g, b []byte) {
	n := len(r)
	if !useAVX2 || n < 32 {
		yccRGBGo(y, cb, cr, r, g, b)
		return
	}
	y, cb, cr, g, b = y[:n], cb[:n], cr[:n], g[:n], b[:n]
	yccRGBAVX2(&y[0], &cb[0], &cr[0], &r[0], &g[0], &b[0], n)
}

// The 2:1 and 2:2 kernels leave the edge samples, whose neighbours repeat,
// to the Go ones.

func fancyH2(out, in []byte) {
	n := len(in)
	if !useAVX2 || n < 34 {
		fancyH2Go(out, in)
		return
	}
	out = out[:2*n]
	fancyH2Cols(out, in, 0, 1)
	fancyH2AVX2(&out[0], &in[0], n)
	fancyH2Cols(out, in, n-1, n)
}

func fancyH2V2(out, near, far []byte) {
	n := len(near)
	if !useAVX2 || n < 34 {
		fancyH2V2Go(out, near, far)
		return
	}
	far, out = far[:n], out[:2*n]
	fancyH2V2Cols(out, near, far, 0, 1)
	fancyH2V2AVX2(&out[0], &near[0], &far[0], n)
	fancyH2V2Cols(out, near, far, n-1, n)
}

func fancyV2(out, near, far []byte, bias int) {
	n := len(out)
	if !useAVX2 || n < 32 {
		fancyV2Go(out, near, far, bias)
		return
	}
	near, far = near[:n], far[:n]
	fancyV2AVX2(&out[0], &near[0], &far[0], n, bias)
}

// The assembly kernels, for rows at least one step long.

//go:noescape
func yccRGBAVX2(y, cb, cr, rp, gp, bp *byte, n int)

//go:noescape
func fancyH2AVX2(out, in *byte, n int)

//go:noescape
func fancyH2V2AVX2(out, near, far *byte, n int)

//go:noescape
func fancyV2AVX2(out, near, far *byte, n, bias int)

// idctAVX2 selects the IDCTs of idct_amd64.s, which give idct8Go's and
// idct4Go's samples for every block of real image data (see there). They
// store whole rows unchecked, so a destination too short for them, or a
// stride shorter than a row, goes to the Go ones, which panic as slicing
// does.
var idctAVX2 = cpu.X86.HasAVX2

func idct8(blk *[64]int16, q *[64]int32, dst []byte, stride int) {
	if !idctAVX2 || stride < 8 || stride > len(dst) || 7*stride+8 > len(dst) {
		idct8Go(blk, q, dst, stride)
		return
	}
	idct8AVX2(blk, q, &dst[0], stride)
}

func idct4(blk *[64]int16, q *[64]int32, dst []byte, stride int) {
	if !idctAVX2 || stride < 4 || stride > len(dst) || 3*stride+4 > len(dst) {
		idct4Go(blk, q, dst, stride)
		return
	}
	idct4AVX2(blk, q, &dst[0], stride)
}

// idct8AVX2 and idct4AVX2 write rows of 8 and 4 samples at dst, stride
// apart.
//
//go:noescape
func idct8AVX2(blk *[64]int16, q *[64]int32, dst *byte, stride int)

//go:noescape
func idct4AVX2(blk *[64]int16, q *[64]int32, dst *byte, stride int)

func idct2(blk *[64]int16, q *[64]int32, dst []byte, stride int) { idct2Go(blk, q, dst, stride) }
