package prefetch

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/pipefeed/pipe/transform"
)

// MaxNormChannels is the most channels a Norm converts.
const MaxNormChannels = 4

// Norm is the conversion of normalize where=device: value v (uint8) of
// channel c becomes float32(v)*Scale[c] + Bias[c], with the product and the
// sum each rounded to float32 (no fused multiply-add), so that the CPU device
// and the CUDA kernel give the same bits.
type Norm struct {
	// Scale and Bias hold one value per channel, 1 to MaxNormChannels.
	Scale, Bias []float32
	// Plane is the number of consecutive values of one channel in a
	// channels-first layout (H×W of a sample); 0 means channels-last, where
	// the channels interleave value by value.
	Plane int
	// Half writes IEEE binary16 (rounded to nearest even) instead of
	// float32.
	Half bool

	once  sync.Once
	lut32 [][256]float32
	lut16 [][256]uint16
	// pat holds the AVX2 kernels' 24 scales and 24 biases: one uniform
	// pattern per channel for channels-first, one interleaved otherwise.
	pat [][48]float32
}

// NewNorm returns the conversion (v/255 - mean[c]) / std[c] for the given
// channel count, with mean and std on the [0, 1] scale (one value, or one
// per channel) as torchvision's Normalize after ToTensor.
func NewNorm(mean, std []float64, channels, plane int, half bool) (*Norm, error) {
	k := &Norm{Plane: plane, Half: half}
	for c := range channels {
		m, s := pick(mean, c), pick(std, c)
		k.Scale = append(k.Scale, float32(1/(255*s)))
		k.Bias = append(k.Bias, float32(-m/s))
	}
	if err := k.check(); err != nil {
		return nil, err
	}
	return k, nil
}

func pick(v []float64, c int) float64 {
	if len(v) == 1 {
		return v[0]
	}
	if c < len(v) {
		return v[c]
	}
	return math.NaN()
}

func (k *Norm) check() error {
	c := len(k.Scale)
	if c < 1 || c > MaxNormChannels || len(k.Bias) != c {
		return fmt.Errorf("prefetch: normalize on the device takes 1 to %d channels with a scale and bias each, not %d and %d", MaxNormChannels, len(k.Scale), len(k.Bias))
	}
	if k.Plane < 0 {
		return fmt.Errorf("prefetch: normalize plane %d", k.Plane)
	}
	for i := range c {
		for _, f := range []float32{k.Scale[i], k.Bias[i]} {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("prefetch: normalize channel %d: scale %g, bias %g: want finite values", i, k.Scale[i], k.Bias[i])
			}
		}
	}
	return nil
}

// outSize is the size of one output value in bytes.
func (k *Norm) outSize() int {
	if k.Half {
		return 2
	}
	return 4
}

// OutBytes is the size of n converted values.
func (k *Norm) OutBytes(n int) int { return n * k.outSize() }

// Value is the conversion of one value of channel c.
func (k *Norm) Value(c int, v uint8) float32 {
	return float32(float32(v)*k.Scale[c]) + k.Bias[c]
}

func (k *Norm) tables() {
	k.lut32 = make([][256]float32, len(k.Scale))
	if k.Half {
		k.lut16 = make([][256]uint16, len(k.Scale))
	}
	nc := len(k.Scale)
	if k.Plane > 0 {
		k.pat = make([][48]float32, nc)
		for c := range nc {
			for j := range 24 {
				k.pat[c][j], k.pat[c][24+j] = k.Scale[c], k.Bias[c]
			}
		}
	} else {
		k.pat = make([][48]float32, 1)
		for j := range 24 {
			k.pat[0][j], k.pat[0][24+j] = k.Scale[j%nc], k.Bias[j%nc]
		}
	}
	for c := range k.Scale {
		for v := range 256 {
			f := k.Value(c, uint8(v))
			k.lut32[c][v] = f
			if k.Half {
				k.lut16[c][v] = transform.Float32To16(f)
			}
		}
	}
}

// Apply converts src into dst (len(src) values of OutBytes(1) bytes) on
// the calling goroutine: the CPU device's kernel. With AVX2 it computes
// eight values per instruction; otherwise each channel's 256 results are
// computed once, so a value costs a load and a store. Both give Value's bits.
func (k *Norm) Apply(dst, src []byte) {
	n := len(src)
	if n == 0 {
		return
	}
	k.once.Do(k.tables)
	if (k.Half && halfKernel) || (!k.Half && affineKernel) {
		k.applyKernel(dst, src)
		return
	}
	if k.Half {
		convert(unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), n), src, k.lut16, k.Plane)
	} else {
		convert(unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), n), src, k.lut32, k.Plane)
	}
}

func convert[T float32 | uint16](out []T, src []byte, lut [][256]T, plane int) {
	nc := len(lut)
	if plane > 0 {
		for i := 0; i < len(src); i += plane {
			t := &lut[(i/plane)%nc]
			end := min(i+plane, len(src))
			o := out[i:end]
			for j, v := range src[i:end] {
				o[j] = t[v]
			}
		}
		return
	}
	if nc == 1 {
		t := &lut[0]
		for i, v := range src {
			out[i] = t[v]
		}
		return
	}
	for i, v := range src {
		out[i] = lut[i%nc][v]
	}
}

// applyKernel runs the AVX2 kernel over whole 24-value blocks of each run
// that shares a pattern (a channel plane, or everything when interleaved)
// and the tables over the rest.
func (k *Norm) applyKernel(dst, src []byte) {
	run := func(lo, hi int, pat *[48]float32) {
		m := (hi - lo) / 24 * 24
		if m > 0 {
			if k.Half {
				affine16AVX2((*uint16)(unsafe.Pointer(&dst[2*lo])), &src[lo], m, pat)
			} else {
				affine32AVX2((*float32)(unsafe.Pointer(&dst[4*lo])), &src[lo], m, pat)
			}
		}
		k.slow(dst, src, lo+m, hi)
	}
	if k.Plane == 0 {
		run(0, len(src), &k.pat[0])
		return
	}
	for i := 0; i < len(src); i += k.Plane {
		run(i, min(i+k.Plane, len(src)), &k.pat[(i/k.Plane)%len(k.pat)])
	}
}

// slow converts values lo to hi with the tables.
func (k *Norm) slow(dst, src []byte, lo, hi int) {
	nc := len(k.Scale)
	for i := lo; i < hi; i++ {
		c := i % nc
		if k.Plane > 0 {
			c = (i / k.Plane) % nc
		}
		if k.Half {
			*(*uint16)(unsafe.Pointer(&dst[2*i])) = k.lut16[c][src[i]]
		} else {
			*(*float32)(unsafe.Pointer(&dst[4*i])) = k.lut32[c][src[i]]
		}
	}
}
