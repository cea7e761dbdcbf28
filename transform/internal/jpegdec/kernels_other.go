//go:build !amd64 || purego

package jpegdec

// Where there are no assembly kernels, the Go ones run.

func yccRGB(y, cb, cr, r, g, b []byte)        { yccRGBGo(y, cb, cr, r, g, b) }
func fancyH2(out, in []byte)                  { fancyH2Go(out, in) }
func fancyH2V2(out, near, far []byte)         { fancyH2V2Go(out, near, far) }
func fancyV2(out, near, far []byte, bias int) { fancyV2Go(out, near, far, bias) }

func idct8(blk *[64]int16, q *[64]int32, dst []byte, stride int) { idct8Go(blk, q, dst, stride) }
func idct4(blk *[64]int16, q *[64]int32, dst []byte, stride int) { idct4Go(blk, q, dst, stride) }
func idct2(blk *[64]int16, q *[64]int32, dst []byte, stride int) { idct2Go(blk, q, dst, stride) }
